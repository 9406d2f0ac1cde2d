"""Tasks: what to ask of the judge for an item, and how its answers become records.

A task is a small frozen object. ``questions`` turns an item into label questions (a prompt ending at a
marker, the labels that may follow it); ``records`` turns the outcomes of one chunk of items back into
typed records; ``run`` does both through an :class:`Asking` (a task that asks in stages, such as claims,
overrides it). The engine never sees a task, and :class:`~trustjudge.Judge` runs any of them the same way.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ..engine import _aggregates as A
from ..engine import _scoring as S
from ..engine._engine import EMPTY_RESPONSE, Outcome
from ..io._items import Check, Criterion, Item, Pair, Response
from ._prompts import (
    ANSWER_MARKER,
    GRADED_LABELS,
    SCORE_MARKER,
    SYSTEM,
    VERDICT_LABELS,
    VERDICT_MARKER,
    YES_NO,
    Grounding,
    LabelSet,
    Prompts,
    Protocol,
    Scale,
)
from ..engine._asking import Question, Sampling
from ._records import (
    CheckResult,
    ChecklistRecord,
    CompareRecord,
    CriteriaCompareRecord,
    CriteriaRecord,
    CriterionResult,
    CriterionVerdict,
    RecordBase,
    ScoreRecord,
)
from ..backends import GenerateRequest, Generation
from ..backends._recorded import RECORDED, RecordedBackend, recorded_prompt
from ..errors import BackendError, InputError

Format = Callable[[str, str, str], str]
"""``backend.format_prompt(system, user, assistant_prefix)``."""


@dataclass(frozen=True)
class Asking:
    """What a task's :meth:`Task.run` may ask of the judge (built by :meth:`Judge.run` per chunk of items)."""

    judge: str
    """The judge's name, as records give it."""
    fmt: Format
    """The backend's ``format_prompt(system, user, assistant_prefix)``."""
    labels: Callable[[Sequence[Question | str], Protocol], list[Outcome]]
    """Every question's outcome under a protocol (``cot``: a critique first), from the store where it has them."""
    generate: Callable[[Sequence[GenerateRequest]], list[Generation | BackendError]]
    """Stored generations (free text, such as claim extractions), from the store where it has them."""
    sampling: Sampling
    """The judge's sampling options (temperature, seed, max_new_tokens) for generations a task asks."""


def grounding(item: Item) -> Grounding:
    return Grounding(item.profile, item.knowledge, item.evidence)


def _prefix(protocol: Protocol, marker: str) -> str:
    return marker if protocol == "direct" else ""


@dataclass(frozen=True)
class Cost:
    """What judging items under a task asks of the judge (the service bounds each per request).

    Bytes and labels are summed over the judgments: a passage quoted into 300 prompts counts 300 times,
    as it is sent (and stored) 300 times; a 1-100 score reads 100 labels.
    """

    judgments: int = 0
    """Label questions (prompts), as :meth:`Task.size` counts them."""
    prompt_bytes: int = 0
    """UTF-8 bytes of the texts quoted into those prompts (question, context, reference, profile, knowledge,
    evidence, the response or pair, the criterion or check); the template's own words are not counted."""
    labels: int = 0
    """Labels whose probability the judge reads, over all the judgments."""

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.judgments + other.judgments, self.prompt_bytes + other.prompt_bytes,
                    self.labels + other.labels)


def text_bytes(text: str | None) -> int:
    """UTF-8 length of ``text`` (0 for ``None``)."""
    return len(text.encode("utf-8", "surrogatepass")) if text else 0


def shared_bytes(item: Item) -> int:
    """Bytes of the texts an item quotes into every one of its prompts: question, context, reference
    and grounding (profile, knowledge, evidence)."""
    return (text_bytes(item.question) + text_bytes(item.context) + text_bytes(item.reference)
            + text_bytes(item.profile) + text_bytes(item.knowledge) + sum(map(text_bytes, item.evidence)))


def by_responses(item: Item, size: int, per: Callable[[Response], int]) -> list[Item]:
    """``item`` cut into items of consecutive responses, of about ``size`` judgments each (``per(r)`` for a
    response); for a task whose judgments and records are each one response's, their records in order
    are the item's."""
    parts: list[Item] = []
    group: list[Response] = []
    n = 0
    for r in item.responses:
        group.append(r)
        n += per(r)
        if n >= size:
            parts.append(replace(item, responses=tuple(group), pairs=None))
            group, n = [], 0
    if group:
        parts.append(replace(item, responses=tuple(group), pairs=None))
    return parts if len(parts) > 1 else [item]


def by_pairs(item: Item, size: int, per_pair: int) -> list[Item]:
    """``item`` cut into items of consecutive pairs (all responses kept), of about ``size`` judgments each."""
    pairs = item.all_pairs()
    step = max(1, size // max(1, per_pair))
    if len(pairs) <= step:
        return [item]
    return [replace(item, pairs=pairs[i:i + step]) for i in range(0, len(pairs), step)]


def _pair_bytes(item: Item) -> Iterator[int]:
    """Per pair of ``item``, the bytes of its two responses."""
    sizes = {r.id: text_bytes(r.text) for r in item.responses}
    for pair in item.all_pairs():
        yield sizes.get(pair.first, 0) + sizes.get(pair.second, 0)


class Task(ABC):
    """Turns items into label questions and their outcomes into records."""

    kind: ClassVar[str]
    protocol: Protocol
    plan_note: ClassVar[str] = ""
    """What a plan (:meth:`Judge.plan`, ``--dry-run``) of this task leaves out, if anything."""
    chunk_weight: ClassVar[int] = 1
    """How much one of :meth:`size`'s questions weighs when items are cut into chunks of about
    ``Judge(chunk_size=...)`` questions (a task whose :meth:`size` is an upper bound weighs more)."""

    def check(self, item: Item) -> None:  # noqa: B027 (optional hook: most tasks judge any item)
        """Raise :class:`InputError` (naming the item's line) if this task cannot judge ``item``."""

    @abstractmethod
    def size(self, item: Item) -> int:
        """How many questions ``item`` asks."""

    def count(self, item: Item) -> int:
        """How many records ``item`` gives (one per response unless a task says otherwise)."""
        return len(item.responses)

    def parts(self, item: Item, size: int) -> list[Item]:
        """``item`` as items of about ``size`` judgments each whose records, in order, are the item's (a
        service takes turns by such parts). The default keeps the item whole."""
        return [item]

    def cost(self, item: Item) -> Cost:
        """What ``item`` costs (:class:`Cost`). This default bounds it from :meth:`size`: every judgment
        quoting the item's shared texts and its longest response, reading 100 labels."""
        n = self.size(item)
        longest = max((text_bytes(r.text) for r in item.responses), default=0)
        return Cost(n, n * (shared_bytes(item) + longest), n * 100)

    @abstractmethod
    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        """The item's questions in order; a ``str`` is an unscored reason (an empty response)."""

    @abstractmethod
    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[RecordBase]:
        """The records of ``items`` from their questions' outcomes, in the same order."""

    def run(self, items: Sequence[Item], ask: Asking) -> Iterator[RecordBase]:
        """The records of one chunk of (checked) ``items``: by default their questions, asked in one go under
        this task's protocol, then their records. A task that asks in stages overrides it."""
        questions = [q for item in items for q in self.questions(item, ask.fmt)]
        yield from self.records(items, ask.labels(questions, self.protocol), ask.judge)


def _wmean(values: Sequence[float], weights: Sequence[float]) -> float:
    """The weighted mean (``_aggregates.weighted_aggregate`` without variances)."""
    return A.weighted_aggregate(values, [0.0] * len(values), weights).mean


def check_item(task: Task, item: Item, file: str | None) -> None:
    """``task.check(item)``, its error naming the item (and ``file``, where the task could not)."""
    try:
        task.check(item)
    except InputError as exc:
        raise InputError(f"item {item.id!r} {exc.reason}", file=exc.file or file, line=exc.line,
                         field=exc.field) from None


# -- pointwise ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreTask(Task):
    """One holistic score per response on an integer scale."""

    kind: ClassVar[str] = "score"
    prompts: Prompts
    scale: Scale
    protocol: Protocol = "direct"
    keep_distribution: bool = False
    closing_mark: str | None = None

    def size(self, item: Item) -> int:
        return len(item.responses)

    def cost(self, item: Item) -> Cost:
        n = len(item.responses)
        return Cost(n, n * shared_bytes(item) + sum(text_bytes(r.text) for r in item.responses),
                    n * self.scale.points)

    def parts(self, item: Item, size: int) -> list[Item]:
        return by_responses(item, size, lambda r: 1)

    def question(self, item: Item, text: str, fmt: Format) -> Question | str:
        if not text.strip():
            return EMPTY_RESPONSE
        user = self.prompts.render_pointwise(item.question, text, item.context, item.reference, self.scale,
                                             self.protocol, grounding(item))
        return Question(fmt(SYSTEM, user, _prefix(self.protocol, SCORE_MARKER)), self.scale.labels, SCORE_MARKER)

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        return [self.question(item, r.text, fmt) for r in item.responses]

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[ScoreRecord]:
        scored = [i for i, o in enumerate(outcomes) if o.probs is not None and o.unscored is None]
        matrix = S.score_matrix(self.scale.values, [outcomes[i].probs for i in scored]) if scored else {}
        row_of = {i: n for n, i in enumerate(scored)}
        k = 0
        for item in items:
            for r in item.responses:
                yield self._record(item, r, outcomes[k], matrix, row_of.get(k), judge)
                k += 1

    def _record(self, item: Item, r: Response, out: Outcome, matrix: dict[str, Any], row: int | None,
                judge: str) -> ScoreRecord:
        scores: dict[str, float | None] = dict.fromkeys(S.SCORE_METHODS)
        entropy = None
        dist = None
        if row is not None:
            scores = {m: float(matrix[m][row]) for m in S.SCORE_METHODS}
            entropy = float(matrix["entropy"][row])
        if out.probs is not None and self.keep_distribution:
            dist = {lab: p for lab, p in zip(self.scale.labels, out.probs)}
        return ScoreRecord(item.id, r.id, r.system, judge, self.protocol, self.scale.points, scores, entropy,
                           out.mass if out.probs is not None else None, out.unscored, r.human_score, out.critique,
                           dist, self.closing_mark, method=out.method if out.probs is not None else None)


# -- pairwise ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompareTask(Task):
    """Every pair of an item judged in both presentation orders."""

    kind: ClassVar[str] = "compare"
    prompts: Prompts
    protocol: Protocol = "direct"
    delta: float = 0.0
    closing_mark: str | None = None

    def size(self, item: Item) -> int:
        return 2 * len(item.all_pairs())

    def count(self, item: Item) -> int:
        return len(item.all_pairs())

    def cost(self, item: Item) -> Cost:
        pairs = list(_pair_bytes(item))
        return Cost(2 * len(pairs), 2 * (len(pairs) * shared_bytes(item) + sum(pairs)),
                    2 * len(pairs) * len(VERDICT_LABELS))

    def parts(self, item: Item, size: int) -> list[Item]:
        return by_pairs(item, size, 2)

    def pair_questions(self, item: Item, pair: Pair, fmt: Format) -> tuple[Question | str, Question | str]:
        a, b = item.response(pair.first).text, item.response(pair.second).text
        if not a.strip() or not b.strip():
            return EMPTY_RESPONSE, EMPTY_RESPONSE
        qs = []
        for x, y in ((a, b), (b, a)):
            user = self.prompts.render_pairwise(item.question, x, y, item.context, item.reference, self.protocol,
                                                grounding(item))
            qs.append(Question(fmt(SYSTEM, user, _prefix(self.protocol, VERDICT_MARKER)), VERDICT_LABELS,
                               VERDICT_MARKER))
        return qs[0], qs[1]

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        return [q for pair in item.all_pairs() for q in self.pair_questions(item, pair, fmt)]

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[CompareRecord]:
        it = iter(outcomes)
        for item in items:
            for pair in item.all_pairs():
                yield self._record(item, pair, next(it), next(it), judge)

    def _record(self, item: Item, pair: Pair, o1: Outcome, o2: Outcome, judge: str) -> CompareRecord:
        ppl_source = "critique_perplexity" if self.protocol == "cot" else "verdict_probability"
        orders = []
        for shown_first, out in ((pair.first, o1), (pair.second, o2)):
            row: dict[str, Any] = {"shown_first": shown_first, "unscored": out.unscored}
            if out.probs is not None:
                row.update(dict(zip(VERDICT_LABELS, out.probs)), mass=out.mass, method=out.method)
            if out.critique_ppl is not None:
                row["critique_ppl"] = out.critique_ppl
            if out.critique is not None:
                row["critique"] = out.critique
            orders.append(row)
        unscored = o1.unscored or o2.unscored
        verdicts: dict[str, str | None] = dict.fromkeys(S.AGGREGATIONS)
        probabilities = None
        if unscored is None and o1.probs is not None and o2.probs is not None:
            d1 = S.from_order(*o1.probs, swapped=False, ppl=o1.critique_ppl)
            d2 = S.from_order(*o2.probs, swapped=True, ppl=o2.critique_ppl)
            verdicts = dict(S.aggregate_all(d1, d2, delta=self.delta))
            f, s, t = S.likelihood_probs(d1, d2)
            total = f + s + t
            probabilities = {"first": f / total, "second": s / total, "tie": t / total}
        r1, r2 = item.response(pair.first), item.response(pair.second)
        methods = {o.method for o in (o1, o2) if o.probs is not None}
        method = None if not methods else "exact" if methods == {"exact"} else "top_k"
        return CompareRecord(item.id, pair.first, pair.second, judge, self.protocol, verdicts, probabilities,
                             orders, unscored, ppl_source, pair.human, list(pair.annotators), r1.system, r2.system,
                             self.closing_mark, method=method)


# -- criteria (rubrics) ------------------------------------------------------------------------------

PARTIAL = "unscored_criteria"
"""Why a criteria or checklist record has no aggregate: one of its parts is unscored."""


def _require_criteria(criteria: tuple[Criterion, ...], item: Item) -> None:
    if not criteria:
        raise InputError("has no criteria, and no suite gives any (add \"criteria\" to the item or pass a "
                         "suite file)", file=None, line=item.line, field="criteria")


def criterion_text(c: Criterion) -> str:
    """How a criterion reads in the prompt: name, description and, where given, what each level means."""
    text = f"{c.name}: {c.description}"
    if c.levels:
        text += "\nLevels:\n" + "\n".join(f"{n}: {desc}" for n, desc in enumerate(c.levels, start=1))
    return text


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


# -- checklists --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChecklistTask(Task):
    """Each response asked each check of its checklist (one prompt per pair, labels such as YES/NO);
    per response the expected weighted satisfaction, P(all pass) and the distribution of the number
    passed (Poisson-binomial: the checks' outcomes taken as independent given the response)."""

    kind: ClassVar[str] = "checklist"
    prompts: Prompts
    protocol: Protocol = "direct"
    labels: LabelSet = YES_NO
    """The answers a check may get; the label with the highest value (the first, without values) passes."""
    checklist: tuple[Check, ...] = ()
    """The suite's checks: asked of responses whose item and response carry none."""
    reweight: bool = False
    keep_critique: bool = field(default=True, compare=False)

    def checks_of(self, item: Item, r: Response) -> tuple[Check, ...]:
        return item.checks(r) or self.checklist

    def check(self, item: Item) -> None:
        for i, r in enumerate(item.responses):
            if not self.checks_of(item, r):
                raise InputError("has no checklist, and no suite gives one (add \"checklist\" to the item or "
                                 "the response, or pass a suite file)", file=None, line=item.line,
                                 field=f"responses[{i}].checklist")
            for cid, label in (r.human_checks or {}).items():
                if isinstance(label, str) and label.upper() not in {x.upper() for x in self.labels.labels}:
                    raise InputError(f"is {label!r}, not one of the labels {list(self.labels.labels)}", file=None,
                                     line=item.line, field=f"responses[{i}].human_checks.{cid}")

    def size(self, item: Item) -> int:
        return sum(len(self.checks_of(item, r)) for r in item.responses)

    def cost(self, item: Item) -> Cost:
        shared = shared_bytes(item)
        suite = sum(text_bytes(c.text) for c in self.checklist)
        own = sum(text_bytes(c.text) for c in item.checklist)
        judgments = quoted = 0
        for r in item.responses:
            checks = self.checks_of(item, r)
            mine = sum(text_bytes(c.text) for c in r.checklist)
            # each text is measured once: the item's and the suite's checks are shared by its responses
            check_bytes = (own + mine) if (item.checklist or r.checklist) else suite
            judgments += len(checks)
            quoted += len(checks) * (shared + text_bytes(r.text)) + check_bytes
        return Cost(judgments, quoted, judgments * len(self.labels.labels))

    def parts(self, item: Item, size: int) -> list[Item]:
        return by_responses(item, size, lambda r: len(self.checks_of(item, r)))

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        out: list[Question | str] = []
        g = grounding(item)
        task = self.prompts.label_task(self.labels, self.protocol, "answer")
        for r in item.responses:
            for c in self.checks_of(item, r):
                if not r.text.strip():
                    out.append(EMPTY_RESPONSE)
                    continue
                user = self.prompts.render_check(item.question, r.text, item.context, item.reference, c.text, task, g)
                out.append(Question(fmt(SYSTEM, user, _prefix(self.protocol, ANSWER_MARKER)), self.labels.labels,
                                    ANSWER_MARKER))
        return out

    @property
    def _values(self) -> tuple[float, ...]:
        if self.labels.values is not None:
            return self.labels.values
        return tuple(1.0 if i == 0 else 0.0 for i in range(len(self.labels.labels)))

    def _human(self, label: float | str | None) -> float | None:
        if label is None or isinstance(label, float):
            return label
        return self.labels.value_of(label) if self.labels.values is not None else (
            1.0 if label.upper() == self.labels.labels[0].upper() else 0.0)

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[ChecklistRecord]:
        it = iter(outcomes)
        values = self._values
        passing = max(range(len(values)), key=lambda i: values[i])
        for item in items:
            for r in item.responses:
                results = []
                for c in self.checks_of(item, r):
                    out = next(it)
                    human = self._human((r.human_checks or {}).get(c.id))
                    if out.probs is None or out.unscored is not None:
                        results.append(CheckResult(c.id, c.text, c.weight, None, None, None,
                                                   out.mass if out.probs is not None else None, out.unscored, human,
                                                   out.critique))
                        continue
                    total = sum(out.probs)
                    probs = {lab: p / total for lab, p in zip(self.labels.labels, out.probs)}
                    value = sum(p * v for p, v in zip(probs.values(), values))
                    results.append(CheckResult(c.id, c.text, c.weight, probs, value,
                                               probs[self.labels.labels[passing]], out.mass, None, human,
                                               out.critique))
                yield self._record(item, r, results, judge)

    def _record(self, item: Item, r: Response, results: list[CheckResult], judge: str) -> ChecklistRecord:
        left_out = [res.id for res in results if res.unscored is not None]
        use = [res for res in results if res.unscored is None]
        unscored = EMPTY_RESPONSE if not r.text.strip() else (
            PARTIAL if left_out and (not self.reweight or not use) else None)
        satisfaction = p_all = expected = None
        passed = None
        if unscored is None:
            weights = [res.weight for res in use]
            if sum(weights) > 0:
                satisfaction = _wmean([res.value or 0.0 for res in use], weights)
            ps = [res.p_pass or 0.0 for res in use]
            p_all = A.prob_all(ps)
            passed = A.poisson_binomial(ps)
            expected = A.expected_count(ps)
        return ChecklistRecord(item.id, r.id, r.system, judge, self.protocol, list(self.labels.labels), results,
                               satisfaction, p_all, passed, expected, unscored,
                               left_out if self.reweight and unscored is None else [])


# -- pairwise per criterion --------------------------------------------------------------------------

_FIRST_VIEW = ("first>>second", "first>second", "tie", "second>first", "second>>first")


@dataclass(frozen=True)
class CriteriaCompareTask(Task):
    """Every pair judged on each criterion in both presentation orders, combined by likelihood; with
    ``graded``, a 5-way verdict (A>>B .. B>>A) and its expected margin."""

    kind: ClassVar[str] = "criteria-compare"
    prompts: Prompts
    protocol: Protocol = "direct"
    criteria: tuple[Criterion, ...] = ()
    graded: bool = False
    reweight: bool = False

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
        return Cost(2 * p * k, quoted, 2 * p * k * len(self.labels))

    def parts(self, item: Item, size: int) -> list[Item]:
        return by_pairs(item, size, 2 * len(self.criteria_of(item)))

    @property
    def labels(self) -> tuple[str, ...]:
        return GRADED_LABELS if self.graded else VERDICT_LABELS

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        out: list[Question | str] = []
        g = grounding(item)
        task = self.prompts.graded_task(self.protocol) if self.graded else self.prompts.verdict_task(self.protocol)
        for pair in item.all_pairs():
            a, b = item.response(pair.first).text, item.response(pair.second).text
            for x, y in ((a, b), (b, a)):  # order-major: one order's criteria share the prompt up to the criterion
                for c in self.criteria_of(item):
                    if not a.strip() or not b.strip():
                        out.append(EMPTY_RESPONSE)
                        continue
                    user = self.prompts.render_criterion_pair(item.question, x, y, item.context, item.reference,
                                                              criterion_text(c), task, g)
                    out.append(Question(fmt(SYSTEM, user, _prefix(self.protocol, VERDICT_MARKER)), self.labels,
                                        VERDICT_MARKER))
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
                yield self._record(item, pair, verdicts, judge)

    def _verdict(self, c: Criterion, o1: Outcome, o2: Outcome) -> CriterionVerdict:
        orders = []
        for out in (o1, o2):
            row: dict[str, Any] = {"unscored": out.unscored}
            if out.probs is not None:
                row.update(dict(zip(self.labels, out.probs)), mass=out.mass)
            if out.critique is not None:
                row["critique"] = out.critique
            orders.append(row)
        unscored = o1.unscored or o2.unscored
        if unscored is not None or o1.probs is None or o2.probs is None:
            return CriterionVerdict(c.name, c.weight, None, None, None, orders, unscored or "no_label_mass")
        graded = None
        if self.graded:
            combined = A.combine_orders(o1.probs, o2.probs)
            graded = dict(zip(_FIRST_VIEW, combined))
            probs = {"first": combined[0] + combined[1], "second": combined[3] + combined[4], "tie": combined[2]}
            margin = A.expected_margin(combined)
        else:
            d1 = S.from_order(*o1.probs, swapped=False)
            d2 = S.from_order(*o2.probs, swapped=True)
            f, s, t = S.likelihood_probs(d1, d2)
            total = f + s + t
            probs = {"first": f / total, "second": s / total, "tie": t / total}
            margin = probs["first"] - probs["second"]
        verdict = S.argmax_verdict(probs["first"], probs["second"], probs["tie"])
        return CriterionVerdict(c.name, c.weight, probs, verdict, margin, orders, None, graded)

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


# -- recorded verdicts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedCompareTask(CompareTask):
    """Pairs answered from a file of recorded verdicts (``recorded/<path>``) instead of a model's prompt.

    Each pair asks the recorded judge both presentation orders, so the records, the store (a rerun reads
    every verdict from it) and calibration work as for any pairwise judge. A pair the file lacks is
    unscored ``not_recorded``; a row without a usable verdict ``no_recorded_verdict``. Records say
    ``protocol: recorded`` and ``method: recorded`` and hold no presentation orders: the recording has none
    to audit (a position bias measured on mirrored copies of one verdict would be made up).
    """

    recorded: RecordedBackend | None = None

    def pair_questions(self, item: Item, pair: Pair, fmt: Format) -> tuple[Question | str, Question | str]:
        assert self.recorded is not None
        r1, r2 = item.response(pair.first), item.response(pair.second)
        found = self.recorded.verdicts.find(item.id, item.question, (r1.id, r1.text), (r2.id, r2.text))
        if isinstance(found, str):
            return found, found
        return (Question(recorded_prompt(found, 1), VERDICT_LABELS, VERDICT_MARKER),
                Question(recorded_prompt(found, 2), VERDICT_LABELS, VERDICT_MARKER))

    def _record(self, item: Item, pair: Pair, o1: Outcome, o2: Outcome, judge: str) -> CompareRecord:
        rec = super()._record(item, pair, o1, o2, judge)
        rec.protocol = rec.ppl_source = RECORDED
        rec.orders = []
        rec.method = RECORDED if rec.probabilities is not None else None
        return rec
