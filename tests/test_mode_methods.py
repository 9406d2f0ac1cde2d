"""Judge's per-mode conveniences come from the registry (issue 37): ``judge.<mode>(items, ...)`` and
``judge.<mode>_task(...)`` for every mode, a plug-in's included, with the older spellings giving the same records;
and the library's progress bar ends on its real total (issue 39)."""

from __future__ import annotations

import copy
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import trustjudge
from tests.conftest import RELEVANCE_PLUGIN as FIXTURE
from trustjudge import Check, ConfigError, Criterion, Judge, items_from_dicts, register_mode, unregister_mode
from trustjudge._mode_methods import ModeRun, ModeTask, method_name
from trustjudge._progress import RunBar
from trustjudge.backends import Generation, MockBackend
from trustjudge.modes._registry import builtin_modes

ROWS = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "evidence": [f"{i} + {i} is {2 * i}."],
         "responses": [{"id": "a", "text": f"{2 * i}."}, {"id": "b", "text": f"It is {i}. Also, the sky is blue."}]}
        for i in range(3)]
CRITERIA = (Criterion("accuracy", "Is it correct?"), Criterion("clarity", "Is it clear?", weight=2.0))
CHECKS = (Check("answers", "Does it answer the question?"),)


@pytest.fixture
def judge(tmp_path: Path) -> Iterator[Judge]:
    with Judge("mock/hash", store=tmp_path / "s.sqlite") as j:
        yield j


@pytest.fixture
def relevance() -> Iterator[Any]:
    """The fixture plug-in's mode (tests/fixtures/relevance_plugin), registered here: trustjudge is not changed."""
    sys.path.insert(0, str(FIXTURE / "src"))
    try:
        import tj_relevance

        yield register_mode(tj_relevance.MODE)
    finally:
        unregister_mode("relevance")
        sys.path.remove(str(FIXTURE / "src"))
        sys.modules.pop("tj_relevance", None)


def _dicts(records: Any) -> list[dict[str, Any]]:
    return [r.to_dict() for r in records]


def test_a_registered_plugin_mode_gets_its_conveniences(judge: Judge, relevance: Any) -> None:
    items = items_from_dicts(ROWS)
    want = _dicts(judge.run(judge.task("relevance"), items))
    assert len(want) == 6
    runs = judge.relevance  # type: ignore[attr-defined]  # a plug-in's: not known to a type checker
    assert isinstance(runs, ModeRun) and runs.mode is relevance and "relevance" in (runs.__doc__ or "")
    assert _dicts(runs(items)) == want
    assert _dicts(judge.run("relevance", items, protocol="direct")) == want
    task = judge.relevance_task(protocol="cot")  # type: ignore[attr-defined]
    assert type(task) is relevance.task and task.protocol == "cot"  # its template is read afresh: no ==
    assert {"relevance", "relevance_task"} <= set(dir(judge))


def test_a_mode_gone_from_the_registry_takes_its_conveniences_with_it(judge: Judge) -> None:
    assert not hasattr(judge, "relevance") and not hasattr(judge, "relevance_task")
    with pytest.raises(AttributeError, match="no attribute 'relevance'"):
        judge.relevance  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(judge, "_private") and copy.copy(judge).name == judge.name  # copying asks nothing


def test_the_built_in_spellings_give_the_records_of_run(judge: Judge) -> None:
    items = items_from_dicts(ROWS)
    cases: list[tuple[Any, str, dict[str, Any]]] = [
        (judge.score(items), "score", {}),
        (judge.score(items, scale=100), "score", {"scale": 100}),
        (judge.compare(items), "compare", {}),
        (judge.criteria(items, CRITERIA), "criteria", {"criteria": CRITERIA}),
        (judge.criteria(items, list(CRITERIA), scale="0-3"), "criteria", {"criteria": CRITERIA, "scale": "0-3"}),
        (judge.criteria_compare(items, CRITERIA, graded=True), "criteria-compare",
         {"criteria": CRITERIA, "graded": True}),
        (judge.checklist(items, CHECKS), "checklist", {"checklist": CHECKS}),
        (judge.claims(items, k=2), "claims", {"k": 2}),
        (judge.steps(items), "steps", {}),
    ]
    for records, mode, options in cases:
        assert _dicts(records) == _dicts(judge.run(mode, items, **options)), mode
    assert {m for _, m, _ in cases} == set(builtin_modes())
    # the tasks, positional options in their declared order (score_task(scale, protocol) as it always read)
    assert judge.score_task(5, "cot") == judge.task("score", scale=5, protocol="cot")
    assert judge.compare_task("cot", 0.2) == judge.task("compare", protocol="cot", delta=0.2)
    assert judge.criteria_task(CRITERIA, reweight=True) == judge.task("criteria", criteria=CRITERIA, reweight=True)
    assert judge.checklist_task(list(CHECKS)) == judge.task("checklist", checklist=CHECKS)
    assert judge.claims_task(match=True) == judge.task("claims", match=True)
    assert isinstance(judge.criteria_compare_task, ModeTask)
    assert judge.plan(items, "score", scale=100) == judge.plan(items, judge.score_task(100))
    # the module-level functions
    store = judge.store.path
    assert _dicts(trustjudge.score(items, "mock/hash", store=store)) == _dicts(judge.score(items))
    assert _dicts(trustjudge.compare(items, "mock/hash", store=store)) == _dicts(judge.compare(items))


def test_compare_criteria_is_a_deprecated_alias(judge: Judge) -> None:
    items = items_from_dicts(ROWS)
    with pytest.warns(DeprecationWarning, match="criteria_compare"):
        old = _dicts(judge.compare_criteria(items, CRITERIA, graded=True))
    assert old == _dicts(judge.criteria_compare(items, CRITERIA, graded=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        judge.criteria_compare_task(CRITERIA)  # the mode's own names do not warn


def test_options_go_by_keyword_or_in_their_declared_order(judge: Judge) -> None:
    with pytest.raises(ConfigError, match=r"'score'.*option 'scale' given by position and by keyword"):
        judge.score_task(5, scale=10)
    with pytest.raises(ConfigError, match=r"'compare' takes at most 3 options by position"):
        judge.compare_task("cot", 0.1, None, "extra")
    with pytest.raises(ConfigError, match=r"mode 'score'.*its options: scale, protocol"):
        judge.score(items_from_dicts(ROWS), scael=5)
    with pytest.raises(ConfigError, match="go with a mode's name"):
        judge.run(judge.score_task(), items_from_dicts(ROWS), scale=5)


def test_every_built_in_convenience_is_declared_for_type_checkers() -> None:
    declared = Judge.__annotations__
    for mode in builtin_modes():
        assert declared[method_name(mode)].startswith("ModeRun["), mode
        assert declared[f"{method_name(mode)}_task"] == "ModeTask", mode
    assert not any(hasattr(Judge, name) for name in declared if name.startswith(("ModeRun", "score", "compare")))


# -- the progress bar's totals (issue 39) ----------------------------------------------------------------------

def _bar_text(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err


def test_a_streamed_input_has_a_real_total(judge: Judge, capsys: pytest.CaptureFixture[str]) -> None:
    items = items_from_dicts(ROWS)
    records = list(judge.score((item for item in items), progress=True))  # a generator: no len()
    assert len(records) == 6
    err = _bar_text(capsys)
    assert "6/6" in err and "/?" not in err, err


def _extracting() -> MockBackend:
    """mock/hash's labels, and two claims extracted from every response."""
    return MockBackend("extracting", generate_script=lambda req: Generation("- One claim.\n- Another claim.\nEND",
                                                                            (-0.1,) * 5, "stop", 10))


def test_extracted_claims_end_on_what_was_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = items_from_dicts(ROWS)
    with Judge(_extracting(), store=tmp_path / "s.sqlite") as judge:
        bound = sum(judge.claims_task(max_claims=8).size(item) for item in items)
        asked: list[int] = []
        records = list(judge.claims(items, max_claims=8, progress=asked.append))
        done = sum(asked)  # 2 claims a response (one question for the same claim of one item), not 8
        assert len(records) == 6 and 0 < done < bound == 48
        list(judge.claims(items, max_claims=8, progress=True))
    err = _bar_text(capsys)
    assert f"{done}/{done}" in err and "/48" not in err, err


class _Recorded:
    """A rich Progress stand-in that keeps each total the bar was given."""

    def __init__(self) -> None:
        self.totals: list[int] = []
        self.completed = 0

    def advance(self, handle: Any, n: int) -> None:
        self.completed += n

    def update(self, handle: Any, total: int) -> None:
        self.totals.append(total)


def test_the_bar_total_never_falls_below_what_is_done_and_ends_on_it() -> None:
    shown = _Recorded()
    bar = RunBar(shown, None, 30)  # three chunks of 10 known ahead; the first asks 4, the others 10
    for asked in (4, 10, 10):
        bar.chunk(10, True)
        for _ in range(asked):
            bar(1)
        bar.chunk_done()
        assert shown.totals[-1] >= shown.completed
    assert shown.totals == [30, 24, 24, 24, 24, 24] and shown.completed == 24
    streamed = _Recorded()
    bar = RunBar(streamed, None, None)
    for _ in range(2):
        bar.chunk(5, False)
        for _ in range(5):
            bar(1)
        bar.chunk_done()
    assert streamed.totals == [5, 5, 10, 10]


def test_judge_defines_no_per_mode_method_of_its_own() -> None:
    # The "12 hand-written wrappers": each mode's convenience comes from the registry, none from the class
    # (a ``TYPE_CHECKING`` stub declares them for type checkers only).
    own = {name for name in vars(Judge) if not name.startswith("_")}
    per_mode = {f"{method_name(m)}{end}" for m in builtin_modes() for end in ("", "_task")}
    assert not own & per_mode, own & per_mode
    assert {"run", "plan", "task", "calibrate", "select", "cascade", "audit", "rank"} <= own
