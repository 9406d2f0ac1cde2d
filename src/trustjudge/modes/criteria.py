"""The ``criteria`` mode: each response judged on each named criterion, with a weighted aggregate."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ..engine import _aggregates as A
from ..engine import _scoring as S
from ..engine._engine import EMPTY_RESPONSE, Outcome
from ..io._items import Criterion, Item, Response
from ._prompts import (
    SCORE_MARKER,
    SYSTEM,
    Prompts,
    Protocol,
    Scale,
)
from ..engine._asking import Question
from ._records import (
    CriteriaRecord,
    CriterionResult,
)
from ._base import (
    grounding,
    _prefix,
    Cost,
    text_bytes,
    shared_bytes,
    by_responses,
    Task,
    _wmean,
    Format,
    PARTIAL,
    _require_criteria,
    criterion_text,
)
from ._registry import PROTOCOL_HELP, JudgeSettings, Mode, TemplateSpec, option
from ._prompts import scale as make_scale
from ._prompts import CRITERION_FIELDS

POSITION = 30
"""Where the mode comes among the built-in ones (listings, help)."""

@dataclass(frozen=True)
class CriteriaTask(Task):
    """Each response judged on each named criterion (one prompt per pair, ending at the score marker),
    then a weighted aggregate. All criteria of a response share the prompt up to the criterion."""

    kind: ClassVar[str] = "criteria"
    prompts: Prompts
    scale: Scale
    """The scale of criteria without level descriptions."""
    protocol: Protocol = "direct"
    criteria: tuple[Criterion, ...] = ()
    """The suite's criteria: used for items that carry none."""
    reweight: bool = False
    """Aggregate over the scored criteria when some are unscored (renormalising the weights); the record
    lists the criteria left out. Without it an unscored criterion leaves the aggregate unscored."""
    keep_distribution: bool = False

    def criteria_of(self, item: Item) -> tuple[Criterion, ...]:
        return item.criteria or self.criteria

    def check(self, item: Item) -> None:
        _require_criteria(self.criteria_of(item), item)

    def points(self, c: Criterion) -> int:
        return len(c.levels) if c.levels else self.scale.points

    def size(self, item: Item) -> int:
        return len(item.responses) * len(self.criteria_of(item))

    def cost(self, item: Item) -> Cost:
        criteria = self.criteria_of(item)
        n, k = len(item.responses), len(criteria)
        quoted = (n * k * shared_bytes(item) + k * sum(text_bytes(r.text) for r in item.responses)
                  + n * sum(text_bytes(criterion_text(c)) for c in criteria))
        return Cost(n * k, quoted, n * sum(self.points(c) for c in criteria))

    def parts(self, item: Item, size: int) -> list[Item]:
        k = len(self.criteria_of(item))
        return by_responses(item, size, lambda r: k)

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        out: list[Question | str] = []
        g = grounding(item)
        for r in item.responses:  # response-major: a response's criteria share the prompt up to the criterion
            for c in self.criteria_of(item):
                if not r.text.strip():
                    out.append(EMPTY_RESPONSE)
                    continue
                sc = Scale(self.points(c))
                user = self.prompts.render_criterion(item.question, r.text, item.context, item.reference,
                                                     criterion_text(c), sc.points,
                                                     self.prompts.score_task(sc, self.protocol), g)
                out.append(Question(fmt(SYSTEM, user, _prefix(self.protocol, SCORE_MARKER)), sc.labels,
                                    SCORE_MARKER))
        return out

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[CriteriaRecord]:
        it = iter(outcomes)
        for item in items:
            criteria = self.criteria_of(item)
            for r in item.responses:
                results = [self._result(c, next(it), r) for c in criteria]
                yield self._record(item, r, criteria, results, judge)

    def _result(self, c: Criterion, out: Outcome, r: Response) -> CriterionResult:
        sc = Scale(self.points(c))
        human = (r.human_criteria or {}).get(c.name)
        if out.probs is None or out.unscored is not None:
            return CriterionResult(c.name, c.weight, sc.points, dict.fromkeys(S.SCORE_METHODS), None, None,
                                   out.mass if out.probs is not None else None, out.unscored, human, out.critique)
        mean, var = A.distribution_moments(sc.values, out.probs)
        dist = dict(zip(sc.labels, out.probs)) if self.keep_distribution else None
        scores: dict[str, float | None] = dict(S.score_all(sc.values, out.probs))
        return CriterionResult(c.name, c.weight, sc.points, scores, math.sqrt(var),
                               S.entropy_bits(out.probs), out.mass, None, human, out.critique, dist)

    def _record(self, item: Item, r: Response, criteria: tuple[Criterion, ...], results: list[CriterionResult],
                judge: str) -> CriteriaRecord:
        common = len({res.points for res in results}) == 1
        top = results[0].points if common else 1
        scale = [1.0, float(top)] if common else [0.0, 1.0]

        def norm(x: float, points: int) -> float:  # onto the record's scale
            return x if common else (x - 1) / (points - 1)

        left_out = [res.name for res in results if res.unscored is not None]
        use = [res for res in results if res.unscored is None]
        empty = bool(item.responses) and not r.text.strip()
        unscored = EMPTY_RESPONSE if empty else (PARTIAL if left_out and (not self.reweight or not use) else None)
        aggregate: dict[str, float | None] = dict.fromkeys(S.SCORE_METHODS)
        spread = None
        if unscored is None:
            weights = [res.weight for res in use]
            if sum(weights) <= 0:
                unscored = PARTIAL
            else:
                for m in S.SCORE_METHODS:
                    vals = [norm(float(res.scores[m] or 0.0), res.points) for res in use]
                    aggregate[m] = _wmean(vals, weights)
                sds = [(res.sd or 0.0) / (1 if common else res.points - 1) for res in use]
                means = [norm(float(res.scores["expected"] or 0.0), res.points) for res in use]
                spread = A.weighted_aggregate(means, [s * s for s in sds], weights).sd
        human = None
        if results and all(res.human is not None for res in results):
            vals = [norm(float(res.human or 0.0), res.points) for res in results]
            weights = [res.weight for res in results]
            human = _wmean(vals, weights) if sum(weights) > 0 else None
        return CriteriaRecord(item.id, r.id, r.system, judge, self.protocol, results, aggregate, spread, scale,
                              unscored, left_out if self.reweight and unscored is None else [], human, r.human_score)


@dataclass(frozen=True)
class CriteriaOptions:
    criteria: tuple[Criterion, ...] = option((), "Criteria for items that carry none (a suite's).", suite="criteria")
    reweight: bool = option(False, "When a criterion is unscored, aggregate over the rest with renormalised "
                                   "weights (default: the aggregate is unscored).")
    scale: int = option(5, "Scale of criteria without level descriptions (5 or 10).", choices=(5, 10),
                        suite="scale")
    protocol: Protocol | None = option(None, PROTOCOL_HELP)
    keep_distribution: bool | None = option(None, "Keep each judgment's label distribution in the record; default: the "
                                                  "judge's.", flag="--distribution")


def build_criteria(j: JudgeSettings, o: CriteriaOptions) -> CriteriaTask:
    return CriteriaTask(j.prompts, make_scale(o.scale), o.protocol or j.protocol, tuple(o.criteria), o.reweight,
                        j.keep_distribution if o.keep_distribution is None else o.keep_distribution)


MODE = Mode(
    "criteria", CriteriaTask, CriteriaRecord, CriteriaOptions, build_criteria,
    templates={"criterion": TemplateSpec("criterion.txt", frozenset(CRITERION_FIELDS))},
    min_responses=1, summary="Each response judged on each named criterion, with a weighted aggregate.",
    command="criteria", route="/v1/criteria")
