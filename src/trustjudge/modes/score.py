"""The ``score`` mode: one holistic score per response on an integer scale (distribution-sensitive:
the expected score under the judge's label distribution)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..engine import _scoring as S
from ..engine._engine import EMPTY_RESPONSE, Outcome
from ..io._items import Item, Response
from ._prompts import (
    SCORE_MARKER,
    SYSTEM,
    Prompts,
    Protocol,
    Scale,
)
from ..engine._asking import Question
from ._records import (
    ScoreRecord,
)
from ._base import (
    grounding,
    _prefix,
    Cost,
    text_bytes,
    shared_bytes,
    by_responses,
    Task,
    Format,
)
from ._prompts import SCALES
from ._registry import PROTOCOL_HELP, JudgeSettings, Mode, TemplateSpec, option
from ._prompts import scale as make_scale
from ._prompts import POINTWISE_FIELDS

POSITION = 10
"""Where the mode comes among the built-in ones (listings, help)."""

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


@dataclass(frozen=True)
class ScoreOptions:
    scale: int | None = option(None, "Rating scale 1..N (5, 10 or 100); default: the judge's.", choices=SCALES)
    protocol: Protocol | None = option(None, PROTOCOL_HELP)
    keep_distribution: bool | None = option(None, "Keep each judgment's label distribution in the record; default: the "
                                                  "judge's.", flag="--distribution")


def build_score(j: JudgeSettings, o: ScoreOptions) -> ScoreTask:
    return ScoreTask(j.prompts, j.scale if o.scale is None else make_scale(o.scale), o.protocol or j.protocol,
                     j.keep_distribution if o.keep_distribution is None else o.keep_distribution, j.closing_mark)


MODE = Mode(
    "score", ScoreTask, ScoreRecord, ScoreOptions, build_score,
    templates={"pointwise": TemplateSpec("pointwise.txt", frozenset(POINTWISE_FIELDS))},
    min_responses=1, summary="One holistic score per response on an integer scale.",
    command="score", route="/v1/score")
