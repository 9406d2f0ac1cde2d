"""The HTTP API (``trustjudge serve``): a real uvicorn server on a loopback port, driven with httpx."""

from __future__ import annotations

import json
import math
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner
from fastapi import FastAPI
from fastapi.testclient import TestClient

from trustjudge import (
    BackendError,
    ConfigError,
    Judge,
    MockBackend,
    items_from_dicts,
    register_mock,
)
from trustjudge.cli._serve import serve as serve_command
from trustjudge.serve import create_app, openapi_json

from .conftest import small_items

OPENAPI = Path(__file__).resolve().parents[1] / "docs" / "openapi.json"
KEY = "test-key-0123456789"


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """Run ``app`` with uvicorn in a thread on a free loopback port; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, FastAPI]]:
    app = create_app("mock/hash", store_path=tmp_path_factory.mktemp("srv") / "store.sqlite")
    with serving(app) as url:
        yield url, app


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    app = create_app("mock/hash", store_path=tmp_path_factory.mktemp("keyed") / "store.sqlite",
                     api_keys=[KEY, "another-key"], max_body_bytes=20_000, max_items=5)
    with serving(app) as url:
        yield url


@pytest.fixture
def client(open_server: tuple[str, FastAPI]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=open_server[0], timeout=60) as c:
        yield c


def library_judge(tmp_path: Path, **options: Any) -> Judge:
    """The library on its own store: equal outputs prove the server adds nothing and drops nothing."""
    return Judge("mock/hash", store=tmp_path / "library.sqlite", **options)


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def ranked_items() -> list[dict[str, Any]]:
    systems = ["sys-x", "sys-y", "sys-z"]
    rows = small_items()
    for row in rows:
        for i, response in enumerate(row["responses"]):
            response["system"] = systems[i]
    return rows


# -- round trips ------------------------------------------------------------------------------------


def test_healthz(client: httpx.Client, open_server: tuple[str, FastAPI]) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "judge": "mock/hash"}  # no paths to an unauthenticated caller (F35)


@pytest.mark.parametrize("scale", [5, 100])
def test_score_equals_library(client: httpx.Client, tmp_path: Path, scale: int) -> None:
    r = client.post("/v1/score", json={"items": small_items(), "scale": scale})
    assert r.status_code == 200, r.text
    judge = library_judge(tmp_path, scale=scale)
    expected = [rec.to_dict() for rec in judge.score(items_from_dicts(small_items()))]
    judge.close()
    assert r.json()["records"] == as_json(expected)
    assert len(expected) == 5


def test_compare_equals_library(client: httpx.Client, tmp_path: Path) -> None:
    r = client.post("/v1/compare", json={"items": small_items(), "delta": 0.05})
    assert r.status_code == 200, r.text
    judge = library_judge(tmp_path, delta=0.05)
    expected = [rec.to_dict() for rec in judge.compare(items_from_dicts(small_items()))]
    judge.close()
    assert r.json()["records"] == as_json(expected)
    assert len(expected) == 4


def test_audit_equals_library(client: httpx.Client, tmp_path: Path) -> None:
    body = {"items": small_items(), "scales": [5, 100], "delta": 1.0, "ks": [3], "bootstrap": 30, "seed": 1}
    r = client.post("/v1/audit", json=body)
    assert r.status_code == 200, r.text
    judge = library_judge(tmp_path)
    run = judge.audit(items_from_dicts(small_items()), scales=[5, 100], delta=1.0, ks=[3], bootstrap=30, seed=1)
    judge.close()
    assert r.json() == as_json(run.report.to_dict())


def test_rank(client: httpx.Client, tmp_path: Path) -> None:
    ranking = pytest.importorskip("trustjudge.audit._ranking")
    r = client.post("/v1/rank", json={"items": ranked_items(), "bootstrap": 5, "scale": 10})
    assert r.status_code == 200, r.text
    items = items_from_dicts(ranked_items())
    judge = library_judge(tmp_path)
    compared = [rec.to_dict() for rec in judge.compare(items)]
    judge.close()
    judge = library_judge(tmp_path, scale=10)
    scored = [rec.to_dict() for rec in judge.score(items)]
    judge.close()
    expected = ranking.rank(compared, scored, bootstrap=5, score_scale=10).to_dict()
    assert r.json() == as_json(expected)
    assert {row["system"] for row in r.json()["systems"]} == {"sys-x", "sys-y", "sys-z"}


def test_rank_without_ranking_module_is_501(client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trustjudge.audit._ranking", None)  # makes the import fail
    r = client.post("/v1/rank", json={"items": ranked_items()})
    assert r.status_code == 501
    assert "ranking is not available" in r.json()["detail"]


# -- validation -------------------------------------------------------------------------------------


def test_bad_item_is_422_naming_index_and_field(client: httpx.Client) -> None:
    items = small_items() + small_items()
    for i, row in enumerate(items):
        row["id"] = f"q{i}"
    items[3]["responses"][1]["text"] = ["not", "text"]
    r = client.post("/v1/score", json={"items": items})
    assert r.status_code == 422
    assert r.json() == {"detail": [{
        "type": "invalid_item", "loc": ["body", "items", 3, "responses", 1, "text"],
        "msg": "must be a string, got list", "item": 3, "field": "responses[1].text"}]}


@pytest.mark.parametrize(("path", "items", "loc", "msg"), [
    ("/v1/compare", [{"id": "a", "question": "q", "responses": [{"text": "x"}]}],
     ["body", "items", 0, "responses"], "needs at least 2 responses"),
    ("/v1/score", [{"id": "a", "question": "q", "responses": [{"text": "x"}]}] * 2,
     ["body", "items", 1, "id"], "duplicate item id"),
    ("/v1/score", [{"id": "a", "responses": [{"text": "x"}]}], ["body", "items", 0, "question"], "is missing"),
    ("/v1/score", [], ["body", "items"], "at least one item"),
    ("/v1/score", {"id": "a"}, ["body", "items"], "must be a list"),
])
def test_more_item_problems(client: httpx.Client, path: str, items: Any, loc: list[Any], msg: str) -> None:
    r = client.post(path, json={"items": items})
    assert r.status_code == 422
    (problem,) = r.json()["detail"]
    assert problem["loc"] == loc and msg in problem["msg"]


def test_bad_option_uses_the_same_422_shape(client: httpx.Client) -> None:
    r = client.post("/v1/score", json={"items": small_items(), "scale": 7})
    assert r.status_code == 422
    (problem,) = r.json()["detail"]
    assert problem["loc"] == ["body", "scale"] and problem["item"] is None and set(problem) == {
        "type", "loc", "msg", "item", "field"}


# -- limits and keys --------------------------------------------------------------------------------


def test_limits(keyed_server: str) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=keyed_server, headers=auth, timeout=30) as c:
        big = {"items": [{"id": "q", "question": "q", "responses": [{"text": "x" * 30_000}]}]}
        assert c.post("/v1/score", json=big).status_code == 413  # Content-Length over the limit

        def chunks() -> Iterator[bytes]:  # chunked: no Content-Length, refused as it streams
            yield b'{"items": [{"id": "q", "question": "q", "responses": [{"text": "'
            for _ in range(30):
                yield b"x" * 1000
            yield b'"}]}]}'

        r = c.post("/v1/score", content=chunks(), headers={"Content-Type": "application/json"})
        assert r.status_code == 413 and "over the limit" in r.json()["detail"]
        many = [{"id": f"q{i}", "question": "q", "responses": [{"text": "x"}]} for i in range(6)]
        r = c.post("/v1/score", json={"items": many})
        assert r.status_code == 413 and "6 items" in r.json()["detail"]
        assert c.post("/v1/score", json={"items": many[:5]}).status_code == 200


def test_api_keys(keyed_server: str) -> None:
    body = {"items": small_items(), "scale": 5}
    with httpx.Client(base_url=keyed_server, timeout=30) as c:
        assert c.get("/healthz").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"},
                        {"Authorization": f"Basic {KEY}"}, {"Authorization": f"Bearer {KEY}x"}):
            r = c.post("/v1/score", json=body, headers=headers)
            assert r.status_code == 401, headers
            assert r.headers["www-authenticate"] == "Bearer"
        assert c.get("/openapi.json").status_code == 401
        assert c.post("/v1/score", json=body, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert c.post("/v1/score", json=body, headers={"X-API-Key": "another-key"}).status_code == 200


def test_cli_defaults_match_the_server() -> None:
    from trustjudge import serve as _server
    from trustjudge.cli import _serve as _cli_serve

    names = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_ITEMS", "DEFAULT_MAX_JUDGMENTS", "DEFAULT_MAX_PROMPT_BYTES",
             "DEFAULT_MAX_LABELS", "DEFAULT_BODY_TIMEOUT_S", "DEFAULT_REQUEST_DEADLINE_S", "DEFAULT_MAX_CONNECTIONS",
             "DEFAULT_MAX_PER_ADDRESS"]
    assert [getattr(_cli_serve, n) for n in names] == [getattr(_server, n) for n in names]


def test_refuses_public_address_without_key() -> None:
    result = CliRunner().invoke(serve_command, ["--host", "0.0.0.0", "--judge", "mock/hash"],
                                env={"TRUSTJUDGE_API_KEYS": ""})
    assert result.exit_code == 2
    assert "refusing to bind 0.0.0.0" in result.output and "API key" in result.output


def test_public_address_with_key_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.update(app=app, **kw))
    result = CliRunner().invoke(serve_command, ["--host", "0.0.0.0", "--judge", "mock/hash", "--port", "9999",
                                                "--store", str(tmp_path / "s.sqlite")],
                                env={"TRUSTJUDGE_API_KEYS": f" {KEY} ,"})
    assert result.exit_code == 0, result.output
    assert started["host"] == "0.0.0.0" and started["port"] == 9999
    with TestClient(started["app"]) as c:
        assert c.get("/v1/stats").status_code == 401
        assert c.get("/v1/stats", headers={"X-API-Key": KEY}).status_code == 200


# -- errors -----------------------------------------------------------------------------------------


class _Failing(MockBackend):
    def __init__(self, error: Exception) -> None:
        super().__init__("failing")
        self.error = error

    def format_prompt(self, system: str, user: str, assistant_prefix: str) -> str:
        raise self.error


@pytest.mark.parametrize(("error", "status"), [
    (ConfigError("bad template secret-detail"), 400),
    (BackendError("backend down secret-detail"), 503),
    (RuntimeError("secret-detail"), 500),
])
def test_errors_map_to_statuses(tmp_path: Path, error: Exception, status: int) -> None:
    register_mock("failing", _Failing(error))
    try:
        app = create_app("mock/failing", store_path=tmp_path / "s.sqlite")
        with TestClient(app, raise_server_exceptions=False) as c:
            r = c.post("/v1/score", json={"items": small_items()})
    finally:
        register_mock("failing", None)
    assert r.status_code == status
    body = r.json()
    assert isinstance(body["detail"], str)
    if status == 500:
        assert "secret-detail" not in r.text and "Traceback" not in r.text
    else:
        assert "secret-detail" in body["detail"]


# -- batching ---------------------------------------------------------------------------------------


def test_concurrent_requests_are_merged(tmp_path: Path) -> None:
    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite", batch_wait_s=0.3)
    clients = 8

    def items_of(n: int) -> list[dict[str, Any]]:  # the same ids in every request, different texts
        return [{"id": "q1", "question": f"Question {n}?",
                 "responses": [{"id": "a", "text": f"answer {n}"}, {"id": "b", "text": f"other {n}"}]}]

    results: dict[int, httpx.Response] = {}
    with serving(app) as url:
        barrier = threading.Barrier(clients)

        def post(n: int) -> None:
            with httpx.Client(base_url=url, timeout=60) as c:
                barrier.wait()
                results[n] = c.post("/v1/score", json={"items": items_of(n), "scale": 10})

        threads = [threading.Thread(target=post, args=(n,)) for n in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        with httpx.Client(base_url=url) as c:
            stats = c.get("/v1/stats").json()
    assert sorted(results) == list(range(clients))
    judge = library_judge(tmp_path, scale=10)
    for n, r in results.items():
        assert r.status_code == 200, r.text
        expected = [rec.to_dict() for rec in judge.score(items_from_dicts(items_of(n)))]
        assert r.json()["records"] == as_json(expected)
    judge.close()
    assert stats["requests"] == clients
    assert stats["engine_runs"] < clients
    assert stats["merged_requests"] >= 2
    assert app.state.worker.stats.engine_runs == stats["engine_runs"]


# -- schema -----------------------------------------------------------------------------------------


def test_openapi_is_up_to_date() -> None:
    current = openapi_json()
    committed = OPENAPI.read_text(encoding="utf-8") if OPENAPI.exists() else ""
    assert current == committed, (
        "docs/openapi.json is out of date with the API: regenerate it with "
        "`python -m trustjudge.serve --write-openapi docs/openapi.json` and commit it")
    paths = json.loads(current)["paths"]
    assert {"/healthz", "/v1/score", "/v1/compare", "/v1/audit", "/v1/rank", "/v1/stats"} <= set(paths)


# -- the real bundled judge -------------------------------------------------------------------------


@pytest.mark.model
def test_real_judge_scores(tmp_path: Path) -> None:
    app = create_app("hf/smollm2-135m", store_path=tmp_path / "s.sqlite")
    item = {"id": "t", "question": "What is 2 + 2?", "responses": [{"id": "a", "text": "4"}]}
    with serving(app) as url, httpx.Client(base_url=url, timeout=300) as c:
        r = c.post("/v1/score", json={"items": [item], "scale": 5})
    assert r.status_code == 200, r.text
    (record,) = r.json()["records"]
    assert record["judge"] == "hf/smollm2-135m" and record["unscored"] is None
    assert all(isinstance(v, float) and math.isfinite(v) for v in record["scores"].values())
    assert 1 <= record["scores"]["trustjudge"] <= 5
