"""An inspect_ai scorer backed by a trustjudge judge (``pip install 'trustjudge[inspect]'``).

::

    from inspect_ai import Task, eval
    from trustjudge.inspect_scorer import trustjudge_scorer

    task = Task(dataset=..., solver=generate(), scorer=trustjudge_scorer(judge="hf/smollm2-135m"))

Each sample's output is judged as the response to its input (the question), with the sample's target,
where it has one, as the reference answer. ``kind`` picks what is asked:

- ``score``: one holistic score on 1..``scale``; the value is ``method`` 's score (default ``trustjudge``);
- ``criteria``: each criterion scored (``criteria``, or the sample metadata's ``criteria``); the value is
  their weighted aggregate under ``method``;
- ``checklist``: each check asked YES/NO (``checklist``, or the sample metadata's ``checklist``); the
  value is the expected weighted satisfaction in [0, 1];
- any other mode (claims, a plug-in's) with a per-response summary (``Mode(summary_metrics=...)``): its first
  summary metric (``method`` where it names one of them). The options it takes among ``scale``,
  ``criteria``, ``checklist`` and ``reweight`` are passed to it; the sample metadata's ``criteria`` and
  ``checklist`` reach a mode whose options have them.

The score's metadata holds how the number was obtained (judge, protocol, method, scale, how the labels
were read), the label distribution(s), label mass and the whole trustjudge record. A judgment that could
not be scored (an empty output, no label mass, a context overflow, a backend error) is returned as
inspect's unscored score (value NaN, left out of the metrics and counted as unscored) with the reason in
``reason``, ``explanation`` and ``metadata["unscored"]``: never as a number.

Every judgment is kept in the trustjudge store, so re-scoring a log (``inspect score``) or re-running an
eval with the same outputs makes no model call. Judgments run in a worker thread, one batch at a time:
samples that finish together are judged in one batch.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from ._integrations import check_method, fmt_number, top_labels
from ._judge import Judge
from .audit._summary import SummaryMetrics
from .audit._trust import Calibration, annotate
from .backends import DEFAULT_JUDGE
from .errors import ConfigError, InputError, pip_dependency_error
from .io._items import Check, Criterion, Item, Response, parse_checklist, parse_criteria
from .modes._base import Task
from .modes._prompts import Protocol
from .modes._records import ChecklistRecord, CriteriaRecord, RecordBase, ScoreRecord
from .modes._registry import MODES, get_mode, registered_modes

try:
    import anyio.to_thread
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, mean, scorer, stderr
    from inspect_ai.solver import TaskState
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise pip_dependency_error("the inspect_ai scorer", ["inspect-ai"], "inspect") from exc

__all__ = ["trustjudge_scorer"]

T = TypeVar("T")
Kind = str
"""A mode's name: ``score``, ``criteria``, ``checklist`` or any registered mode with a summary."""


@scorer(metrics=[mean(), stderr()], name="trustjudge_scorer")
def trustjudge_scorer(kind: Kind = "score", judge: str | Judge = DEFAULT_JUDGE, store: str | Path | None = None,
                      scale: int = 10, method: str = "trustjudge", criteria: Sequence[Criterion | Any] = (),
                      checklist: Sequence[Check | Any] = (), protocol: Protocol | None = None,
                      reweight: bool = False, threshold: float | None = None,
                      calibration: str | Path | Calibration | None = None, target_agreement: float | None = None,
                      risk_delta: float = 0.1) -> Scorer:
    """Score each sample's output with a trustjudge judge.

    Args:
        kind: ``score`` (holistic), ``criteria`` (weighted rubric) or ``checklist`` (YES/NO checks).
        judge: a judge name (default the default judge) or a :class:`~trustjudge.Judge` (its own store and
            options are used; then ``store`` and ``protocol`` must not be given).
        store: the judgment store (default the user's store).
        scale: points of the score, or of criteria without level descriptions.
        method: the scoring method whose number is the value (``discrete``, ``geval``, ``expected``,
            ``trustjudge``); unused by ``checklist``.
        criteria: :class:`~trustjudge.Criterion` objects (or ``{name, description, weight, levels}``
            dicts) for samples whose metadata has no ``criteria``.
        checklist: :class:`~trustjudge.Check` objects (or strings, or ``{id, text, weight}`` dicts) for
            samples whose metadata has no ``checklist``.
        protocol: ``direct`` (default) or ``cot``.
        reweight: aggregate over the scored criteria or checks when some are unscored.
        threshold: give inspect's ``C``/``I`` values instead of the number: ``C`` when the value is at least
            ``threshold`` (the number stays in ``answer`` and ``metadata["value"]``), so ``accuracy()`` reads
            the share that passes.
        calibration: a calibration file (or :class:`~trustjudge.Calibration`) fitted for this judge and mode
            (checked before any sample is judged). Every verdict gets its ``calibrated`` block in
            ``metadata["calibrated"]`` / the record; where the record is one verdict (``score``), the value is
            the calibrated verdict.
        target_agreement: with ``calibration``, keep only verdicts confident enough for agreement with humans
            >= the target with probability >= 1 - ``risk_delta``; the others are unscored (``abstained``).
        risk_delta: the risk level of that guarantee.
    """
    mode = get_mode(kind) if kind in MODES else None
    read_as = None if mode is None else next((r for c, r in _READERS.items() if issubclass(mode.record, c)), None)
    if mode is None or (read_as is None and not (mode.summary_metrics and mode.summary_metrics.metrics)):
        scored = [m.name for m in registered_modes().values() if (m.summary_metrics and m.summary_metrics.metrics)
                  or any(issubclass(m.record, c) for c in _READERS)]
        raise ConfigError(f"kind must be one of {', '.join(scored)} (a mode with a score: its record's own, or "
                          f"its summary metric), got {kind!r}")
    takes = {f.name for f in fields(mode.options)}
    sample_fields = {name: parse for name, parse in _SAMPLE_FIELDS.items() if name in takes}
    if read_as is not None:
        check_method(method)
    if isinstance(judge, Judge):
        if store is not None or protocol is not None:
            raise ConfigError("give store and protocol to the Judge itself, not to trustjudge_scorer")
        the_judge = judge
    else:
        the_judge = Judge(judge, store=store, protocol=protocol or "direct", scale=scale)
    suite_criteria = _criteria(criteria, "trustjudge_scorer(criteria=...)")
    suite_checks = _checklist(checklist, "trustjudge_scorer(checklist=...)")
    given = {"scale": scale, "criteria": tuple(suite_criteria), "checklist": tuple(suite_checks),
             "reweight": reweight, "keep_distribution": True}
    task = the_judge.task(kind, **{k: v for k, v in given.items() if k in takes})
    batcher = _Batcher(the_judge, task)
    calibrated = None
    if calibration is not None:
        loaded = calibration if isinstance(calibration, Calibration) else Calibration.load(Path(calibration))
        calibrated = the_judge.prepare_calibration(loaded, target=target_agreement, delta=risk_delta, task=task)
    elif target_agreement is not None:
        raise ConfigError("target_agreement needs a calibration file (calibration=...)")

    def read(record: RecordBase) -> Score:
        if read_as is not None:
            return read_as(record, the_judge, method)
        assert mode.summary_metrics is not None
        return _metric_value(record, the_judge, kind, method, mode.summary_metrics)

    async def score(state: TaskState, target: Target) -> Score:
        item = _item(state, target, takes, sample_fields)
        record = await anyio.to_thread.run_sync(batcher.judge, item)
        result = read(record)
        if calibrated is not None:
            result = _calibrated(result, record, *calibrated)
        prompts = [q.prompt for q in task.questions(item, the_judge.backend.format_prompt) if not isinstance(q, str)]
        return _passed(result, threshold, prompts)

    return score


# -- samples as items ------------------------------------------------------------------------------------


def _criteria(raw: Sequence[Criterion | Any], where: str) -> tuple[Criterion, ...]:
    if all(isinstance(c, Criterion) for c in raw):
        return tuple(raw)
    dicts = [{"name": c.name, "description": c.description, "weight": c.weight, "levels": list(c.levels)}
             if isinstance(c, Criterion) else c for c in raw]
    return _parsed(lambda: parse_criteria(dicts, where, 0), where)


def _checklist(raw: Sequence[Check | Any], where: str) -> tuple[Check, ...]:
    if all(isinstance(c, Check) for c in raw):
        return tuple(raw)
    dicts = [{"id": c.id, "text": c.text, "weight": c.weight} if isinstance(c, Check) else c for c in raw]
    return _parsed(lambda: parse_checklist(dicts, where, 0), where)


def _parsed(parse: Callable[[], T], where: str) -> T:
    """The parsed criteria or checklist; a bad one is a :class:`ConfigError` naming the field."""
    try:
        return parse()
    except InputError as exc:
        raise ConfigError(f"{where}: field {exc.field!r}: {exc.reason}") from None


_SAMPLE_FIELDS: dict[str, Callable[[Sequence[Any], str], tuple[Any, ...]]] = {
    "criteria": _criteria, "checklist": _checklist}
"""The item fields a sample's metadata may carry, each read where the mode's options have a field of that name."""


def _item(state: TaskState, target: Target, takes: set[str],
          sample_fields: dict[str, Callable[[Sequence[Any], str], tuple[Any, ...]]]) -> Item:
    """The sample as a one-response item: input as the question, output as the response, target as reference;
    its metadata's criteria or checklist where the mode's options have them (``sample_fields``)."""
    meta = state.metadata or {}
    where = f"sample {state.sample_id!r} metadata"
    given: dict[str, Any] = {name: parse(meta[name], where) for name, parse in sample_fields.items() if meta.get(name)}
    reference = target.text if len(target) and target.text.strip() else None
    response = Response("output", state.output.completion if state.output else "")
    return Item(str(state.sample_id), state.input_text, (response,), reference=reference, **given)


class _Batcher:
    """Runs a judge on one thread at a time (in-process models are not thread-safe); samples that arrive
    while a batch runs are judged together in the next one."""

    def __init__(self, judge: Judge, task: Task) -> None:
        self.judge_ = judge
        self.task = task
        self._run = threading.Lock()
        self._queue = threading.Lock()
        self._pending: list[tuple[Item, Future[RecordBase]]] = []

    def judge(self, item: Item) -> RecordBase:
        future: Future[RecordBase] = Future()
        with self._queue:
            self._pending.append((item, future))
        with self._run:
            if not future.done():  # nobody took it: run everything pending, this item included
                with self._queue:
                    batch, self._pending = self._pending, []
                try:
                    records = list(self.judge_.run(self.task, [it for it, _ in batch]))
                    for (_, f), record in zip(batch, records):
                        f.set_result(record)
                except BaseException as exc:
                    for _, f in batch:
                        if not f.done():
                            f.set_exception(exc)
        return future.result()


# -- records as scores -----------------------------------------------------------------------------------


def _reason(unscored: str) -> str:
    """inspect's standard reason for a trustjudge unscored reason (ours is kept in metadata)."""
    return "no_response" if unscored == "empty_response" else "grader_failed"


def _result(value: float | None, unscored: str | None, meta: dict[str, Any], what: str) -> Score:
    if unscored is not None or value is None or not math.isfinite(value):
        why = unscored or "no_value"
        meta["unscored"] = why
        return Score.unscored(reason=_reason(why), metadata=meta,
                              explanation=f"trustjudge could not score this output ({why}); {what}")
    return Score(value=value, explanation=what, metadata=meta)


def _how(judge: Judge, method: str, scale: str, label_method: str | None) -> str:
    read = f", labels read {label_method}" if label_method else ""
    return f"{method} on {scale} by judge {judge.name}, protocol {judge.protocol}{read}"


def _score_value(record: RecordBase, judge: Judge, method: str) -> Score:
    assert isinstance(record, ScoreRecord)
    value = record.scores.get(method)
    meta: dict[str, Any] = {
        "kind": "score", "judge": judge.name, "protocol": record.protocol, "method": method,
        "scale": record.scale, "label_method": record.label_method, "label_mass": record.label_mass,
        "distribution": record.distribution, "scores": dict(record.scores), "entropy": record.entropy,
        "unscored": record.unscored, "record": record.to_dict(),
    }
    low = 1 if record.scale_min is None else record.scale_min
    what = (f"{_how(judge, method, f'{low}-{record.scale}', record.label_method)}; "
            f"label mass {fmt_number(record.label_mass)}; "
            f"top labels {top_labels(record.distribution)}")
    return _result(value, record.unscored, meta, what)


def _criteria_value(record: RecordBase, judge: Judge, method: str) -> Score:
    assert isinstance(record, CriteriaRecord)
    value = record.aggregate.get(method)
    per = {c.name: {"score": c.scores.get(method), "scores": dict(c.scores), "weight": c.weight, "points": c.points,
                    "label_mass": c.label_mass, "distribution": c.distribution, "unscored": c.unscored}
           for c in record.criteria}
    masses = [c.label_mass for c in record.criteria if c.label_mass is not None]
    lo, hi = record.scale
    meta: dict[str, Any] = {
        "kind": "criteria", "judge": judge.name, "protocol": record.protocol, "method": method,
        "scale": list(record.scale), "aggregate": dict(record.aggregate), "spread": record.spread,
        "label_mass": min(masses) if masses else None, "criteria": per, "unscored": record.unscored,
        "reweighted": list(record.reweighted), "record": record.to_dict(),
    }
    parts = "; ".join(f"{c.name} {fmt_number(c.scores.get(method))} (mass {fmt_number(c.label_mass)}, top "
                      f"{top_labels(c.distribution, 3)})" + (f" unscored: {c.unscored}" if c.unscored else "")
                      for c in record.criteria)
    what = (f"weighted aggregate of {len(record.criteria)} criteria, "
            f"{_how(judge, method, f'{fmt_number(lo)}-{fmt_number(hi)}', None)}: {parts}")
    return _result(value, record.unscored, meta, what)


def _checklist_value(record: RecordBase, judge: Judge, method: str) -> Score:
    assert isinstance(record, ChecklistRecord)
    per = {c.id: {"text": c.text, "p_pass": c.p_pass, "value": c.value, "weight": c.weight,
                  "distribution": c.probabilities, "label_mass": c.label_mass, "unscored": c.unscored}
           for c in record.checks}
    masses = [c.label_mass for c in record.checks if c.label_mass is not None]
    meta: dict[str, Any] = {
        "kind": "checklist", "judge": judge.name, "protocol": record.protocol, "method": "satisfaction",
        "labels": list(record.labels), "satisfaction": record.satisfaction, "p_all": record.p_all,
        "expected_passed": record.expected_passed, "passed": record.passed,
        "label_mass": min(masses) if masses else None, "checks": per, "unscored": record.unscored,
        "reweighted": list(record.reweighted), "record": record.to_dict(),
    }
    parts = "; ".join(f"{c.id} P(pass) {fmt_number(c.p_pass)} (mass {fmt_number(c.label_mass)})"
                      + (f" unscored: {c.unscored}" if c.unscored else "") for c in record.checks)
    what = (f"expected weighted satisfaction of {len(record.checks)} checks (0-1) by judge {judge.name}, "
            f"protocol {record.protocol}; P(all pass) {fmt_number(record.p_all)}: {parts}")
    return _result(record.satisfaction, record.unscored, meta, what)


def _metric_value(record: RecordBase, judge: Judge, kind: str, method: str, spec: SummaryMetrics) -> Score:
    """A mode's record scored by its summary metric (``method`` where it names one, else the first)."""
    name = method if method in spec.metrics else next(iter(spec.metrics))
    data = record.to_dict()
    unscored = data.get("unscored")
    value = None if unscored else spec.metrics[name](data)
    meta: dict[str, Any] = {"kind": kind, "judge": judge.name, "protocol": judge.protocol, "method": name,
                            "unscored": unscored, "record": data}
    return _result(value, unscored, meta, f"{name} of the {kind} mode by judge {judge.name}")


def _calibrated(result: Score, record: RecordBase, calibration: Calibration, selection: Any) -> Score:
    """``result`` with the record's calibrated blocks; a record that is one verdict is valued by its calibrated
    verdict, and unscored when the selection abstains on it."""
    [annotated] = annotate(calibration.mode, [record.to_dict()], calibration, selection)
    meta = {**(result.metadata or {}), "record": annotated, "calibrated": annotated.get("calibrated")}
    block = annotated.get("calibrated")
    if not isinstance(block, dict) or result.metadata is None or result.metadata.get("unscored"):
        return result.model_copy(update={"metadata": meta})
    what = f"{result.explanation}; calibrated ({calibration.map.method}) verdict {block['verdict']}, " \
           f"confidence {fmt_number(block['confidence'])}"
    if block.get("abstained"):
        return _result(None, f"abstained: {block['abstained']}", meta, what)
    try:
        value = float(block["verdict"])
    except (TypeError, ValueError):  # a class, not a number: the raw value stays
        value = float(result.value) if isinstance(result.value, (int, float)) else math.nan
    return _result(value, None, meta, what)


def _passed(result: Score, threshold: float | None, prompts: Sequence[str]) -> Score:
    """``result`` as C/I against ``threshold`` (when given), with the judge's prompt(s) in its explanation."""
    shown = "\n\n".join(prompts)
    explanation = f"{result.explanation}\n\njudge prompt{'s' if len(prompts) > 1 else ''}:\n{shown}" if prompts \
        else result.explanation
    value = result.value
    if threshold is not None and isinstance(value, (int, float)) and math.isfinite(value):
        meta = {**(result.metadata or {}), "value": value, "threshold": threshold}
        return result.model_copy(update={"value": CORRECT if value >= threshold else INCORRECT, "metadata": meta,
                                         "answer": fmt_number(float(value)), "explanation": explanation})
    return result.model_copy(update={"explanation": explanation})


_READERS: dict[type, Callable[[RecordBase, Judge, str], Score]] = {
    ScoreRecord: _score_value, CriteriaRecord: _criteria_value, ChecklistRecord: _checklist_value}
"""The built-in records' own scores (their distributions and parts in the metadata), by record type."""
