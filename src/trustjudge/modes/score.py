"""The ``score`` mode: one holistic score per response on an integer scale (distribution-sensitive:
the expected score under the judge's label distribution)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..audit._readers import LevelUnits
from ..engine import _scoring as S
from ..engine._asking import Question
from ..engine._engine import EMPTY_RESPONSE, Outcome
from ..errors import ConfigError
from ..io._items import Item, Response
from ..io._rules import Rule
from ._base import (
    Cost,
    Format,
    Task,
    _prefix,
    by_responses,
    grounding,
    judged_empty,
    pictures,
    point_mass,
    rule_label,
    rules_option,
    shared_bytes,
    text_bytes,
)
from ._prompts import (
    POINTWISE_FIELDS,
    SCALE_METAVAR,
    SCORE_MARKER,
    Prompts,
    Protocol,
    Scale,
    scale_text,
)
from ._prompts import scale as make_scale
from ._provenance import score_se
from ._records import (
    ScoreRecord,
)
from ._registry import (
    KEEP_DISTRIBUTION_HELP,
    PROTOCOL_HELP,
    RULES_HELP,
    JudgeSettings,
    Mode,
    TemplateSpec,
    keep_distribution,
    option,
)
from ._stored import StoredJudgments
from ._summaries import SCORE_SUMMARY

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
    rules: tuple[Rule, ...] = ()
    """Shortcuts checked before the judge, in order: each rule's label is a label of :attr:`scale`."""

    def calibration_prompt(self) -> str:
        return self.prompts.pointwise.template

    def check_calibration(self, calibration: Any) -> None:
        """Another scale has other levels: never overridable."""
        from ..audit._trust import check_classes
        check_classes(self.kind, calibration, self.scale.labels)
        if calibration.levels is not None and [float(v) for v in self.scale.values] != calibration.levels:
            raise ConfigError(f"the calibration's level values {calibration.levels} are not this scale's "
                              f"{list(self.scale.values)}: refit it on this scale")

    def __post_init__(self) -> None:
        for i, rule in enumerate(self.rules):
            rule_label(rule, self.scale.labels, i, f"the scale {self.scale.low}-{self.scale.points}")

    def size(self, item: Item) -> int:
        return len(item.responses)

    def cost(self, item: Item) -> Cost:
        n = len(item.responses)
        return Cost(n, n * shared_bytes(item) + sum(text_bytes(r.text) for r in item.responses),
                    n * len(self.scale.values))

    def parts(self, item: Item, size: int) -> list[Item]:
        return by_responses(item, size, lambda r: 1)

    def question(self, item: Item, text: str, fmt: Format, response: Response | None = None) -> Question | str:
        """The question of ``text`` (``response``: the response it is, whose images are shown with it)."""
        if not text.strip() and (response is None or judged_empty(response)):
            return EMPTY_RESPONSE
        user = self.prompts.render_pointwise(item.question, text, item.context, item.reference, self.scale,
                                             self.protocol, grounding(item), pictures=pictures(item, response))
        return Question(fmt(self.prompts.system, user, _prefix(self.protocol, SCORE_MARKER)), self.scale.labels,
                        SCORE_MARKER)

    def questions(self, item: Item, fmt: Format) -> list[Question | str]:
        return [self.question(item, r.text, fmt, r) for r in item.responses]

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
                           dist, self.closing_mark, None if self.scale.low == 1 else self.scale.low,
                           label_method=out.method if out.probs is not None else None,
                           api=out.api if out.probs is not None else None,
                           samples=out.samples if out.probs is not None else None,
                           score_se=score_se([float(v) for v in self.scale.values], out))

    def rule_record(self, item: Item, response: Response, rule: Rule, judge: str) -> ScoreRecord:
        """A point mass on the rule's label: every method scores its value, no model call."""
        label = rule_label(rule, self.scale.labels, 0, "the scale")
        value = float(self.scale.values[self.scale.labels.index(label)])
        dist = dict(zip(self.scale.labels, point_mass(self.scale.labels, label)))
        return ScoreRecord(item.id, response.id, response.system, judge, self.protocol, self.scale.points,
                           dict.fromkeys(S.SCORE_METHODS, value), 0.0, None, None, response.human_score, None,
                           dist, self.closing_mark, None if self.scale.low == 1 else self.scale.low, rule=rule.id)


@dataclass(frozen=True)
class ScoreOptions:
    scale: int | str | None = option(None, "Rating scale: a top value (10: 1..10) or any integer range ('0-5', "
                                           "'0-10'); default: the judge's.", parse=scale_text,
                                      metavar=SCALE_METAVAR)
    protocol: Protocol | None = option(None, PROTOCOL_HELP)  # second: judge.score_task(scale, protocol)
    scale_min: int | None = option(None, "Bottom of the scale when it is given by its top (0 with scale 10: "
                                         "0..10); default 1.")
    keep_distribution: bool | None = option(None, KEEP_DISTRIBUTION_HELP, flag="--distribution")
    rules: tuple[Rule, ...] = option((), RULES_HELP, suite="rules", served=False)


def build_score(j: JudgeSettings, o: ScoreOptions) -> ScoreTask:
    sc = j.scale if o.scale is None and o.scale_min is None else make_scale(
        j.scale.points if o.scale is None else o.scale, o.scale_min)
    return ScoreTask(j.prompts, sc, o.protocol or j.protocol,
                     keep_distribution(j, o.keep_distribution), j.closing_mark, rules_option(o.rules))


def _stored(task: ScoreTask, item: Item, fmt: Format, asked: bool) -> Iterator[dict[str, Any]]:
    for response, question in zip(item.responses, task.questions(item, fmt)):
        yield {"item_id": item.id, "response_id": response.id, "scale": task.scale.points,
               "protocol": task.protocol, "question": question}


STORED = StoredJudgments(_stored, lambda e: f"score {e['item_id']} / {e['response_id']} ({e['scale']} points, "
                                            f"{e['protocol']})", listed=True)
"""``store show``: one judgment per response."""


MODE = Mode(
    "score", ScoreTask, ScoreRecord, ScoreOptions, build_score,
    templates={"pointwise": TemplateSpec("pointwise.txt", frozenset(POINTWISE_FIELDS))},
    min_responses=1, summary="One holistic score per response on an integer scale.",
    command="score", route="/v1/score", summary_metrics=SCORE_SUMMARY, stored=STORED,
    calibration=LevelUnits())
