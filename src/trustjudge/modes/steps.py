"""The ``steps`` mode: a step-by-step solution judged step by step, with the last correct step computed exactly.

Each response is split into steps (one per non-empty line, or per numbered line with ``split="numbered"``;
a response given as turns has one step per turn)
and the judge is asked, for each step k, whether step k is correct given the problem (and the reference
solution, where the item has one) and the steps before it: P(correct_k) read exactly from the judge's
YES/NO distribution. Taking the steps' verdicts as independent given the response, the record gives

- ``p_all_correct`` = prod_k p_k,
- ``expected_correct`` = sum_k p_k (the expected number of correct steps),
- ``expected_last_correct`` = E[L], where L is the number of steps before the first incorrect one (the
  "last correct step" of PuzzleWorld-style protocols): P(L >= k) = p_1 ... p_k, so
  E[L] = sum_k p_1 p_2 ... p_k, and ``last_correct`` gives P(L = k) for k = 0..n.

The whole mode is this file, its template ``templates/steps.txt`` and its test: the registry gives it its
CLI command (``trustjudge steps``), its service route (``POST /v1/steps``) and the mode contract test.
"""

from __future__ import annotations

import string
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import ClassVar

from ..engine._asking import Question
from ..engine._engine import EMPTY_RESPONSE, Outcome
from ..errors import ConfigError
from ..io._items import Item, Response, render_turn
from ._base import Cost, Format, Split, Task, _prefix, by_responses, grounding, shared_bytes, split_steps, text_bytes
from ._prompts import (
    ANSWER_MARKER,
    DEFAULT_TAGS,
    SYSTEM,
    YES_NO,
    Prompts,
    Protocol,
    _blocks,
    quote,
    tag_pattern,
)
from ._provenance import share_se, stamp
from ._records import _OMIT, ResponseHeader, optional
from ._registry import PROTOCOL_HELP, JudgeSettings, Mode, TemplateSpec, option

POSITION = 70
"""Where the mode comes among the built-in ones (listings, help)."""

FIELDS = {"question", "steps", "step", "number", "task"}
TOO_MANY = "too_many_steps"
NO_STEPS = "no_steps"
_TAGS = tag_pattern((*DEFAULT_TAGS, "steps", "step"))


SPEC = TemplateSpec("steps.txt", frozenset(FIELDS))


@cache
def _template() -> string.Template:
    return SPEC.load()


def last_correct(ps: Sequence[float]) -> list[float]:
    """P(L = k) for k = 0..n, L the number of steps before the first incorrect one (steps independent)."""
    out, run = [], 1.0
    for p in ps:
        out.append(run * (1.0 - p))
        run *= p
    return [*out, run]


@dataclass
class StepResult:
    """One step's judgment."""

    number: int
    text: str
    p_correct: float | None
    """P(YES): the judge's probability that the step is correct, renormalised over YES/NO."""
    label_mass: float | None
    unscored: str | None
    critique: str | None = optional()
    p_correct_se: float | None = optional()
    """``label_method: sampled``: the Monte-Carlo standard error of :attr:`p_correct` (sqrt(p (1 - p) / n) over the
    n answers that wrote a label); absent otherwise."""


@dataclass
class StepsRecord(ResponseHeader):
    """One response's steps, each judged, and the exact distribution of its last correct step."""

    protocol: str
    steps: list[StepResult]
    p_all_correct: float | None
    expected_correct: float | None
    expected_last_correct: float | None
    """E[number of steps before the first incorrect one] = sum_k p_1...p_k."""
    last_correct: list[float] | None
    """Entry k: P(exactly the first k steps are correct and step k+1 is not); the last entry: all correct."""
    label_method: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """How its labels were read, as a score record's ``label_method``; absent where none was read."""
    api: str | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """The HTTP API the labels came through (``completions`` or ``chat``); absent for an in-process judge."""
    samples: int | None = field(default=None, metadata={_OMIT: True}, kw_only=True)
    """``label_method: sampled``: the N answers each label distribution was estimated from."""
    unscored: str | None


@dataclass(frozen=True)
class StepsTask(Task):
    """Each step of each response judged YES/NO on its correctness given the problem and the steps before."""

    kind: ClassVar[str] = "steps"
    prompts: Prompts
    protocol: Protocol = "direct"
    split: Split = "lines"
    max_steps: int = 64
    template: string.Template | None = None
    """Its prompt (the judge's ``steps`` template); ``None``: the packaged file."""

    def _steps(self, r: Response) -> list[str]:
        """The response's steps: a trajectory's turns (each a quoted ``<turn>`` block), else its text split."""
        if r.turns is not None:
            return [render_turn(k, t) for k, t in enumerate(r.turns, start=1)]
        return split_steps(r.text, self.split)

    def _asked(self, r: Response) -> int:
        n = len(self._steps(r))
        return n if 0 < n <= self.max_steps else 0

    def size(self, item: Item) -> int:
        return sum(max(1, self._asked(r)) for r in item.responses)

    def cost(self, item: Item) -> Cost:
        shared = shared_bytes(item)
        n = sum(self._asked(r) for r in item.responses)
        quoted = sum(self._asked(r) * (shared + text_bytes(r.text)) for r in item.responses)
        return Cost(n, quoted, 2 * n)

    def parts(self, item: Item, size: int) -> list[Item]:
        return by_responses(item, size, lambda r: max(1, self._asked(r)))

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        out: list[Question | str] = []
        template = self.template or _template()
        task = self.prompts.label_task(YES_NO, self.protocol, "answer")
        blocks = _blocks(item.context, item.reference, _TAGS, grounding(item))
        for r in item.responses:
            steps = self._steps(r)
            if not steps:
                out.append(EMPTY_RESPONSE if not r.text.strip() else NO_STEPS)
                continue
            if len(steps) > self.max_steps:
                out.append(TOO_MANY)
                continue
            listing = "\n".join(f'<step n="{k}">\n{quote(s, _TAGS)}\n</step>' for k, s in enumerate(steps, 1))
            for k, step in enumerate(steps, start=1):
                user = template.substitute(
                    question=quote(item.question, _TAGS), steps=listing, step=quote(step, _TAGS), number=k,
                    task=task, grounding_block=blocks["grounding_block"], context_block=blocks["context_block"],
                    reference_block=blocks["reference_block"])
                out.append(Question(fmt(SYSTEM, user, _prefix(self.protocol, ANSWER_MARKER)), YES_NO.labels,
                                    ANSWER_MARKER))
        return out

    def records(self, items: Sequence[Item], outcomes: Sequence[Outcome], judge: str) -> Iterator[StepsRecord]:
        it = iter(outcomes)
        yes = YES_NO.labels.index("YES")
        for item in items:
            for r in item.responses:
                steps = self._steps(r)
                if not steps or len(steps) > self.max_steps:
                    reason = next(it).unscored
                    yield StepsRecord(item.id, r.id, r.system, judge, self.protocol, [], None, None, None, None,
                                      reason)
                    continue
                results, outs = [], [next(it) for _ in steps]
                for k, (text, out) in enumerate(zip(steps, outs), start=1):
                    if out.probs is None or out.unscored is not None:
                        results.append(StepResult(k, text, None, out.mass if out.probs is not None else None,
                                                  out.unscored or "unscored", out.critique))
                    else:
                        p = out.probs[yes] / sum(out.probs)
                        results.append(StepResult(k, text, p, out.mass, None, out.critique, share_se(p, out)))
                yield stamp(self._record(item, r.id, r.system, results, judge), outs)

    def _record(self, item: Item, rid: str, system: str | None, results: list[StepResult],
                judge: str) -> StepsRecord:
        if any(s.p_correct is None for s in results):
            return StepsRecord(item.id, rid, system, judge, self.protocol, results, None, None, None, None,
                               "unscored_steps")
        ps = [s.p_correct or 0.0 for s in results]
        dist = last_correct(ps)
        expected = sum(k * p for k, p in enumerate(dist))
        return StepsRecord(item.id, rid, system, judge, self.protocol, results, dist[-1], sum(ps), expected, dist,
                           None)


@dataclass(frozen=True)
class StepsOptions:
    split: Split = option("lines", 'How a response splits into steps: "lines" (each non-empty line) or "numbered" '
                                   '(each line starting "1.", "2)", "Step 3:", with the lines after it).')
    max_steps: int = option(64, "A response with more steps is unscored (too_many_steps).")
    protocol: Protocol | None = option(None, PROTOCOL_HELP)


def build_steps(j: JudgeSettings, o: StepsOptions) -> StepsTask:
    if o.split not in ("lines", "numbered"):
        raise ConfigError(f'split must be "lines" or "numbered", got {o.split!r}')
    if o.max_steps < 1:
        raise ConfigError(f"max_steps must be 1 or more, got {o.max_steps}")
    return StepsTask(j.prompts, o.protocol or j.protocol, o.split, o.max_steps, j.template("steps"))


MODE = Mode(
    "steps", StepsTask, StepsRecord, StepsOptions, build_steps,
    templates={"steps": SPEC},
    min_responses=1, summary="Each step of a step-by-step solution judged; the last correct step exactly.",
    command="steps", route="/v1/steps")
