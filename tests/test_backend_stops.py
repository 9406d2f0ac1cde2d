"""A plug-in backend that stops the run while judging (issue 38): one that raises a ``BaseException`` of its
own (a class of its own, ``GeneratorExit``) or calls ``sys.exit`` stops the run with a trustjudge error that
names the backend, the plug-in it comes from and the item being judged; every judgment made before it stays
in the store, so that the rerun (the backend fixed) asks none of them again. Ctrl-C stays Ctrl-C, and a
built-in backend's ``BaseException`` still passes as it is (the process dying: tests/test_engine.py's
crash-resume test and tests/test_hardening.py's F2 rely on it).

The backend is a real :class:`~trustjudge.backends.Backend` subclass (no trustjudge fake under it) in a module
of its own, reached the two ways users add one: an installed package's entry point (the command line) and
:func:`~trustjudge.backends.register_backend` (the library).
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from trustjudge import Judge, items_from_dicts
from trustjudge.backends import PLUGIN_GROUP, register_backend
from trustjudge.errors import BackendUnavailable, TrustJudgeError

from .conftest import install_dist, run_cli, time_limit, write_jsonl

PLUGIN = '''
"""A third-party judge: deterministic label log-probabilities from a hash of prompt and label."""

import hashlib
import math
import os
import sys

from trustjudge.backends import Backend, Generation, LabelResult

CALLS = []
"""Every prompt this backend judged, in order."""


class Stop(BaseException):
    """The plug-in's own BaseException (as KeyboardInterrupt is one, but not Ctrl-C)."""


class Stopping(Backend):
    def __init__(self, rest):
        self.rest = rest

    @property
    def fingerprint(self):
        return "stopping:" + self.rest

    @property
    def context_length(self):
        return 4096

    def count_tokens(self, text):
        return len(text.split()) + 1

    def format_prompt(self, system, user, assistant_prefix):
        return system + "\\n\\n" + user + "\\n\\n" + assistant_prefix

    def label_logprobs(self, requests):
        on = os.environ.get("TJ_STOP_ON")
        if on and any(on in r.prompt for r in requests):
            how = os.environ.get("TJ_STOP_HOW", "stop")
            if how == "exit":
                sys.exit(3)
            if how == "ctrl-c":
                raise KeyboardInterrupt
            raise GeneratorExit("closed") if how == "generator" else Stop("enough")
        out = []
        for r in requests:
            CALLS.append(r.prompt)
            weights = [int(hashlib.sha256((r.prompt + lab).encode()).hexdigest()[:6], 16) + 1 for lab in r.labels]
            out.append(LabelResult(tuple(math.log(w / sum(weights)) for w in weights), self.count_tokens(r.prompt)))
        return out

    def generate(self, requests):
        return [Generation("Fine.", (-0.1,), "stop", self.count_tokens(r.prompt)) for r in requests]


def build(rest):
    return Stopping(rest)
'''

ROWS = [{"id": f"q{i}", "question": f"What is {i} + {i}?",
         "responses": [{"id": "a", "text": "BOOM" if i == 3 else str(2 * i)}]} for i in range(6)]
SAID = {"stop": "raised Stop: enough", "generator": "raised GeneratorExit: closed", "exit": "called sys.exit(3)"}


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The backend's module, installed as the distribution tj-stopping 1.0 (entry point ``stopping``)."""
    site = tmp_path / "site"
    install_dist(site, "tj-stopping", PLUGIN_GROUP, {"stopping": "tj_stopping:build"})
    (site / "tj_stopping.py").write_text(PLUGIN)
    monkeypatch.delenv("TRUSTJUDGE_BACKEND_PLUGINS", raising=False)
    monkeypatch.setenv("TJ_STOP_ON", "BOOM")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    try:
        yield importlib.import_module("tj_stopping")
    finally:
        sys.modules.pop("tj_stopping", None)


@pytest.fixture
def registered(plugin: ModuleType) -> Iterator[ModuleType]:
    """The same backend registered in-process with ``register_backend("mystop", build)``."""
    from trustjudge.backends import _FACTORIES

    register_backend("mystop", plugin.build)
    try:
        yield plugin
    finally:
        _FACTORIES.pop("mystop", None)


def _judged(store: Path, name: str = "mystop/m") -> list[dict[str, Any]]:
    with Judge(name, store=store, batch_size=1) as judge:
        return [r.to_dict() for r in judge.score(items_from_dicts(ROWS))]


@pytest.mark.parametrize("how", ["stop", "generator", "exit"])
def test_a_plugin_backend_that_stops_is_named_with_its_item_and_the_rerun_repeats_nothing(
        tmp_path: Path, registered: ModuleType, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    monkeypatch.setenv("TJ_STOP_HOW", how)
    store = tmp_path / "s.sqlite"
    with time_limit(30), pytest.raises(TrustJudgeError) as stopped:  # before: Stop and GeneratorExit escaped
        _judged(store)
    message = str(stopped.value)
    assert isinstance(stopped.value, BackendUnavailable)  # the run stops: not one unscored judgment each
    assert f"backend stopping:m {SAID[how]} while judging item 'q3'" in message, message
    assert "backend 'mystop' registered with register_backend (tj_stopping.build)" in message, message
    assert "run the same command to resume" in message, message
    made = list(registered.CALLS)
    assert made and all("BOOM" not in p for p in made)
    monkeypatch.delenv("TJ_STOP_ON")  # the backend fixed: the rerun asks only what was not stored
    resumed = _judged(store)
    assert len(registered.CALLS) - len(made) == len(ROWS) - len(made)
    assert not set(made) & set(registered.CALLS[len(made):]), "a stored judgment was asked again"
    assert resumed == _judged(tmp_path / "fresh.sqlite")
    assert all(r["unscored"] is None for r in resumed)


def test_ctrl_c_in_a_plugin_backend_stays_ctrl_c(tmp_path: Path, registered: ModuleType,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TJ_STOP_HOW", "ctrl-c")
    with time_limit(30), pytest.raises(KeyboardInterrupt):
        _judged(tmp_path / "s.sqlite")


def test_a_builtin_backends_own_base_exception_still_passes_as_it_is(tmp_path: Path) -> None:
    """The other side of the line: a ``mock/`` judge (built in) whose script raises one is the process dying."""
    from trustjudge.backends import MockBackend, register_mock

    class Dying(BaseException):
        pass

    def die(request: Any) -> list[float]:
        raise Dying("killed")

    register_mock("dying38", MockBackend("dying38", script=die))
    try:
        with time_limit(30), pytest.raises(Dying):
            _judged(tmp_path / "s.sqlite", "mock/dying38")
    finally:
        register_mock("dying38", None)


def _cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    return run_cli(capsys, *args, limit_s=30)


@pytest.mark.parametrize("how", ["stop", "exit"])
def test_an_installed_backend_plugin_that_stops_exits_2_naming_it_and_the_rerun_resumes(
        tmp_path: Path, plugin: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        how: str) -> None:
    monkeypatch.setenv("TJ_STOP_HOW", how)
    items, store, out = write_jsonl(tmp_path / "items.jsonl", ROWS), tmp_path / "s.sqlite", tmp_path / "o.jsonl"
    args = ("score", items, "-j", "stopping/m", "--store", store, "--batch-size", "1", "--out", out)
    code, _, err = _cli(capsys, *args)
    assert code == 2, (code, err)  # before: a traceback of Stop (or sys.exit's own status 3)
    assert "Traceback" not in err, err
    assert f"backend stopping:m {SAID[how]} while judging item 'q3' (it comes from backend plugin 'stopping' " \
           "(tj_stopping:build from tj-stopping 1.0))" in err, err
    assert not out.exists()
    made = len(plugin.CALLS)
    assert made > 0
    monkeypatch.delenv("TJ_STOP_ON")
    code, _, err = _cli(capsys, *args)
    assert code == 0, err
    assert [json.loads(line)["item_id"] for line in out.read_text().splitlines()] == [r["id"] for r in ROWS]
    assert len(plugin.CALLS) == len(ROWS), "the rerun asked a stored judgment again"
    assert f"model calls: {len(ROWS) - made} (labels {len(ROWS) - made}, generations 0); from store: {made}" in err, err


@pytest.mark.parametrize("how", ["stop", "exit"])
def test_a_plugin_backend_that_stops_in_a_ray_actor_says_so_to_the_driver(registered: ModuleType,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          how: str) -> None:
    """The actor's side of the Ray boundary, run in-process (tests/test_ray.py runs it on Ray): before, the
    plug-in's ``BaseException`` (or ``sys.exit``) left the actor as it was, and Ray ended the worker."""
    from trustjudge.backends._ray import _JudgeActor

    monkeypatch.setenv("TJ_STOP_HOW", how)
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else 0
    try:
        actor = _JudgeActor("mystop/m", threads=1)
        payload = json.dumps({"kind": "labels", "requests": [{"prompt": "say BOOM", "labels": ["A]", "B]"]}]})
        out = json.loads(actor({"block": [0], "payload": [payload]})["output"][0])
    finally:
        if torch is not None:  # the actor set this process's torch threads
            torch.set_num_threads(threads)
    assert out == {"stop": {"how": SAID[how], "origin": "backend 'mystop' registered with register_backend "
                                                        "(tj_stopping.build)"}}


def test_a_builtin_backends_base_exception_in_a_ray_actor_passes_as_it_is() -> None:
    from trustjudge.backends import MockBackend, register_mock
    from trustjudge.backends._ray import _JudgeActor

    class Dying(BaseException):
        pass

    def die(request: Any) -> list[float]:
        raise Dying("killed")

    register_mock("dying38r", MockBackend("dying38r", script=die))
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else 0
    try:
        actor = _JudgeActor("mock/dying38r", threads=1)
        payload = json.dumps({"kind": "labels", "requests": [{"prompt": "x", "labels": ["A]"]}]})
        with pytest.raises(Dying):
            actor({"block": [0], "payload": [payload]})
    finally:
        register_mock("dying38r", None)
        if torch is not None:
            torch.set_num_threads(threads)
