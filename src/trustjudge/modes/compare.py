"""The ``compare`` mode: every pair judged in both presentation orders, verdicts aggregated by likelihood;
and its recorded variant, answering pairs from a file of recorded verdicts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..audit._readers import PairUnits
from ..backends import Backend
from ..backends._recorded import RECORDED, RecordedBackend, recorded_prompt
from ..engine import _scoring as S
from ..engine._asking import Question
from ..engine._engine import EMPTY_RESPONSE, Outcome
from ..errors import ConfigError
from ..io._items import Item, Pair
from ._base import (
    Cost,
    Format,
    Task,
    _pair_bytes,
    _prefix,
    by_pairs,
    grounding,
    judged_empty,
    pictures,
    shared_bytes,
)
from ._cascading import ByPair
from ._prompts import (
    DEFAULT_PAIR_LABELS,
    PAIRWISE_FIELDS,
    VERDICT_LABELS,
    VERDICT_MARKER,
    PairLabels,
    Prompts,
    Protocol,
)
from ._provenance import order_se, pair_se, stamp
from ._records import (
    CompareRecord,
)
from ._registry import PROTOCOL_HELP, JudgeSettings, Mode, TemplateSpec, option
from ._stored import StoredJudgments
from ._summaries import COMPARE_SUMMARY

POSITION = 20
"""Where the mode comes among the built-in ones (listings, help)."""

# -- pairwise ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompareTask(Task):
    """Every pair of an item judged in both presentation orders."""

    kind: ClassVar[str] = "compare"
    prompts: Prompts
    protocol: Protocol = "direct"
    delta: float = 0.0
    closing_mark: str | None = None
    labels: PairLabels | None = None
    """The verdict labels and the preference each stands for; ``None``: A (first), B (second), C (tie)."""

    def calibration_prompt(self) -> str:
        return self.prompts.pairwise.template

    def calibration_labels(self) -> tuple[str, str, str] | None:
        """A calibration is fitted on A/B/C verdicts: other labels' preferences are other probabilities."""
        return None if self.labels is None else ("verdict labels", "A/B/C", self.labels.describe())

    @property
    def verdict_labels(self) -> tuple[str, ...]:
        return VERDICT_LABELS if self.labels is None else self.labels.labels

    def size(self, item: Item) -> int:
        return 2 * len(item.all_pairs())

    def count(self, item: Item) -> int:
        return len(item.all_pairs())

    def cost(self, item: Item) -> Cost:
        pairs = list(_pair_bytes(item))
        return Cost(2 * len(pairs), 2 * (len(pairs) * shared_bytes(item) + sum(pairs)),
                    2 * len(pairs) * len(self.verdict_labels))

    def parts(self, item: Item, size: int) -> list[Item]:
        return by_pairs(item, size, 2)

    def pair_questions(self, item: Item, pair: Pair, fmt: Format) -> tuple[Question | str, Question | str]:
        ra, rb = item.response(pair.first), item.response(pair.second)
        if judged_empty(ra) or judged_empty(rb):
            return EMPTY_RESPONSE, EMPTY_RESPONSE
        qs = []
        for x, y in ((ra, rb), (rb, ra)):
            task = None if self.labels is None else self.prompts.verdict_task(self.protocol, self.labels)
            user = self.prompts.render_pairwise(item.question, x.text, y.text, item.context, item.reference,
                                                self.protocol, grounding(item), task, pictures(item, x, y))
            qs.append(Question(fmt(self.prompts.system, user, _prefix(self.protocol, VERDICT_MARKER)),
                               self.verdict_labels, VERDICT_MARKER))
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
                row.update(dict(zip(VERDICT_LABELS, self._abc(out.probs))), mass=out.mass,
                           label_method=out.method)
                if out.api is not None:
                    row["api"] = out.api
                if out.samples is not None:
                    row["samples"] = out.samples
                    if (se := order_se(self._abc(out.probs), out)) is not None:
                        row["se"] = dict(zip(VERDICT_LABELS, se))
                if self.labels is not None:
                    row["labels"] = dict(zip(self.labels.labels, out.probs))
            if out.critique_ppl is not None:
                row["critique_ppl"] = out.critique_ppl
            if out.critique is not None:
                row["critique"] = out.critique
            orders.append(row)
        unscored = o1.unscored or o2.unscored
        verdicts: dict[str, str | None] = dict.fromkeys(S.AGGREGATIONS)
        probabilities = se = None
        if unscored is None and o1.probs is not None and o2.probs is not None:
            d1 = S.from_order(*self._abc(o1.probs), swapped=False, ppl=o1.critique_ppl)
            d2 = S.from_order(*self._abc(o2.probs), swapped=True, ppl=o2.critique_ppl)
            verdicts = dict(S.aggregate_all(d1, d2, delta=self.delta))
            f, s, t = S.likelihood_probs(d1, d2)
            total = f + s + t
            probabilities = {"first": f / total, "second": s / total, "tie": t / total}
            se = pair_se([((d.first, d.second, d.tie), o) for d, o in ((d1, o1), (d2, o2))])
        r1, r2 = item.response(pair.first), item.response(pair.second)
        rec = stamp(CompareRecord(item.id, pair.first, pair.second, judge, self.protocol, verdicts, probabilities,
                                  orders, unscored, ppl_source, pair.human, list(pair.annotators), r1.system,
                                  r2.system, self.closing_mark), (o1, o2))
        rec.probabilities_se = None if se is None else dict(zip(("first", "second", "tie"), se))
        if self.labels is not None:
            rec.labels = dict(zip(self.labels.labels, self.labels.prefers))
            if probabilities is not None and o1.probs is not None and o2.probs is not None:
                rec.label_probabilities = label_probabilities(self.labels, o1.probs, o2.probs)
                if rec.label_probabilities is not None:
                    rec.label_verdict = max(rec.label_probabilities.items(), key=lambda kv: kv[1])[0]
        return rec

    def _abc(self, probs: Sequence[float]) -> tuple[float, ...]:
        """One order's probabilities as A wins / B wins / tie (the labels of each preference summed)."""
        return tuple(probs) if self.labels is None else self.labels.collapse(probs)

    def for_backend(self, backend: Backend) -> Task:
        """A recorded judge answers pairs read directly from its file (it has no critique to write first)."""
        if isinstance(backend, RecordedBackend) and type(self) is CompareTask:
            if self.labels is not None:
                raise backend.refusal("pairwise labels of your own (the recording has A/B/C verdicts)")
            return RecordedCompareTask(self.prompts, "direct", self.delta, None, recorded=backend)
        return super().for_backend(backend)


# -- recorded verdicts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedCompareTask(CompareTask):
    """Pairs answered from a file of recorded verdicts (``recorded/<path>``) instead of a model's prompt.

    Each pair asks the recorded judge both presentation orders, so the records, the store (a rerun reads
    every verdict from it) and calibration work as for any pairwise judge. A pair the file lacks is
    unscored ``not_recorded``; a row without a usable verdict ``no_recorded_verdict``. Records say
    ``protocol: recorded`` and ``label_method: recorded`` and hold no presentation orders: the recording has none
    to audit (a position bias measured on mirrored copies of one verdict would be made up).
    """

    recorded: RecordedBackend | None = None

    def for_backend(self, backend: Backend) -> Task:
        return self

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
        rec.label_method = RECORDED if rec.probabilities is not None else None
        return rec


@dataclass(frozen=True)
class CompareOptions:
    protocol: Protocol | None = option(None, PROTOCOL_HELP)
    delta: float | None = option(None, "Tie margin for likelihood and ppl aggregation; default: the judge's.",
                                 ge=0.0)
    labels: PairLabels | str | None = option(
        None, 'Verdict labels of your own, each with the preference it stands for, e.g. '
              '"A=first,B=second,BOTH_GOOD=tie,BOTH_BAD=tie" (first: the response shown as A); default A, B, C.',
        parse=PairLabels.parse, flag="--labels", shown="A, B, C")


def label_probabilities(labels: PairLabels, p1: Sequence[float], p2: Sequence[float]) -> dict[str, float] | None:
    """Each label's probability over both orders, read as the pair is given (its first response as A): the
    second order's labels mirrored (:meth:`PairLabels.mirror`), summed with the first's, renormalised."""
    mirror = labels.mirror()
    if mirror is None:
        return None
    summed = [p1[i] + p2[mirror[i]] for i in range(len(labels.labels))]
    total = sum(summed)
    if total <= 0:
        return None
    return {lab: v / total for lab, v in zip(labels.labels, summed)}


def build_compare(j: JudgeSettings, o: CompareOptions) -> CompareTask:
    labels = PairLabels.parse(o.labels) if isinstance(o.labels, str) else o.labels
    if labels is not None and not isinstance(labels, PairLabels):
        raise ConfigError(f"compare labels are a PairLabels or a text such as 'A=first,B=second,C=tie', got {labels!r}")
    return CompareTask(j.prompts, o.protocol or j.protocol, j.delta if o.delta is None else o.delta, j.closing_mark,
                       None if labels == DEFAULT_PAIR_LABELS else labels)


def _stored(task: CompareTask, item: Item, fmt: Format, asked: bool) -> Iterator[dict[str, Any]]:
    if len(item.responses) < 2:
        return
    for pair in item.all_pairs():
        for order, question in enumerate(task.pair_questions(item, pair, fmt), start=1):
            yield {"item_id": item.id, "first_id": pair.first, "second_id": pair.second, "order": order,
                   "shown_first": pair.first if order == 1 else pair.second, "protocol": task.protocol,
                   "question": question}


STORED = StoredJudgments(_stored, lambda e: f"compare {e['item_id']} / {e['first_id']} vs {e['second_id']}, order "
                                            f"{e['order']} ({e['shown_first']} shown first, {e['protocol']})",
                         listed=True)
"""``store show``: each pair in each order."""


MODE = Mode(
    "compare", CompareTask, CompareRecord, CompareOptions, build_compare,
    templates={"pairwise": TemplateSpec("pairwise.txt", frozenset(PAIRWISE_FIELDS))},
    min_responses=2, summary="Every pair judged in both presentation orders.",
    command="compare", route="/v1/compare", cascade=ByPair(), summary_metrics=COMPARE_SUMMARY, stored=STORED,
    calibration=PairUnits())
