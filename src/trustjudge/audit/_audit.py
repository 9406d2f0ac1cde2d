"""Consistency audit: conflict ratio, non-transitivity, position/length bias, agreement with humans.

Pure maths over the judgment records the CLI writes (plain dicts, one per JSONL line); nothing here
calls a model. Definitions: ../shared/TRUSTJUDGE.md sections 1, 3 and 6. Unscored judgments never
enter a denominator; they are counted and reported instead. The conventions shared with the injection
measure and the report (the newest of repeated records wins, nan for an empty rate, seeded percentile
bootstraps over items) live in :mod:`trustjudge.audit._stats`.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ._injection import InjectionEffect, injection_effect
from ._stats import (
    CI,
    NAN,
    NO_CI,
    Floats,
    Record,
    dedupe_pairs,
    dedupe_scores,
    finite,
    jsonable,
    percentile_ci,
    present,
    rate,
    resample_counts,
    score_value,
)
from ._stats import bootstrap_ratio as bootstrap_ratio
from ..engine._scoring import AGGREGATIONS, SCORE_METHODS, argmax_verdict

# The names other modules and tests import from here (defined in _stats since the injection measure
# needs them too).
_dedupe_pairs, _dedupe_scores, _resample_counts = dedupe_pairs, dedupe_scores, resample_counts

Relation = Literal[">", "<", "="]
Violation = Literal["circular", "equivalence"]
Row = tuple[str, str, str, float, float, float, int]
VERDICTS = ("first", "second", "tie")
DEFAULT_MAX_SUBSETS = 200_000
_RELATION: dict[str, Relation] = {"first": ">", "second": "<", "tie": "="}
_FLIP: dict[Relation, Relation] = {">": "<", "<": ">", "=": "="}
_SIGN = {"first": 1, "second": -1, "tie": 0}


@dataclass(frozen=True)
class CRResult:
    """Conflict ratio of one scoring method against one aggregation (``excluded``: pairs lacking data)."""

    conflicts: int
    counted: int
    ratio: float
    ties_in_verdicts: int
    items: int
    excluded: int = 0
    delta: float = 0.0
    ci: CI = NO_CI


@dataclass(frozen=True)
class NTRResult:
    """NTR_k of one aggregation, with the tie count of its ``judged`` pairs (read NTR next to it)."""

    k: int
    method: str
    violating: int
    circular: int
    equivalence: int
    valid_subsets: int
    ratio: float
    items: int
    judged: int = 0
    ties: int = 0
    skipped_items: int = 0
    ci: CI = NO_CI

    @property
    def tie_rate(self) -> float:
        """Share of ties among the judged pairs."""
        return rate(self.ties, self.judged)


@dataclass(frozen=True)
class SwapFlip:
    """Pairs whose two presentation orders give different argmax verdicts."""

    flips: int
    pairs: int
    rate: float


@dataclass(frozen=True)
class OrderBias:
    """Argmax labels of one presentation order (or both pooled): first-shown wins (A) and ties (C)."""

    order: str
    judged: int
    first_shown_wins: int
    ties: int
    first_shown_rate: float
    tie_rate: float


@dataclass(frozen=True)
class PositionBias:
    """Position bias per order and pooled over both."""

    order1: OrderBias
    order2: OrderBias
    overall: OrderBias


@dataclass(frozen=True)
class LengthBias:
    """Correlation of verdict sign with len(first) - len(second), and wins of the longer response."""

    method: str
    n: int
    pearson: float
    spearman: float
    longer_wins: int
    strict_unequal: int
    longer_win_rate: float


@dataclass(frozen=True)
class AnnotatorAgreement:
    """Annotators' agreement with each other (a ceiling for the judge); annotators are list positions."""

    pairs: int
    mean_kappa: float
    annotator_pairs: int
    loo_accuracy: float
    loo_n: int


@dataclass(frozen=True)
class PairwiseAgreement:
    """One aggregation's agreement with human labels; ``confusion`` rows: human, columns: verdict."""

    method: str
    n: int
    accuracy: float
    n_no_ties: int
    accuracy_no_ties: float
    kappa: float
    items: int
    confusion: tuple[tuple[int, int, int], ...]
    annotators: AnnotatorAgreement | None = None
    accuracy_ci: CI = NO_CI
    kappa_ci: CI = NO_CI


@dataclass(frozen=True)
class ScoreAgreement:
    """Rank correlation with human scores: mean over ``items`` varying items, and pooled over ``n``."""

    method: str
    spearman_mean: float
    kendall_mean: float
    items: int
    items_total: int
    spearman_pooled: float
    kendall_pooled: float
    n: int
    spearman_ci: CI = NO_CI


def relation(verdict: str) -> Relation:
    """Return the relation (``">"``, ``"<"``, ``"="``) of a pair's first response to its second.

    Args:
        verdict: ``"first"``, ``"second"`` or ``"tie"``.
    """
    try:
        return _RELATION[verdict]
    except KeyError:
        raise ValueError(f"unknown verdict {verdict!r}; expected one of {VERDICTS}") from None


def _compose(o1: Relation, o2: Relation) -> Relation | None:
    if o1 == "=":
        return o2
    if o2 in ("=", o1):
        return o1
    return None  # opposite strict relations say nothing about i vs l


def triple_violation(o1: Relation, o2: Relation, o3: Relation) -> Violation | None:
    """Return how the relations i?j (o1), j?l (o2), i?l (o3) contradict every weak order, if they do.

    ``"circular"`` when o3 is the strict opposite of the strict relation o1 and o2 imply,
    ``"equivalence"`` for the other violations, ``None`` when consistent.

    Args:
        o1: Relation of i to j.
        o2: Relation of j to l.
        o3: Relation of i to l.
    """
    implied = _compose(o1, o2)
    if implied is None or o3 == implied:
        return None
    return "circular" if implied != "=" and o3 == _FLIP[implied] else "equivalence"


def _triangle_kind(o1: Relation, o2: Relation, o3: Relation) -> Violation | None:
    # Whether a triangle violates does not depend on its orientation, but triple_violation's label does:
    # a cycle through one tie reads "circular" or "equivalence" depending on which edge is o3. Subsets
    # must not depend on response order, so only an all-strict cycle counts as circular.
    if triple_violation(o1, o2, o3) is None:
        return None
    return "equivalence" if "=" in (o1, o2, o3) else "circular"


def _verdict(record: Record, method: str) -> str | None:
    if record.get("unscored") is not None:
        return None
    value = (record.get("verdicts") or {}).get(method)
    if value is not None and value not in _SIGN:
        raise ValueError(f"unknown verdict {value!r} for {method} in item {record.get('item_id')!r}")
    return None if value is None else str(value)


def _ids(record: Record) -> tuple[str, str, str]:
    return str(record["item_id"]), str(record["first_id"]), str(record["second_id"])


def _cr_counts(score_records: Sequence[Record], compare_records: Sequence[Record], score_method: str,
               agg_method: str, delta: float) -> tuple[Floats, int]:
    """Per item ``[conflicts, counted, ties]`` (items x 3) and the number of excluded pairs."""
    if len({(r.get("scale"), r.get("scale_min")) for r in score_records}) > 1:  # 0-10 and 1-10 differ too
        raise ValueError("score records mix scales; pass one scale at a time")
    scores = {(str(r["item_id"]), str(r["response_id"])): score_value(r, score_method) for r in score_records}
    index: dict[str, int] = {}
    rows: list[tuple[int, float, float, int]] = []
    pairs = dedupe_pairs(compare_records)
    for rec in pairs:
        item, first, second = _ids(rec)
        verdict, sx, sy = _verdict(rec, agg_method), scores.get((item, first)), scores.get((item, second))
        if verdict is not None and sx is not None and sy is not None:
            rows.append((index.setdefault(item, len(index)), sx, sy, _SIGN[verdict]))
    codes, x, y, c = np.array(rows, dtype=np.float64).reshape(-1, 4).T
    conflict = ((x > y + delta) & (c <= 0)) | ((y > x + delta) & (c >= 0)) | ((np.abs(x - y) <= delta) & (c != 0))
    columns = [np.bincount(codes.astype(np.intp), weights=w, minlength=len(index)) for w in (conflict, c == c, c == 0)]
    return np.stack(columns, axis=1), len(pairs) - len(rows)


def conflict_ratio(score_records: Sequence[Record], compare_records: Sequence[Record], score_method: str,
                   agg_method: str, delta: float = 0.0, *, bootstrap: int = 0, seed: int = 0) -> CRResult:
    """Return the conflict ratio CR of pointwise scores against pairwise verdicts, pooled over items.

    Pairs missing a verdict or either score are not counted; they are reported in ``excluded``.

    Args:
        score_records: Score records of ONE scale.
        compare_records: Compare records.
        score_method: Key of ``scores`` (``discrete``, ``geval``, ``expected``, ``trustjudge``).
        agg_method: Key of ``verdicts`` (``single``, ``two_pass``, ``likelihood``, ``ppl``).
        delta: Score gaps ``|S_x - S_y| <= delta`` count as ties.
        bootstrap: Resamples for the 95% interval (0: none).
        seed: Bootstrap seed.
    """
    counts, excluded = _cr_counts(score_records, compare_records, score_method, agg_method, delta)
    conflicts, counted, ties = (int(x) for x in counts.sum(axis=0))
    ci = bootstrap_ratio(counts[:, 0], counts[:, 1], bootstrap=bootstrap, seed=seed)
    return CRResult(conflicts, counted, rate(conflicts, counted), ties, len(counts), excluded, delta, ci)


def delta_sweep(score_records: Sequence[Record], compare_records: Sequence[Record], score_method: str,
                agg: str, deltas: Iterable[float]) -> list[CRResult]:
    """Return the conflict ratio at each tolerance in ``deltas``, in order (no bootstrap).

    Args:
        score_records: Score records of one scale.
        compare_records: Compare records.
        score_method: Scoring method.
        agg: Aggregation method.
        deltas: Tolerances to try.
    """
    return [conflict_ratio(score_records, compare_records, score_method, agg, d) for d in deltas]


@lru_cache(maxsize=256)
def _combos(n: int, k: int) -> NDArray[np.intp]:
    return np.array(list(itertools.combinations(range(n), k)), dtype=np.intp).reshape(-1, k)


_REL_CODE: dict[Relation, int] = {">": 1, "<": 2, "=": 3}
_CODE_REL: dict[int, Relation] = {v: k for k, v in _REL_CODE.items()}
_KIND_CODE: dict[Violation | None, int] = {None: 0, "equivalence": 1, "circular": 2}


def _relation_matrix(records: Sequence[Record], method: str) -> NDArray[np.int8]:
    """Relation codes of row vs column response (0: not judged), responses in order of appearance."""
    index: dict[str, int] = {}
    for rec in records:
        for rid in _ids(rec)[1:]:
            index.setdefault(rid, len(index))
    rel = np.zeros((len(index), len(index)), dtype=np.int8)
    for rec in records:
        verdict = _verdict(rec, method)
        if verdict is not None:
            _, first, second = _ids(rec)
            a, b, r = index[first], index[second], relation(verdict)
            rel[a, b], rel[b, a] = _REL_CODE[r], _REL_CODE[_FLIP[r]]
    return rel


def _ntr_results(compare_records: Sequence[Record], method: str, ks: Sequence[int], *, max_subsets: int,
                 bootstrap: int, seed: int) -> list[NTRResult]:
    """NTR for several k at once, reading each item's relations and triangles only once."""
    if min(ks, default=3) < 3:
        raise ValueError(f"NTR needs k >= 3, got {min(ks)}")
    records = dedupe_pairs(compare_records)
    by_item: dict[str, list[Record]] = defaultdict(list)
    for rec in records:
        by_item[str(rec["item_id"])].append(rec)
    counts: dict[int, list[tuple[int, int, int]]] = {k: [] for k in ks}  # violating, circular, valid
    skipped = dict.fromkeys(ks, 0)
    for item_records in by_item.values():
        rel = _relation_matrix(item_records, method)
        n = len(rel)
        todo = [k for k in ks if n >= k and math.comb(n, k) <= max_subsets]
        for k in ks:
            skipped[k] += int(n >= k and k not in todo)
        if not todo:
            continue
        kinds = np.zeros((n, n, n), dtype=np.int8)
        for i, j, m in itertools.combinations(range(n), 3):
            if rel[i, j] and rel[j, m] and rel[i, m]:
                kind = _triangle_kind(_CODE_REL[rel[i, j]], _CODE_REL[rel[j, m]], _CODE_REL[rel[i, m]])
                kinds[i, j, m] = _KIND_CODE[kind]
        for k in todo:
            subsets, pairs, triples = _combos(n, k), _combos(k, 2), _combos(k, 3)
            judged = (rel[subsets[:, pairs[:, 0]], subsets[:, pairs[:, 1]]] > 0).all(axis=1)
            worst = kinds[subsets[:, triples[:, 0]], subsets[:, triples[:, 1]], subsets[:, triples[:, 2]]].max(axis=1)
            counts[k].append((int((judged & (worst > 0)).sum()), int((judged & (worst == 2)).sum()), int(judged.sum())))
    verdicts = [v for r in records if (v := _verdict(r, method)) is not None]
    results = []
    for k in ks:
        per_item = np.array(counts[k], dtype=np.float64).reshape(-1, 3)
        violating, circular, valid = (int(x) for x in per_item.sum(axis=0))
        results.append(NTRResult(
            k, method, violating, circular, violating - circular, valid, rate(violating, valid),
            int((per_item[:, 2] > 0).sum()), len(verdicts), verdicts.count("tie"), skipped[k],
            bootstrap_ratio(per_item[:, 0], per_item[:, 2], bootstrap=bootstrap, seed=seed)))
    return results


def ntr(compare_records: Sequence[Record], method: str, k: int, *, max_subsets: int = DEFAULT_MAX_SUBSETS,
        bootstrap: int = 0, seed: int = 0) -> NTRResult:
    """Return NTR_k: violating k-subsets over k-subsets whose pairs are all judged, pooled over items.

    A subset violates when any triangle in it contradicts every weak order (:func:`triple_violation`;
    this does not depend on the triangle's orientation, and pairs stored as (b, a) are flipped). It
    counts as circular when a violating triangle has three strict relations, else as equivalence (a
    tie is involved), so ``violating == circular + equivalence``.

    Args:
        compare_records: Compare records.
        method: Aggregation whose verdicts are read.
        k: Subset size, at least 3.
        max_subsets: Items with more k-subsets than this are skipped and counted in ``skipped_items``.
        bootstrap: Resamples for the 95% interval (0: none).
        seed: Bootstrap seed.
    """
    return _ntr_results(compare_records, method, [k], max_subsets=max_subsets, bootstrap=bootstrap, seed=seed)[0]


def _order_probs(order: Mapping[str, Any]) -> tuple[float, float, float] | None:
    if order.get("unscored") is not None or all(order.get(label) is None for label in "ABC"):
        return None
    a, b, c = (float(order.get(label) or 0.0) for label in "ABC")  # a missing label counts as 0
    return a, b, c


def _order_verdict(record: Record, order: Mapping[str, Any]) -> str | None:
    """Return the order's argmax verdict in pair terms (first / second / tie)."""
    probs = _order_probs(order)
    if probs is None:
        return None
    a, b, c = probs
    return argmax_verdict(a, b, c) if str(order.get("shown_first")) == _ids(record)[1] else argmax_verdict(b, a, c)


def swap_flip_rate(compare_records: Sequence[Record]) -> SwapFlip:
    """Return how often a pair's two orders give different argmax verdicts (pairs with both orders scored)."""
    verdicts = [[_order_verdict(r, o) for o in r.get("orders") or []] for r in dedupe_pairs(compare_records)]
    both = [v for v in verdicts if len(v) == 2 and None not in v]
    flips = sum(v[0] != v[1] for v in both)
    return SwapFlip(flips, len(both), rate(flips, len(both)))


def position_bias(compare_records: Sequence[Record]) -> PositionBias:
    """Return, per order and pooled, how often the first-shown response wins (label A) and how often C wins.

    Order 1 shows the pair's first response first. Each scored order counts on its own, even when the
    other order of its pair is unscored.
    """
    labels: list[list[str]] = [[], []]
    for rec in dedupe_pairs(compare_records):
        for order in rec.get("orders") or []:
            probs = _order_probs(order)
            if probs is not None:
                slot = 0 if str(order.get("shown_first")) == _ids(rec)[1] else 1
                labels[slot].append(argmax_verdict(*probs))  # "first" here means label A won

    def bias(name: str, got: list[str]) -> OrderBias:
        first, ties = got.count("first"), got.count("tie")
        return OrderBias(name, len(got), first, ties, rate(first, len(got)), rate(ties, len(got)))

    return PositionBias(bias("order 1", labels[0]), bias("order 2", labels[1]), bias("both", labels[0] + labels[1]))


def _correlation(fn: Callable[..., Any], x: Sequence[float], y: Sequence[float]) -> float:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return NAN  # undefined without variance; scipy would warn and return nan
    return float(fn(x, y)[0])


def _small_rank_correlations(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Spearman rho and Kendall tau-b of one item's few responses, by O(n^2) pair comparisons."""
    # Same values as scipy.stats.spearmanr / kendalltau, but scipy's ~1 ms per call dominated audits
    # of thousands of items with a handful of responses each.
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return NAN, NAN
    sx, sy = (np.sign(np.subtract.outer(v, v)) for v in (np.asarray(x, float), np.asarray(y, float)))
    rx, ry = ((s > 0).sum(axis=1) + ((s == 0).sum(axis=1) + 1) / 2 - (len(x) + 1) / 2 for s in (sx, sy))
    rho = float(rx @ ry / math.sqrt((rx @ rx) * (ry @ ry)))  # Pearson of centred average ranks
    upper = np.triu_indices(len(x), 1)
    untied_x, untied_y = (np.count_nonzero(s[upper]) for s in (sx, sy))
    return rho, float((sx[upper] * sy[upper]).sum() / math.sqrt(untied_x * untied_y))


def length_bias(compare_records: Sequence[Record], lengths: Mapping[tuple[str, str], int], method: str) -> LengthBias:
    """Return the correlation of verdict sign (+1 / -1 / 0) with ``len(first) - len(second)``.

    Over pairs with a verdict and both lengths; also how often the longer response wins a strict verdict.

    Args:
        compare_records: Compare records.
        lengths: Characters per ``(item_id, response_id)``.
        method: Aggregation method.
    """
    signs: list[float] = []
    diffs: list[float] = []
    for rec in dedupe_pairs(compare_records):
        item, first, second = _ids(rec)
        verdict, lx, ly = _verdict(rec, method), lengths.get((item, first)), lengths.get((item, second))
        if verdict is not None and lx is not None and ly is not None:
            signs.append(_SIGN[verdict])
            diffs.append(lx - ly)
    strict = [s * d for s, d in zip(signs, diffs, strict=True) if s != 0 and d != 0]
    longer = sum(x > 0 for x in strict)
    from scipy import stats  # type: ignore[import-untyped, unused-ignore]  # lazy: ~1.3 s of `import trustjudge`

    return LengthBias(method, len(signs), _correlation(stats.pearsonr, signs, diffs),
                      _correlation(stats.spearmanr, signs, diffs), longer, len(strict), rate(longer, len(strict)))


def _kappa(conf: Floats) -> Floats:
    """Cohen's kappa of (..., 3, 3) confusion matrices; nan without data or when chance agreement is 1."""
    # Written with numpy: scikit-learn's cohen_kappa_score would be the only reason to depend on it.
    total = conf.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(conf, axis1=-2, axis2=-1) / total
        chance = (conf.sum(axis=-1) * conf.sum(axis=-2)).sum(axis=-1) / total**2
        kappa = (observed - chance) / (1.0 - chance)
    return np.where(chance < 1.0, kappa, NAN)


def cohen_kappa(pairs: Iterable[tuple[str, str]]) -> float:
    """Return Cohen's kappa over the three verdict classes (nan without data or if chance agreement is 1).

    Args:
        pairs: ``(rater_1, rater_2)`` labels, each ``"first"``, ``"second"`` or ``"tie"``.
    """
    conf = np.zeros((3, 3), dtype=np.float64)
    for one, two in pairs:
        conf[VERDICTS.index(one), VERDICTS.index(two)] += 1
    return float(_kappa(conf))


def _majority(labels: Sequence[str]) -> str:
    ranked = Counter(labels).most_common()
    return "tie" if len(ranked) > 1 and ranked[0][1] == ranked[1][1] else ranked[0][0]


def annotator_agreement(compare_records: Sequence[Record]) -> AnnotatorAgreement | None:
    """Return the annotators' agreement on pairs with two or more labels (``None`` without such pairs).

    Mean Cohen's kappa over annotator-position pairs, and the accuracy of each label against the
    majority of the pair's other labels (a split majority is ``"tie"``).
    """
    labelled = [[a for a in r.get("annotators") or [] if a in _SIGN] for r in dedupe_pairs(compare_records)]
    labelled = [labels for labels in labelled if len(labels) >= 2]
    if not labelled:
        return None
    kappas = [cohen_kappa((x[a], x[b]) for x in labelled if len(x) > b)
              for a, b in itertools.combinations(range(max(map(len, labelled))), 2)]
    kappas = [k for k in kappas if not math.isnan(k)]
    hits = [x[i] == _majority(x[:i] + x[i + 1:]) for x in labelled for i in range(len(x))]
    return AnnotatorAgreement(len(labelled), float(np.mean(kappas)) if kappas else NAN, len(kappas),
                              rate(sum(hits), len(hits)), len(hits))


def pairwise_agreement(compare_records: Sequence[Record], method: str, *, bootstrap: int = 0,
                       seed: int = 0) -> PairwiseAgreement:
    """Return the agreement of one aggregation's verdicts with each pair's ``human`` label.

    Accuracy with ties, accuracy over pairs where neither side ties, 3-class Cohen's kappa, the
    confusion matrix, and the annotators' own agreement as a ceiling.

    Args:
        compare_records: Compare records.
        method: Aggregation method.
        bootstrap: Resamples for the 95% intervals of accuracy and kappa (0: none).
        seed: Bootstrap seed.
    """
    records = dedupe_pairs(compare_records)
    per_item: dict[str, Floats] = {}
    for rec in records:
        human, verdict = rec.get("human"), _verdict(rec, method)
        if human is None or verdict is None:
            continue
        if human not in _SIGN:
            raise ValueError(f"unknown human label {human!r} in item {rec.get('item_id')!r}")
        conf = per_item.setdefault(str(rec["item_id"]), np.zeros((3, 3), dtype=np.float64))
        conf[VERDICTS.index(human), VERDICTS.index(verdict)] += 1
    stacked = np.array(list(per_item.values()), dtype=np.float64).reshape(-1, 3, 3)
    total = stacked.sum(axis=0)
    n, strict = int(total.sum()), total[:2, :2]
    hits = np.trace(stacked, axis1=1, axis2=2)
    return PairwiseAgreement(
        method, n, rate(float(np.trace(total)), n), int(strict.sum()), rate(float(np.trace(strict)), strict.sum()),
        float(_kappa(total)), len(per_item), tuple((int(r[0]), int(r[1]), int(r[2])) for r in total),
        annotator_agreement(records),
        bootstrap_ratio(hits, stacked.sum(axis=(1, 2)), bootstrap=bootstrap, seed=seed),
        _bootstrap_kappa(stacked, bootstrap=bootstrap, seed=seed))


def score_agreement(score_records: Sequence[Record], method: str, *, bootstrap: int = 0,
                    seed: int = 0) -> ScoreAgreement:
    """Return Spearman and Kendall (tau-b) correlations of a method's scores with ``human_score``.

    Within each item, averaged over items where both sides vary, and pooled over all responses with
    both a score and a human score.

    Args:
        score_records: Score records of one scale.
        method: Scoring method.
        bootstrap: Resamples for the 95% interval of the mean within-item Spearman (0: none).
        seed: Bootstrap seed.
    """
    by_item: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for rec in dedupe_scores(score_records):
        score, human = score_value(rec, method), finite(rec.get("human_score"))
        if score is not None and human is not None:
            xs, ys = by_item[str(rec["item_id"])]
            xs.append(score)
            ys.append(human)
    per_item = [_small_rank_correlations(x, y) for x, y in by_item.values()]
    rhos = np.array([rho for rho, _ in per_item if not math.isnan(rho)], dtype=np.float64)
    taus = [tau for rho, tau in per_item if not math.isnan(rho)]
    all_x = [v for x, _ in by_item.values() for v in x]
    all_y = [v for _, y in by_item.values() for v in y]
    from scipy import stats  # type: ignore[import-untyped, unused-ignore]

    return ScoreAgreement(
        method, float(rhos.mean()) if rhos.size else NAN, float(np.mean(taus)) if taus else NAN, int(rhos.size),
        len(by_item), _correlation(stats.spearmanr, all_x, all_y), _correlation(stats.kendalltau, all_x, all_y),
        len(all_x), bootstrap_ratio(rhos, np.ones_like(rhos), bootstrap=bootstrap, seed=seed))


def unscored_counts(records: Iterable[Record]) -> dict[str, int]:
    """Return ``{reason: count}`` of unscored records, most frequent first (score or compare records)."""
    return dict(Counter(str(r["unscored"]) for r in records if r.get("unscored") is not None).most_common())


def _bootstrap_kappa(confusions: Floats, *, bootstrap: int, seed: int) -> CI:
    """Percentile 95% interval of Cohen's kappa, resampling per-item (items, 3, 3) confusions."""
    confusions = confusions[confusions.sum(axis=(1, 2)) > 0]
    if bootstrap <= 0 or len(confusions) == 0:
        return NO_CI
    weights = resample_counts(len(confusions), bootstrap, seed)
    return percentile_ci(_kappa((weights @ confusions.reshape(-1, 9)).reshape(bootstrap, 3, 3)))


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
             for r in _ntr_results(pairs, agg, ks, max_subsets=DEFAULT_MAX_SUBSETS, **boot)},
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
