"""The service when a plug-in stops while judging (issue 38): a mode plug-in that calls ``sys.exit`` (or raises a
``BaseException`` of its own) in the middle of a request, or a backend plug-in that does, gets that request a
JSON error naming the plug-in, never a dead worker or a closed connection; the service goes on answering the
next requests, and every judgment made before the stop is in the store (the same request, once the plug-in
behaves, makes no model call).

Both plug-ins are installed the way a package installs them (a ``.dist-info`` with their entry point on a
temporary ``sys.path`` entry) and reached by the service through the registries alone.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from trustjudge.backends import PLUGIN_GROUP as BACKEND_GROUP
from trustjudge.backends import MockBackend, register_mock
from trustjudge.modes._registry import PLUGIN_GROUP as MODE_GROUP
from trustjudge.modes._registry import unregister_mode
from trustjudge.serve import create_app

from .conftest import install_dist, time_limit
from .test_adversarial import EXITING_MODE
from .test_backend_stops import PLUGIN as STOPPING_BACKEND

ROWS = [{"id": f"q{i}", "question": f"What is {i} + 1?",
         "responses": [{"id": "a", "text": str(i + 1)}, {"id": "b", "text": "no idea"}]} for i in range(6)]
OTHER = [{"id": "z", "question": "Name a colour.", "responses": [{"id": "a", "text": "Red."}]}]


def _install(site: Path, dist: str, module: str, source: str, group: str, entry: str) -> None:
    install_dist(site, dist, group, {entry: f"{module}:{'MODE' if 'mode' in group else 'build'}"})
    (site / f"{module}.py").write_text(source)


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MockBackend]:
    """The exiting mode (tests/test_adversarial.py's, ``/v1/exiting``) and the stopping backend
    (tests/test_backend_stops.py's, ``stopping/...``) installed; yields a counting judge, ``mock/served38``."""
    site = tmp_path / "site"
    _install(site, "tj-exiting-mode", "tj_exiting_mode", EXITING_MODE, MODE_GROUP, "exiting")
    _install(site, "tj-stopping", "tj_stopping", STOPPING_BACKEND, BACKEND_GROUP, "stopping")
    for env in ("TRUSTJUDGE_MODE_PLUGINS", "TRUSTJUDGE_BACKEND_PLUGINS", "TJ_EXIT_AT", "TJ_STOP_ON"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    counting = MockBackend("served38", keep_history=False)
    register_mock("served38", counting)
    try:
        yield counting
    finally:
        register_mock("served38", None)
        unregister_mode("exiting")
        for module in ("tj_exiting_mode", "tj_stopping"):
            sys.modules.pop(module, None)


def _post(client: TestClient, route: str, items: list[dict[str, Any]]) -> Any:
    with time_limit(30):  # a dead worker would leave the request waiting
        return client.post(route, json={"items": items})


@pytest.mark.parametrize(("how", "said"), [("exit", "called sys.exit(0)"), ("raise", "raised Stop: enough")])
def test_a_mode_plugin_that_exits_while_serving_answers_json_and_the_service_goes_on(
        plugins: MockBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, said: str) -> None:
    app = create_app("mock/served38", store_path=tmp_path / "srv.sqlite")
    with TestClient(app, raise_server_exceptions=False) as client:
        monkeypatch.setenv("TJ_EXIT_HOW", how)
        monkeypatch.setenv("TJ_EXIT_AT", "q3")
        stopped = _post(client, "/v1/exiting", ROWS)
        assert stopped.status_code == 500, stopped.text
        assert stopped.headers["content-type"].startswith("application/json")
        detail = stopped.json()["detail"]
        assert f"mode plug-in 'exiting' (tj_exiting_mode:MODE from tj-exiting-mode 1.0) {said} while judging" \
            in detail, detail
        asked = plugins.calls
        assert asked > 0
        # The service goes on: another route, then the same mode on other items.
        assert _post(client, "/v1/score", OTHER).status_code == 200
        assert _post(client, "/v1/exiting", OTHER).status_code == 200
        assert client.get("/healthz").status_code == 200
        # The plug-in fixed: the stopped request again asks nothing it had judged.
        monkeypatch.delenv("TJ_EXIT_AT")
        calls = plugins.calls
        again = _post(client, "/v1/exiting", ROWS)
        assert again.status_code == 200, again.text
        assert len(again.json()["records"]) == 12
        assert plugins.calls - calls == 12 - asked, "a judgment made before the stop was asked again"


def test_a_backend_plugin_that_stops_while_serving_answers_json_and_the_service_goes_on(
        plugins: MockBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"id": f"q{i}", "question": f"What is {i} + 1?",
             "responses": [{"id": "a", "text": "BOOM" if i == 3 else str(i + 1)}]} for i in range(6)]
    app = create_app("stopping/m", store_path=tmp_path / "srv.sqlite", batch_size=1)
    with TestClient(app, raise_server_exceptions=False) as client:
        backend = sys.modules["tj_stopping"]
        monkeypatch.setenv("TJ_STOP_ON", "BOOM")
        stopped = _post(client, "/v1/score", rows)
        assert stopped.status_code == 503, stopped.text  # before: the worker thread died, the request hung
        detail = stopped.json()["detail"]
        assert "backend stopping:m raised Stop: enough while judging item 'q3' (it comes from backend plugin " \
               "'stopping' (tj_stopping:build from tj-stopping 1.0))" in detail, detail
        asked = len(backend.CALLS)
        assert _post(client, "/v1/score", OTHER).status_code == 200
        monkeypatch.delenv("TJ_STOP_ON")
        again = _post(client, "/v1/score", rows)
        assert again.status_code == 200, again.text
        assert len(backend.CALLS) == asked + 1 + len(rows) - asked, "a judgment made before the stop was asked again"


def test_a_builtin_backends_own_base_exception_fails_its_request_and_the_service_goes_on(tmp_path: Path) -> None:
    """A built-in judge (here ``mock/``) whose call raises a ``BaseException`` of its own: the engine lets it pass
    (for a command, the process dying), but in the service it met the worker thread, which died with it, and that
    request and every later one waited for ever. Now the request gets a JSON 500 and the next ones are served."""

    class Dying(BaseException):
        pass

    state = {"die": True}

    def script(request: Any) -> list[float]:
        if state["die"] and "BOOM" in request.prompt:
            raise Dying("killed")
        return [1.0 / len(request.labels)] * len(request.labels)

    counting = MockBackend("dying46", script=script)
    register_mock("dying46", counting)
    rows = [{"id": "q0", "question": "1+1?", "responses": [{"id": "a", "text": "2"}, {"id": "b", "text": "BOOM"}]}]
    try:
        app = create_app("mock/dying46", store_path=tmp_path / "srv.sqlite", batch_size=1)
        with TestClient(app, raise_server_exceptions=False) as client:
            stopped = _post(client, "/v1/score", rows)
            assert stopped.status_code == 500 and stopped.headers["content-type"].startswith("application/json")
            assert "the judging stopped: Dying: killed" in stopped.json()["detail"], stopped.text
            assert _post(client, "/v1/score", OTHER).status_code == 200  # the worker lives
            state["die"] = False
            calls = counting.calls
            again = _post(client, "/v1/score", rows)
            assert again.status_code == 200 and len(again.json()["records"]) == 2, again.text
            assert counting.calls - calls == 1, "the judgment made before the stop was asked again"
    finally:
        register_mock("dying46", None)
