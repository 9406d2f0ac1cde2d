"""The audit: every consistency and agreement metric over stored judgments, in one report.

Pure maths over the judgment records the CLI writes (plain dicts, one per JSONL line); nothing here
calls a model. Definitions: ../shared/TRUSTJUDGE.md sections 1, 3 and 6. Unscored judgments never
enter a denominator; they are counted and reported instead. The metrics live by job:
:mod:`~trustjudge.audit._consistency` (conflict ratio, non-transitivity), :mod:`~trustjudge.audit._bias`
(swap flips, position and length bias), :mod:`~trustjudge.audit._agreement` (agreement with humans) and
:mod:`~trustjudge.audit._injection` (prompt injection); :func:`audit` runs them all into an
:class:`AuditReport`. The conventions they share (the newest of repeated records wins, nan for an empty
rate, seeded percentile bootstraps over items) live in :mod:`trustjudge.audit._stats`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ._agreement import (
    AnnotatorAgreement,
    PairwiseAgreement,
    ScoreAgreement,
    annotator_agreement,
    cohen_kappa,
    pairwise_agreement,
    score_agreement,
)
from ._bias import LengthBias, OrderBias, PositionBias, SwapFlip, length_bias, position_bias, swap_flip_rate
from ._consistency import (
    DEFAULT_MAX_SUBSETS,
    CRResult,
    NTRResult,
    Relation,
    Violation,
    conflict_ratio,
    delta_sweep,
    ntr,
    ntr_results,
    relation,
    triple_violation,
)
from ._injection import InjectionEffect, injection_effect
from ._stats import (
    CI,
    NO_CI,
    VERDICTS,
    Record,
    bootstrap_ratio,
    dedupe_pairs,
    dedupe_scores,
    finite,
    jsonable,
    present,
    rate,
    resample_counts,
)
from ..engine._scoring import AGGREGATIONS, SCORE_METHODS

# The names other modules and tests import from here (defined in _stats since the injection measure
# needs them too).
_dedupe_pairs, _dedupe_scores, _resample_counts = dedupe_pairs, dedupe_scores, resample_counts

Row = tuple[str, str, str, float, float, float, int]


def unscored_counts(records: Iterable[Record]) -> dict[str, int]:
    """Return ``{reason: count}`` of unscored records, most frequent first (score or compare records)."""
    return dict(Counter(str(r["unscored"]) for r in records if r.get("unscored") is not None).most_common())


@dataclass(frozen=True)
class AuditReport:
    """Every audit number with the items, pairs or subsets it rests on.

    ``conflict`` is keyed by (scale, scoring method, aggregation), ``ntr`` by (aggregation, k),
    ``scores`` by (scale, scoring method); ``score_records`` counts score records per scale.
    """

    items: int
    pairs: int
    delta: float
    bootstrap: int
    seed: int
    conflict: Mapping[tuple[int, str, str], CRResult]
    ntr: Mapping[tuple[str, int], NTRResult]
    swap: SwapFlip
    position: PositionBias
    length: Mapping[str, LengthBias]
    pairwise: Mapping[str, PairwiseAgreement]
    annotators: AnnotatorAgreement | None
    scores: Mapping[tuple[int, str], ScoreAgreement]
    unscored_scores: Mapping[int, Mapping[str, int]]
    score_records: Mapping[int, int]
    unscored_compare: Mapping[str, int]
    injection: Mapping[int, InjectionEffect] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-serialisable data: tuple keys joined with "/", nan as ``None``."""
        result: dict[str, Any] = jsonable(asdict(self))
        return result

    def rows(self) -> list[Row]:
        """Return flat ``(section, method, metric, value, ci_low, ci_high, n)`` rows for a table.

        Rates are fractions in [0, 1]; ``n`` is the denominator the value rests on (pairs, subsets,
        labels, responses or items, as the metric says); a missing interval is nan.
        """
        rows: list[Row] = []

        def add(section: str, method: str, metric: str, value: float, n: int, ci: CI = NO_CI) -> None:
            rows.append((section, method, metric, float(value), ci[0], ci[1], int(n)))

        for (scale, method, agg), cr in self.conflict.items():
            add("conflict", f"{scale}pt {method} x {agg}", "CR", cr.ratio, cr.counted, cr.ci)
        for (agg, k), res in self.ntr.items():
            if agg not in {row[1] for row in rows if row[0] == "transitivity"}:
                add("transitivity", agg, "verdict_tie_rate", res.tie_rate, res.judged)
            add("transitivity", agg, f"NTR_{k}", res.ratio, res.valid_subsets, res.ci)
            add("transitivity", agg, f"NTR_{k} circular", rate(res.circular, res.valid_subsets), res.valid_subsets)
            add("transitivity", agg, f"NTR_{k} equivalence", rate(res.equivalence, res.valid_subsets),
                res.valid_subsets)
        for bias in (self.position.order1, self.position.order2, self.position.overall):
            add("position", bias.order, "first_shown_wins", bias.first_shown_rate, bias.judged)
            add("position", bias.order, "tie_rate", bias.tie_rate, bias.judged)
        add("position", "both orders", "swap_flip_rate", self.swap.rate, self.swap.pairs)
        for agg, lb in self.length.items():
            add("length", agg, "pearson", lb.pearson, lb.n)
            add("length", agg, "spearman", lb.spearman, lb.n)
            add("length", agg, "longer_wins", lb.longer_win_rate, lb.strict_unequal)
        for agg, pa in self.pairwise.items():
            add("human pairwise", agg, "accuracy", pa.accuracy, pa.n, pa.accuracy_ci)
            add("human pairwise", agg, "accuracy_no_ties", pa.accuracy_no_ties, pa.n_no_ties)
            add("human pairwise", agg, "kappa", pa.kappa, pa.n, pa.kappa_ci)
        if self.annotators is not None:
            add("human pairwise", "annotators", "mean_kappa", self.annotators.mean_kappa, self.annotators.pairs)
            add("human pairwise", "annotators", "loo_accuracy", self.annotators.loo_accuracy, self.annotators.loo_n)
        for (scale, method), sa in self.scores.items():
            name = f"{scale}pt {method}"
            add("human scores", name, "spearman_item_mean", sa.spearman_mean, sa.items, sa.spearman_ci)
            add("human scores", name, "kendall_item_mean", sa.kendall_mean, sa.items)
            add("human scores", name, "spearman_pooled", sa.spearman_pooled, sa.n)
            add("human scores", name, "kendall_pooled", sa.kendall_pooled, sa.n)
        for scale, reasons in self.unscored_scores.items():
            for reason, count in reasons.items():
                add("unscored", f"score {scale}pt", reason, count, self.score_records.get(scale, 0))
        for reason, count in self.unscored_compare.items():
            add("unscored", "compare", reason, count, self.pairs)
        for scale, eff in self.injection.items():
            name = f"{scale}pt {eff.method}"
            add("injection", name, "mean_shift", eff.mean_shift, eff.n, eff.shift_ci)
            add("injection", name, "top_label_plain", eff.top_before, eff.n)
            add("injection", name, "top_label_injected", eff.top_after, eff.n)
        return rows


def audit(score_records_by_scale: Mapping[int, Sequence[Record]], compare_records: Sequence[Record], *,
          delta: float = 0.0, ks: Sequence[int] = (3, 4, 5), lengths: Mapping[tuple[str, str], int] | None = None,
          bootstrap: int = 1000, seed: int = 0,
          injected_by_scale: Mapping[int, Sequence[Record]] | None = None) -> AuditReport:
    """Return every consistency and agreement metric over stored judgments.

    CR for every scoring method x aggregation present, NTR_k with the tie rate per aggregation,
    position, swap and length bias, agreement with humans, and unscored counts.

    Args:
        score_records_by_scale: Score records keyed by scale (5, 10, 100).
        compare_records: Compare records.
        delta: Score tolerance of the conflict ratio.
        ks: Subset sizes for NTR_k.
        lengths: Characters per ``(item_id, response_id)``; without them length bias is skipped.
        bootstrap: Resamples over items for the 95% intervals (0: none).
        seed: Bootstrap seed.
        injected_by_scale: Score records of the same responses with
            :data:`~trustjudge.audit._injection.INJECTION` appended, keyed
            by scale: the report then says how far the judge moves
            (:class:`~trustjudge.InjectionEffect`).
    """
    pairs = dedupe_pairs(compare_records)
    by_scale = {scale: dedupe_scores(records) for scale, records in sorted(score_records_by_scale.items())}
    aggs = present(pairs, "verdicts", AGGREGATIONS)
    boot = {"bootstrap": bootstrap, "seed": seed}
    conflict: dict[tuple[int, str, str], CRResult] = {}
    scores: dict[tuple[int, str], ScoreAgreement] = {}
    item_ids = {str(r["item_id"]) for r in pairs}
    for scale, records in by_scale.items():
        item_ids.update(str(r["item_id"]) for r in records)
        for method in present(records, "scores", SCORE_METHODS):
            for agg in aggs:
                conflict[(scale, method, agg)] = conflict_ratio(records, pairs, method, agg, delta, **boot)
            if any(finite(r.get("human_score")) is not None for r in records):
                scores[(scale, method)] = score_agreement(records, method, **boot)
    human = any(r.get("human") is not None for r in pairs)
    return AuditReport(
        items=len(item_ids), pairs=len(pairs), delta=delta, bootstrap=bootstrap, seed=seed, conflict=conflict,
        ntr={(agg, r.k): r for agg in aggs
             for r in ntr_results(pairs, agg, ks, max_subsets=DEFAULT_MAX_SUBSETS, **boot)},
        swap=swap_flip_rate(pairs), position=position_bias(pairs),
        length={agg: length_bias(pairs, lengths, agg) for agg in aggs} if lengths is not None else {},
        pairwise={agg: pairwise_agreement(pairs, agg, **boot) for agg in aggs} if human else {},
        annotators=annotator_agreement(pairs), scores=scores,
        unscored_scores={s: unscored_counts(r) for s, r in by_scale.items()},
        score_records={s: len(r) for s, r in by_scale.items()},
        unscored_compare=unscored_counts(pairs),
        injection={s: injection_effect(by_scale.get(s, []), recs, s, **boot)
                   for s, recs in sorted((injected_by_scale or {}).items())},
    )


@dataclass
class AuditRun:
    """An audit report with the records it was computed from."""

    report: AuditReport
    score_records: dict[int, list[dict[str, Any]]]
    compare_records: list[dict[str, Any]]


__all__ = [
    # the report
    "AuditReport", "AuditRun", "Row", "audit", "unscored_counts",
    # the metrics it runs, importable from here too
    "DEFAULT_MAX_SUBSETS", "VERDICTS", "AnnotatorAgreement", "CRResult", "LengthBias", "NTRResult", "OrderBias",
    "PairwiseAgreement", "PositionBias", "Relation", "ScoreAgreement", "SwapFlip", "Violation", "annotator_agreement",
    "bootstrap_ratio", "cohen_kappa", "conflict_ratio", "delta_sweep", "length_bias", "ntr", "pairwise_agreement",
    "position_bias", "relation", "score_agreement", "swap_flip_rate", "triple_violation",
]
