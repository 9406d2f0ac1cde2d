"""The ``criteria-compare`` mode (``criteria --pairwise``): every pair judged on each criterion in both
orders, aggregated by weight."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..engine import _aggregates as A
from ..engine import _scoring as S
from ..engine._asking import Question
from ..engine._engine import EMPTY_RESPONSE, Outcome
from ..errors import ConfigError
from ..io._items import Criterion, Item, Pair
from . import _audits
from ._base import (
    PARTIAL,
    Cost,
    Format,
    _pair_bytes,
    _prefix,
    _require_criteria,
    _wmean,
    by_pairs,
    criterion_text,
    grounding,
    judged_empty,
    pictures,
    shared_bytes,
    text_bytes,
)
from ._prompts import (
    CRITERION_PAIR_FIELDS,
    GRADED_LABELS,
    VERDICT_LABELS,
    VERDICT_MARKER,
    PairLabels,
    Prompts,
    Protocol,
)
from ._provenance import pair_se, stamp
from ._records import (
    CriteriaCompareRecord,
    CriterionVerdict,
)
from ._registry import PROTOCOL_HELP, JudgeSettings, Mode, TemplateSpec, option
from ._summaries import CRITERIA_COMPARE_SUMMARY
from .compare import label_probabilities

POSITION = 40
"""Where the mode comes among the built-in ones (listings, help)."""

# -- pairwise per criterion --------------------------------------------------------------------------

_FIRST_VIEW = ("first>>second", "first>second", "tie", "second>first", "second>>first")


@dataclass(frozen=True)
class CriteriaCompareTask(_audits.CriteriaHooks):
    """Every pair judged on each criterion in both presentation orders, combined by likelihood; with
    ``graded``, a 5-way verdict (A>>B .. B>>A) and its expected margin."""

    kind: ClassVar[str] = "criteria-compare"
    prompts: Prompts
    protocol: Protocol = "direct"
    criteria: tuple[Criterion, ...] = ()
    graded: bool = False
    reweight: bool = False
    labels: PairLabels | None = None
    """Verdict labels of your own with their preferences (AutoFigure's A / B / both good / both bad); ``None``:
    A, B, C (or the graded five)."""

    def criteria_of(self, item: Item) -> tuple[Criterion, ...]:
        return item.criteria or self.criteria

    def check(self, item: Item) -> None:
        _require_criteria(self.criteria_of(item), item)

    def count(self, item: Item) -> int:
        return len(item.all_pairs())

    def size(self, item: Item) -> int:
        return 2 * len(item.all_pairs()) * len(self.criteria_of(item))

    def cost(self, item: Item) -> Cost:
        criteria = self.criteria_of(item)
        pairs = list(_pair_bytes(item))
        p, k = len(pairs), len(criteria)
        quoted = 2 * (p * k * shared_bytes(item) + k * sum(pairs) + p * sum(text_bytes(criterion_text(c))
                                                                            for c in criteria))
        return Cost(2 * p * k, quoted, 2 * p * k * len(self.verdict_labels))

    def parts(self, item: Item, size: int) -> list[Item]:
        return by_pairs(item, size, 2 * len(self.criteria_of(item)))

    @property
    def verdict_labels(self) -> tuple[str, ...]:
        return self.labels.labels if self.labels is not None else GRADED_LABELS if self.graded else VERDICT_LABELS

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        out: list[Question | str] = []
        g = grounding(item)
        task = self.prompts.graded_task(self.protocol) if self.graded else self.prompts.verdict_task(self.protocol,
                                                                                                     self.labels)
        for pair in item.all_pairs():
            ra, rb = item.response(pair.first), item.response(pair.second)
            for x, y in ((ra, rb), (rb, ra)):  # order-major: one order's criteria share the prompt up to the criterion
                for c in self.criteria_of(item):
                    if judged_empty(ra) or judged_empty(rb):
                        out.append(EMPTY_RESPONSE)
                        continue
                    user = self.prompts.render_criterion_pair(item.question, x.text, y.text, item.context,
                                                              item.reference, criterion_text(c), task, g,
                                                              pictures(item, x, y))
                    out.append(Question(fmt(self.prompts.system, user, _prefix(self.protocol, VERDICT_MARKER)),
                                        self.verdict_labels, VERDICT_MARKER))
        return out

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome],
                judge: str) -> Iterator[CriteriaCompareRecord]:
        k = 0
        for item in items:
            criteria = self.criteria_of(item)
            n = len(criteria)
            for pair in item.all_pairs():
                first, second = outcomes[k:k + n], outcomes[k + n:k + 2 * n]
                k += 2 * n
                verdicts = [self._verdict(c, o1, o2) for c, o1, o2 in zip(criteria, first, second)]
                yield stamp(self._record(item, pair, verdicts, judge), [*first, *second])

    def _verdict(self, c: Criterion, o1: Outcome, o2: Outcome) -> CriterionVerdict:
        orders = []
        for out in (o1, o2):
            row: dict[str, Any] = {"unscored": out.unscored}
            if out.probs is not None:
                row.update(dict(zip(self.verdict_labels, out.probs)), mass=out.mass)
            if out.critique is not None:
                row["critique"] = out.critique
            orders.append(row)
        unscored = o1.unscored or o2.unscored
        if unscored is not None or o1.probs is None or o2.probs is None:
            return CriterionVerdict(c.name, c.weight, None, None, None, orders, unscored or "no_label_mass")
        graded = se = None
        if self.graded:
            combined = A.combine_orders(o1.probs, o2.probs)
            graded = dict(zip(_FIRST_VIEW, combined))
            probs = {"first": combined[0] + combined[1], "second": combined[3] + combined[4], "tie": combined[2]}
            margin = A.expected_margin(combined)
        else:
            collapse = self.labels.collapse if self.labels is not None else tuple
            d1 = S.from_order(*collapse(o1.probs), swapped=False)
            d2 = S.from_order(*collapse(o2.probs), swapped=True)
            f, s, t = S.likelihood_probs(d1, d2)
            total = f + s + t
            probs = {"first": f / total, "second": s / total, "tie": t / total}
            margin = probs["first"] - probs["second"]
            se = pair_se([((d.first, d.second, d.tie), o) for d, o in ((d1, o1), (d2, o2))])
        verdict = S.argmax_verdict(probs["first"], probs["second"], probs["tie"])
        own = label_probabilities(self.labels, o1.probs, o2.probs) if self.labels is not None else None
        return CriterionVerdict(c.name, c.weight, probs, verdict, margin, orders, None, graded, own,
                                None if se is None else dict(zip(("first", "second", "tie"), se)))

    def _record(self, item: Item, pair: Pair, verdicts: list[CriterionVerdict], judge: str) -> CriteriaCompareRecord:
        left_out = [v.name for v in verdicts if v.unscored is not None]
        use = [v for v in verdicts if v.unscored is None]
        empty = any(v.unscored == EMPTY_RESPONSE for v in verdicts)
        unscored = EMPTY_RESPONSE if empty else (PARTIAL if left_out and (not self.reweight or not use) else None)
        aggregate = margin = verdict = None
        weights = [v.weight for v in use]
        if unscored is None and sum(weights) > 0:
            aggregate = {key: _wmean([(v.probabilities or {})[key] for v in use], weights)
                         for key in ("first", "second", "tie")}
            margin = _wmean([v.margin or 0.0 for v in use], weights)
            verdict = S.argmax_verdict(aggregate["first"], aggregate["second"], aggregate["tie"])
        elif unscored is None:
            unscored = PARTIAL
        r1, r2 = item.response(pair.first), item.response(pair.second)
        return CriteriaCompareRecord(item.id, pair.first, pair.second, judge, self.protocol, verdicts, aggregate,
                                     margin, verdict, unscored, left_out if self.reweight and unscored is None else [],
                                     pair.human, r1.system, r2.system)


    audit_pairwise: ClassVar[bool] = True  # the audit hooks: :class:`._audits.CriteriaHooks`


@dataclass(frozen=True)
class CriteriaCompareOptions:
    criteria: tuple[Criterion, ...] = option((), "Criteria for items that carry none (a suite's).", suite="criteria")
    graded: bool = option(False, "5-way verdicts (A>>B .. B>>A) with an expected margin.")
    reweight: bool = option(False, "When a criterion is unscored, aggregate over the rest with renormalised "
                                   "weights (default: the aggregate is unscored).")
    protocol: Protocol | None = option(None, PROTOCOL_HELP)
    pair_labels: PairLabels | str | None = option(
        None, "Verdict labels of your own per criterion, each with the preference it stands for, e.g. "
              "'A=first,B=second,BOTH_GOOD=tie,BOTH_BAD=tie' (not with --graded).",
        parse=PairLabels.parse, flag="--labels", shown="A, B, C")


def build_criteria_compare(j: JudgeSettings, o: CriteriaCompareOptions) -> CriteriaCompareTask:
    labels = PairLabels.parse(o.pair_labels) if isinstance(o.pair_labels, str) else o.pair_labels
    if labels is not None and o.graded:
        raise ConfigError("criteria-compare takes --graded or --labels, not both")
    return CriteriaCompareTask(j.prompts, o.protocol or j.protocol, tuple(o.criteria), o.graded, o.reweight, labels)


MODE = Mode(
    "criteria-compare", CriteriaCompareTask, CriteriaCompareRecord, CriteriaCompareOptions, build_criteria_compare,
    templates={"criterion_pair": TemplateSpec("criterion_pair.txt", frozenset(CRITERION_PAIR_FIELDS))},
    min_responses=2, summary="Every pair judged on each criterion in both orders.",
    command="criteria --pairwise", route="/v1/criteria/compare",
    summary_metrics=CRITERIA_COMPARE_SUMMARY)
