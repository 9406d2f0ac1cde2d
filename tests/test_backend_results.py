"""Backend results are checked at the engine boundary: a backend (a plugin, a buggy server) that returns
the wrong number of log-probabilities, NaN or positive ones, or that raises or calls ``sys.exit``, leaves
the judgments it spoiled unscored with a message naming it, and the run goes on (issue 23).

The bad backend is a small class registered the way third-party backends are (:func:`register_backend`,
the door the ``trustjudge.backends`` entry points go through); it spoils only responses whose text holds
``BAD``, so each test also shows the other judgments scored.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from trustjudge import Judge, items_from_dicts
from trustjudge.backends import LabelRequest, LabelResult, MockBackend, register_backend

from .conftest import run_cli, write_jsonl

ITEMS = [{"id": "q1", "question": "What is 2 + 2?",
          "responses": [{"id": "good", "text": "4"}, {"id": "bad", "text": "BAD five"}]}]


class Spoiling(MockBackend):
    """A plugin backend whose answers for prompts holding ``BAD`` are spoiled in the way ``how`` names."""

    def __init__(self, how: str) -> None:
        super().__init__(f"spoiling-{how}", keep_history=False)
        self.how = how

    def _spoil(self, request: LabelRequest, good: LabelResult) -> LabelResult:
        n = len(request.labels)
        logprobs: dict[str, tuple[float, ...]] = {
            "short": good.logprobs[:2], "long": (*good.logprobs, -1.0), "nan": (math.nan,) * n,
            "positive": (0.5, *good.logprobs[1:]), "inf": (math.inf, *good.logprobs[1:])}
        return LabelResult(logprobs[self.how], good.prompt_tokens)

    def label_logprobs(self, requests: Sequence[LabelRequest]) -> list[LabelResult]:
        out = super().label_logprobs(requests)
        if not any("BAD" in r.prompt for r in requests):
            return out
        if self.how == "raise":
            raise RuntimeError("the plugin's own bug")
        if self.how == "exit":
            sys.exit(0)
        if self.how == "fewer":
            return out[:-1]
        return [self._spoil(r, o) if "BAD" in r.prompt else o for r, o in zip(requests, out)]


@pytest.fixture
def spoiling() -> Iterator[str]:
    from trustjudge.backends import _FACTORIES

    register_backend("spoiling", Spoiling)
    try:
        yield "spoiling"
    finally:
        _FACTORIES.pop("spoiling", None)


@pytest.mark.parametrize("how", ["short", "long", "nan", "positive", "inf", "raise"])
def test_a_bad_backend_result_is_unscored_naming_the_backend_and_the_run_goes_on(tmp_path: Path, how: str,
                                                                                 spoiling: str) -> None:
    judge = Judge(f"{spoiling}/{how}", store=tmp_path / "s.sqlite", batch_size=1)
    try:
        got = {r.response_id: r for r in judge.score(items_from_dicts(ITEMS))}
        pairs = list(judge.compare(items_from_dicts(ITEMS)))
        error = judge.stats.last_error
    finally:
        judge.close()
    assert got["bad"].unscored == "backend_error", got["bad"]
    assert all(v is None for v in got["bad"].scores.values())
    assert got["good"].unscored is None and all(math.isfinite(v) for v in got["good"].scores.values())
    assert 1 <= got["good"].scores["expected"] <= 10
    assert pairs[0].unscored == "backend_error"  # both orders show the BAD response
    assert error is not None and f"spoiling-{how}" in error, error


def test_a_backend_returning_fewer_results_than_requests_spoils_only_its_batch(tmp_path: Path,
                                                                               spoiling: str) -> None:
    items = [dict(ITEMS[0], id="q1"), {"id": "q2", "question": "Name a colour.",
                                       "responses": [{"id": "good", "text": "Red."}]}]
    judge = Judge(f"{spoiling}/fewer", store=tmp_path / "s.sqlite", batch_size=1)
    try:
        got = {(r.item_id, r.response_id): r.unscored for r in judge.score(items_from_dicts(items))}
        error = judge.stats.last_error
    finally:
        judge.close()
    assert got == {("q1", "good"): None, ("q1", "bad"): "backend_error", ("q2", "good"): None}
    assert error is not None and "0 result(s) for 1 request(s)" in error


def cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    return run_cli(capsys, *args, limit_s=60)


def test_a_plugin_that_raises_is_named_in_one_line_not_a_traceback(tmp_path: Path, spoiling: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", ITEMS)
    code, out, err = cli(capsys, "score", items, "-j", f"{spoiling}/raise", "--store", tmp_path / "s.sqlite",
                         "--batch-size", "1")
    assert code == 0, err
    assert "Traceback" not in err
    assert "backend mock:spoiling-raise failed: RuntimeError: the plugin's own bug" in err, err
    rows = {r["response_id"]: r["unscored"] for r in map(json.loads, out.splitlines())}
    assert rows == {"good": None, "bad": "backend_error"}


def test_a_plugin_calling_sys_exit_0_does_not_exit_0(tmp_path: Path, spoiling: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", ITEMS)
    code, _, err = cli(capsys, "score", items, "-j", f"{spoiling}/exit", "--store", tmp_path / "s.sqlite",
                       "--batch-size", "1", "--out", tmp_path / "out.jsonl")
    assert code != 0
    assert "mock:spoiling-exit called sys.exit(0)" in err, err


def test_spoiled_results_are_not_stored(tmp_path: Path, spoiling: str) -> None:
    from trustjudge import Store

    store = tmp_path / "s.sqlite"
    judge = Judge(f"{spoiling}/nan", store=store, batch_size=1)
    try:
        list(judge.score(items_from_dicts(ITEMS)))
    finally:
        judge.close()
    with Store(store) as s:
        assert s.count() == 1  # the good judgment only: the spoiled one is asked again next time
