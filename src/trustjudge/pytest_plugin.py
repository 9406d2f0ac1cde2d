"""The pytest plugin (a judge fixture and assertions about judgments; ``pip install 'trustjudge[pytest]'``).

Installed with trustjudge (entry point ``pytest11``), so a test only asks for the fixture::

    from trustjudge.pytest_plugin import assert_beats, assert_scores_at_least

    def test_answer(trustjudge_judge):
        assert_scores_at_least(trustjudge_judge, "What is 2 + 2?", my_model("What is 2 + 2?"), 7)
        assert_beats(trustjudge_judge, "What is 2 + 2?", "4", "5")

Any mode with a summary (``Mode(summary_metrics=...)``, a plug-in's too) is asserted on by
:func:`assert_metric_at_least`: ``assert_metric_at_least(trustjudge_judge, "relevance", question, answer, 0.5)``.

``trustjudge_judge`` is one :class:`~trustjudge.Judge` per test session, named by ``--trustjudge-judge NAME``
(or the ini option ``trustjudge_judge``; default :data:`~trustjudge.DEFAULT_JUDGE`) and backed by the
store ``--trustjudge-store PATH`` (ini ``trustjudge_store``, relative to the ini file; default the user's
store, :func:`~trustjudge.default_store_path`). Every judgment is kept there, so re-running an unchanged
test makes no model call; the terminal summary says how many calls a run made. A failed assertion shows
the number, how it was obtained (method, scale, judge, protocol, how the labels were read), the label
mass and the most probable labels.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import overload

import pytest

from ._integrations import check_method, clip, fmt_number, fmt_scores, one_item, top_labels
from ._judge import Judge
from .backends import DEFAULT_JUDGE
from .engine import _scoring as S
from .errors import ConfigError, PrerequisiteError
from .io._items import Criterion
from .modes._prompts import scale as scale_of
from .modes._records import CompareRecord, CriteriaRecord, CriterionResult, RecordBase, ScoreRecord
from .modes._registry import get_mode

__all__ = ["assert_beats", "assert_metric_at_least", "assert_scores_at_least", "trustjudge_judge"]

_JUDGE = pytest.StashKey[Judge]()
_UNLOADABLE = pytest.StashKey[str]()
"""Why the fixture's judge could not be loaded (one skip reason a session, summarised once)."""
_RAN: weakref.WeakSet[Judge] = weakref.WeakSet()
"""Judges an assertion helper ran (the summary reports the fixture's judge only if it judged anything)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trustjudge", "trustjudge (LLM-as-a-judge assertions)")
    group.addoption("--trustjudge-judge", dest="trustjudge_judge", metavar="NAME", default=None,
                    help=f"judge of the trustjudge_judge fixture (default: ini trustjudge_judge, else {DEFAULT_JUDGE})")
    group.addoption("--trustjudge-store", dest="trustjudge_store", metavar="PATH", default=None,
                    help="judgment store of the trustjudge_judge fixture (default: ini trustjudge_store, else "
                         "the user's trustjudge store)")
    parser.addini("trustjudge_judge", "judge name of the trustjudge_judge fixture", type="string", default="")
    parser.addini("trustjudge_store", "judgment store of the trustjudge_judge fixture (relative to the ini file)",
                  type="string", default="")


def _judge_name(config: pytest.Config) -> str:
    return str(config.getoption("trustjudge_judge") or config.getini("trustjudge_judge") or DEFAULT_JUDGE)


def _store_path(config: pytest.Config) -> Path | None:
    given = config.getoption("trustjudge_store")
    if given:
        return Path(str(given)).expanduser()
    ini = str(config.getini("trustjudge_store") or "")
    if not ini:
        return None  # the user's default store
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return base / Path(ini).expanduser()


@pytest.fixture(scope="session")
def trustjudge_judge(request: pytest.FixtureRequest) -> Iterator[Judge]:
    """The session's judge (``--trustjudge-judge``), backed by the judgment store (``--trustjudge-store``)."""
    judge = Judge(_judge_name(request.config), store=_store_path(request.config))
    try:
        judge.backend  # noqa: B018 (loaded now: a missing package is one skip reason, not a traceback per test)
    except PrerequisiteError as exc:
        judge.close()
        reason = (f"the trustjudge_judge fixture's judge {judge.name} cannot be loaded: {exc} (or choose another "
                  "judge with --trustjudge-judge NAME)")
        request.config.stash[_UNLOADABLE] = reason  # pytest keeps the skip: the judge is tried once a session
        pytest.skip(reason)
    except ConfigError:
        pass  # a judge name it cannot build fails where a test uses it, as before (the fixture alone may be asked)
    request.config.stash[_JUDGE] = judge
    try:
        yield judge
    finally:
        judge.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    unloadable = config.stash.get(_UNLOADABLE, None)
    if unloadable is not None:
        terminalreporter.write_sep("-", "trustjudge")
        n = sum(unloadable in str(r.longrepr) for r in terminalreporter.stats.get("skipped", []))
        terminalreporter.write_line(f"{_count(n, 'test')} skipped: {unloadable}")
    judge = config.stash.get(_JUDGE, None)
    if judge is None or judge not in _RAN:
        return
    stats = judge.stats
    unscored = sum(stats.unscored.values())
    terminalreporter.write_sep("-", "trustjudge")
    terminalreporter.write_line(
        f"judge {judge.name}, store {judge.store.path}: {_count(stats.model_calls, 'model call')}"
        f"{stats.recorded_note()}, "
        f"{_count(stats.from_store, 'judgment')} from the store" + (f", {unscored} unscored" if unscored else ""))


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


# -- assertions ----------------------------------------------------------------------------------------


def _how(judge: Judge, method: str, points: int, label_method: str | None) -> str:
    read = f", labels read {label_method}" if label_method else ""
    return f"method {method} on a 1-{points} scale, judge {judge.name}, protocol {judge.protocol}{read}"


@overload
def assert_scores_at_least(judge: Judge, question: str, response: str, minimum: float, method: str = ...,
                           scale: int = ..., criterion: None = ..., *, context: str | None = ...,
                           reference: str | None = ...) -> ScoreRecord: ...


@overload
def assert_scores_at_least(judge: Judge, question: str, response: str, minimum: float, method: str = ...,
                           scale: int = ..., *, criterion: Criterion, context: str | None = ...,
                           reference: str | None = ...) -> CriteriaRecord: ...


@overload
def assert_scores_at_least(judge: Judge, question: str, response: str, minimum: float, method: str,
                           scale: int, criterion: Criterion, *, context: str | None = ...,
                           reference: str | None = ...) -> CriteriaRecord: ...


def assert_scores_at_least(judge: Judge, question: str, response: str, minimum: float, method: str = "trustjudge",
                           scale: int | str = 10, criterion: Criterion | None = None, *, context: str | None = None,
                           reference: str | None = None) -> ScoreRecord | CriteriaRecord:
    """Assert that ``response`` scores at least ``minimum`` under ``method`` (on ``criterion``, if given).

    The score is the judge's pointwise score of the response on a 1..``scale`` scale (or, with a
    :class:`~trustjudge.Criterion`, on that criterion: 1..its number of levels, else 1..``scale``). An
    unscored judgment fails. Returns the record (its scores under every method, label mass, distribution).
    """
    __tracebackhide__ = True
    check_method(method)
    top = (max(criterion.level_values()) if criterion is not None and criterion.levels
           else scale_of(scale).points)
    if isinstance(minimum, bool) or not isinstance(minimum, (int, float)) or not math.isfinite(minimum) \
            or minimum > top:
        raise ConfigError(f"minimum must be a finite number no higher than the scale's top {top}, got {minimum!r}")
    item = one_item(question, [response], context=context, reference=reference)
    _RAN.add(judge)
    if criterion is None:
        task = judge.task("score", scale=scale, keep_distribution=True)
        record = next(iter(judge.run(task, [item])))
        assert isinstance(record, ScoreRecord)
        _check_score(judge, record.scores, record.unscored, record.label_mass, record.distribution, minimum,
                     method, record.scale, record.label_method, None, question, response)
        return record
    ctask = judge.task("criteria", criteria=(criterion,), scale=scale, keep_distribution=True)
    crecord = next(iter(judge.run(ctask, [item])))
    assert isinstance(crecord, CriteriaRecord)
    result: CriterionResult = crecord.criteria[0]
    _check_score(judge, result.scores, result.unscored, result.label_mass, result.distribution, minimum, method,
                 result.points, None, criterion, question, response)
    return crecord


def assert_metric_at_least(judge: Judge, mode: str, question: str, response: str, minimum: float,
                           metric: str | None = None, *, context: str | None = None, reference: str | None = None,
                           **options: object) -> RecordBase:
    """Assert that ``response``, judged in ``mode`` (with its ``options``), has at least ``minimum`` of the
    mode's summary ``metric`` (``Mode(summary_metrics=...)``; default its first). An unscored judgment, or one
    without the metric, fails. Returns the record."""
    __tracebackhide__ = True
    spec = get_mode(mode).summary_metrics
    if spec is None or not spec.metrics:
        raise ConfigError(f"mode {mode!r} has no summary metric to assert on (Mode(summary_metrics=...)"
                          f"{'; a pairwise summary has none per response' if spec is not None else ''})")
    name = metric or next(iter(spec.metrics))
    if name not in spec.metrics:
        raise ConfigError(f"mode {mode!r} has no metric {name!r}: its metrics are {', '.join(spec.metrics)}")
    item = one_item(question, [response], context=context, reference=reference)
    _RAN.add(judge)
    record = next(iter(judge.run(judge.task(mode, **options), [item])))
    data = record.to_dict()
    value = None if data.get("unscored") else spec.metrics[name](data)
    if value is not None and value >= minimum:
        return record
    head = (f"the response was not scored ({data.get('unscored') or f'no {name}'}): no number to compare with the "
            f"minimum {fmt_number(minimum)}" if value is None else
            f"the response's {name} is {fmt_number(value)}, below the minimum {fmt_number(minimum)}")
    raise AssertionError("\n".join([f"trustjudge: {head}", f"  how: the {mode} mode's {name}, judge {judge.name}, "
                                    f"protocol {judge.protocol}", f"  question: {clip(question)}",
                                    f"  response: {clip(response)}"]))


def _check_score(judge: Judge, scores: dict[str, float | None], unscored: str | None, mass: float | None,
                 distribution: dict[str, float] | None, minimum: float, method: str, points: int,
                 label_method: str | None, criterion: Criterion | None, question: str, response: str) -> None:
    __tracebackhide__ = True
    value = scores.get(method)
    if unscored is None and value is not None and value >= minimum:
        return
    head = (f"the response was not scored ({unscored}): no number to compare with the minimum {fmt_number(minimum)}"
            if unscored is not None or value is None else
            f"the response scored {fmt_number(value)}, below the minimum {fmt_number(minimum)}")
    lines = [f"trustjudge: {head}", f"  how: {_how(judge, method, points, label_method)}"]
    if criterion is not None:
        lines.append(f"  criterion: {criterion.name}: {clip(criterion.description, 120)}")
    lines += [f"  top labels: {top_labels(distribution)}",
              f"  label mass: {fmt_number(mass)} (probability the judge put on the scale's labels)",
              f"  all methods: {fmt_scores(scores)}",
              f"  question: {clip(question)}", f"  response: {clip(response)}"]
    raise AssertionError("\n".join(lines))


def assert_beats(judge: Judge, question: str, a: str, b: str, *, context: str | None = None,
                 reference: str | None = None) -> CompareRecord:
    """Assert that response ``a`` beats ``b``: by likelihood aggregation of both presentation orders, and
    in each order on its own (A's win is the most probable verdict whether A is shown first or second).

    Returns the compare record (verdicts under every aggregation, combined probabilities, both orders).
    """
    __tracebackhide__ = True
    item = one_item(question, [a, b], context=context, reference=reference)
    _RAN.add(judge)
    record = next(iter(judge.run(judge.compare_task(), [item])))
    assert isinstance(record, CompareRecord)
    own = [_order_verdict(order, swapped=i == 1) for i, order in enumerate(record.orders)]
    if record.unscored is None and record.verdicts.get("likelihood") == "first" and own == ["first", "first"]:
        return record
    read = f", labels read {record.label_method}" if record.label_method else ""
    how = (f"  how: both presentation orders, probabilities summed (likelihood aggregation), judge {judge.name}, "
           f"protocol {judge.protocol}{read}")
    if record.unscored is not None:
        lines = [f"trustjudge: the pair was not judged ({record.unscored}): no verdict", how]
    else:
        p = record.probabilities or {}
        lines = ["trustjudge: A does not beat B (A must win by likelihood and in each order on its own)", how,
                 f"  likelihood verdict: {_name(record.verdicts.get('likelihood'))} (P(A wins) "
                 f"{p.get('first', 0.0):.3f}, P(B wins) {p.get('second', 0.0):.3f}, P(tie) {p.get('tie', 0.0):.3f})",
                 f"  each order's own verdict: {_name(own[0])} with A shown first, {_name(own[1])} with B shown first"]
    for i, order in enumerate(record.orders):
        shown = "A shown first" if i == 0 else "B shown first"
        labels = {lab: float(order[lab]) for lab in ("A", "B", "C") if order.get(lab) is not None}
        lines.append(f"  order {i + 1} ({shown}): labels {top_labels(labels, 3)} "
                     f"(A: first shown wins, B: second shown wins, C: tie); label mass {fmt_number(order.get('mass'))}"
                     + (f"; unscored ({order['unscored']})" if order.get("unscored") else ""))
    lines.append(f"  verdicts: {', '.join(f'{m} {v}' for m, v in record.verdicts.items())}")
    lines += [f"  question: {clip(question)}", f"  A: {clip(a)}", f"  B: {clip(b)}"]
    raise AssertionError("\n".join(lines))


def _name(verdict: str | None) -> str:
    """A verdict about the pair (first = A) in the words of the assertion."""
    return {"first": "A wins", "second": "B wins", "tie": "tie"}.get(verdict or "", "none")


def _order_verdict(order: dict[str, object], *, swapped: bool) -> str | None:
    """Which of the pair (first = A) one order's own most probable verdict favours."""
    probs = [p for p in (order.get(lab) for lab in ("A", "B", "C")) if isinstance(p, (int, float))]
    if order.get("unscored") or len(probs) != 3:
        return None
    return S.from_order(*probs, swapped=swapped).verdict()
