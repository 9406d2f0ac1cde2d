"""What one service request may cost, and what slow or greedy clients can hold (``trustjudge serve``).

Each limit is tested with a request just over it (a clear 413/422/429/503 naming the limit, before any
judging) and one at it (served). Slow clients are real sockets on loopback.
"""

from __future__ import annotations

import json
import math
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import combinations
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner
from fastapi import FastAPI
from fastapi.testclient import TestClient

from trustjudge import MockBackend
from trustjudge.backends._mock import hashed_probs
from trustjudge.cli._serve import serve as serve_command
from trustjudge.serve import DEFAULT_MAX_PROMPT_BYTES, create_app, uvicorn_options

from .conftest import time_limit


def b(text: str) -> int:
    return len(text.encode("utf-8"))


QUESTION = "Quelle entrée ?"  # not ASCII: bytes, not characters, are counted
EVIDENCE = ["Passage one: the café opened in 1901.", "Passage two: it closed in 1950."]
TEXTS = ["It opened in 1901.", "Nineteen fifty-one.", "It never opened, façade only."]
CHECKS = ["Does it give a year?", "Is it grounded in the passages?"]
CRITERION = {"name": "accuracy", "description": "Matches the passages."}


def grounded_item(n: int = 3, **extra: Any) -> dict[str, Any]:
    return {"id": "q", "question": QUESTION, "evidence": EVIDENCE,
            "responses": [{"id": f"r{i}", "text": TEXTS[i]} for i in range(n)], **extra}


SHARED = b(QUESTION) + sum(map(b, EVIDENCE))  # quoted into every prompt of the item


def score_bytes() -> int:
    return sum(SHARED + b(t) for t in TEXTS)


def compare_bytes() -> int:
    return sum(2 * (SHARED + b(x) + b(y)) for x, y in combinations(TEXTS, 2))


def checklist_bytes() -> int:
    return sum(SHARED + b(t) + b(c) for t in TEXTS for c in CHECKS)


def criteria_bytes() -> int:
    criterion = f"{CRITERION['name']}: {CRITERION['description']}"  # how a criterion reads in the prompt
    return sum(SHARED + b(t) + b(criterion) for t in TEXTS)


CLAIMS = [["The café opened in 1901."], ["It closed in 1951.", "It is a café."], ["There was only a façade."]]


def claims_bytes() -> int:  # each given claim is verified against the whole evidence
    return sum(sum(map(b, EVIDENCE)) + b(c) for claims in CLAIMS for c in claims)


def extracted_claims_bytes() -> int:
    # an upper bound: each response's extraction (question and response), then 32 claims (max_claims) as
    # long together as the response, each verified against the whole evidence
    return sum(b(QUESTION) + b(t) + 32 * sum(map(b, EVIDENCE)) + b(t) for t in TEXTS)


def claims_item() -> dict[str, Any]:
    item = grounded_item()
    for response, claims in zip(item["responses"], CLAIMS):
        response["claims"] = claims
    return item


CASES: dict[str, tuple[str, dict[str, Any], Callable[[], int]]] = {
    "score": ("/v1/score", {"items": [grounded_item()], "scale": 5}, score_bytes),
    "compare": ("/v1/compare", {"items": [grounded_item()]}, compare_bytes),
    "checklist": ("/v1/checklist", {"items": [grounded_item(checklist=CHECKS)]}, checklist_bytes),
    "criteria": ("/v1/criteria", {"items": [grounded_item(criteria=[CRITERION])]}, criteria_bytes),
    "claims": ("/v1/claims", {"items": [claims_item()]}, claims_bytes),
    "extracted-claims": ("/v1/claims", {"items": [grounded_item()]}, extracted_claims_bytes),
    "audit": ("/v1/audit", {"items": [grounded_item()], "scales": [5], "ks": [3], "bootstrap": 0},
              lambda: score_bytes() + compare_bytes()),
}


def counting_mock(name: str = "counting") -> MockBackend:
    return MockBackend(name, keep_history=False)


# -- what one request may cost ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(CASES))
def test_prompt_bytes_over_the_limit_get_413_before_any_judging(tmp_path: Path, mode: str) -> None:
    path, body, expected = CASES[mode]
    quoted = expected()
    backend = counting_mock()
    over = create_app(backend, store_path=tmp_path / "s.sqlite", max_prompt_bytes=quoted - 1)
    with TestClient(over) as c:
        r = c.post(path, json=body)
    assert r.status_code == 413, r.text
    detail = r.json()["detail"]
    assert f"{quoted:,} prompt bytes" in detail and f"limit of {quoted - 1:,}" in detail
    assert "--max-request-prompt-bytes" in detail
    assert backend.calls == 0
    at = create_app(backend, store_path=tmp_path / "s.sqlite", max_prompt_bytes=quoted)
    with TestClient(at) as c:
        r = c.post(path, json=body)
    assert r.status_code == 200, r.text
    assert backend.calls > 0


def test_grounding_quoted_into_every_judgment_is_refused_at_once(tmp_path: Path) -> None:
    # The review's request: 7 passages of 0.9 MB and 300 tiny responses, one check each (6.3 MB of body,
    # 1.9 GB of prompts; it held the judge for 322 s and left 1.9 GB in the store).
    passages = [chr(ord("a") + i) * 900_000 for i in range(7)]
    item = {"id": "q", "question": "Q?", "evidence": passages, "checklist": ["Is it grounded?"],
            "responses": [{"id": f"r{i}", "text": f"answer {i}"} for i in range(300)]}
    backend = counting_mock()
    app = create_app(backend, store_path=tmp_path / "s.sqlite")
    began = time.monotonic()
    with time_limit(60), TestClient(app) as c:
        r = c.post("/v1/checklist", json={"items": [item]})
        assert r.status_code == 413, r.text
        assert f"limit of {DEFAULT_MAX_PROMPT_BYTES:,}" in r.json()["detail"]
        assert c.get("/v1/stats").json()["model_calls"] == 0
        assert backend.calls == 0 and app.state.judge.store.count() == 0
    assert time.monotonic() - began < 30


@pytest.mark.parametrize(("path", "body", "labels"), [
    ("/v1/score", {"items": [grounded_item()], "scale": 100}, 3 * 100),
    ("/v1/compare", {"items": [grounded_item()]}, 3 * 2 * 3),
    ("/v1/checklist", {"items": [grounded_item(checklist=CHECKS)], "labels": "A,B,C,D,E,F,G"}, 3 * 2 * 7),
])
def test_labels_over_the_limit_get_413_before_any_judging(tmp_path: Path, path: str, body: dict[str, Any],
                                                          labels: int) -> None:
    backend = counting_mock()
    with TestClient(create_app(backend, store_path=tmp_path / "s.sqlite", max_labels=labels - 1)) as c:
        r = c.post(path, json=body)
    assert r.status_code == 413, r.text
    detail = r.json()["detail"]
    assert f"{labels:,} labels" in detail and f"limit of {labels - 1:,}" in detail and "--max-request-labels" in detail
    assert backend.calls == 0
    with TestClient(create_app(backend, store_path=tmp_path / "s.sqlite", max_labels=labels)) as c:
        assert c.post(path, json=body).status_code == 200


def test_judgments_over_the_limit_get_413_naming_the_option(tmp_path: Path) -> None:
    many = [{"id": "q", "question": "Q", "responses": [{"text": f"r{i}"} for i in range(20)]}]  # 190 pairs
    with TestClient(create_app("mock/hash", store_path=tmp_path / "s.sqlite", max_judgments=379)) as c:
        r = c.post("/v1/compare", json={"items": many})
        assert r.status_code == 413 and "380 judgments" in r.json()["detail"]
        assert "limit of 379" in r.json()["detail"] and "--max-judgments" in r.json()["detail"]
    with TestClient(create_app("mock/hash", store_path=tmp_path / "s.sqlite", max_judgments=380)) as c:
        assert c.post("/v1/compare", json={"items": many}).status_code == 200


def test_serve_options_set_the_request_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.update(app=app, **kw))
    result = CliRunner().invoke(serve_command, [
        "--judge", "mock/hash", "--store", str(tmp_path / "s.sqlite"), "--max-request-prompt-bytes",
        str(score_bytes() - 1), "--max-request-labels", "1000", "--request-deadline", "2.5",
        "--max-requests-per-address", "3"], env={"TRUSTJUDGE_API_KEYS": ""})
    assert result.exit_code == 0, result.output
    assert "limit_concurrency" not in started  # uvicorn's cap counts connections still sending their head
    with TestClient(started["app"]) as c:
        r = c.post("/v1/score", json={"items": [grounded_item()], "scale": 5})
        assert r.status_code == 413 and "--max-request-prompt-bytes" in r.json()["detail"]
        r = c.post("/v1/score", json={"items": [grounded_item(2)], "scale": 5})
        assert r.status_code == 200, r.text


def test_bad_limits_are_a_config_error(tmp_path: Path) -> None:
    from trustjudge import ConfigError

    for option in ({"max_prompt_bytes": 0}, {"max_labels": 0}, {"request_deadline_s": 0.0},
                   {"max_requests_per_address": 0}, {"max_connections": 0}):
        with pytest.raises(ConfigError, match=next(iter(option))):
            create_app("mock/hash", store_path=tmp_path / "s.sqlite", preload=False, **option)  # type: ignore[arg-type]


# -- non-finite numbers -----------------------------------------------------------------------------


def raw_item(response: str = '{"id": "a", "text": "x"}, {"id": "b", "text": "y"}') -> str:
    return f'{{"id": "q", "question": "Q?", "responses": [{response}]}}'


def fill(template: str, item: str | None = None) -> str:
    """``template`` with ``ITEM`` replaced by ``item`` (default :func:`raw_item`): a raw JSON body, as
    json.dumps cannot write a bare NaN."""
    return template.replace("ITEM", raw_item() if item is None else item)


@pytest.mark.parametrize(("path", "body", "loc", "item", "field", "got"), [
    ("/v1/compare", fill('{"items": [ITEM], "delta": Infinity}'), ["body", "delta"], None, "delta", "Infinity"),
    ("/v1/compare", fill('{"items": [ITEM], "delta": NaN}'), ["body", "delta"], None, "delta", "NaN"),
    ("/v1/audit", fill('{"items": [ITEM], "delta": -Infinity}'), ["body", "delta"], None, "delta", "-Infinity"),
    ("/v1/compare", fill('{"items": [ITEM], "delta": 1e999}'), ["body", "delta"], None, "delta", "1e999"),
    ("/v1/score", fill('{"items": [ITEM]}', raw_item('{"id": "a", "text": "x", "human_score": NaN}')),
     ["body", "items", 0, "responses", 0, "human_score"], 0, "responses[0].human_score", "NaN"),
    ("/v1/score", fill('{"items": [ITEM]}', raw_item('{"id": "a", "text": "x"}, {"id": "b", "text": "y", '
                                                    '"human_score": 1' + "0" * 400 + '}')),
     ["body", "items", 0, "responses", 1, "human_score"], 0, "responses[1].human_score",
     "1" + "0" * 39 + "... (401 characters)"),
    ("/v1/criteria", fill('{"items": [ITEM], "criteria": [{"name": "c", "description": "d", "weight": Infinity}]}'),
     ["body", "criteria", 0, "weight"], None, "criteria[0].weight", "Infinity"),
])
def test_non_finite_numbers_get_422_naming_the_field(tmp_path: Path, path: str, body: str, loc: list[Any],
                                                     item: int | None, field: str, got: str) -> None:
    backend = counting_mock()
    with TestClient(create_app(backend, store_path=tmp_path / "s.sqlite")) as c:
        r = c.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem == {"type": "non_finite_number", "loc": loc, "msg": f"must be a finite number, got {got}",
                       "item": item, "field": field}
    assert backend.calls == 0


def test_finite_numbers_and_texts_that_name_nan_are_served(tmp_path: Path) -> None:
    body = fill('{"items": [ITEM], "delta": 1e308}', raw_item('{"id": "a", "text": "NaN, Infinity and 1e999"}, '
                                                           '{"id": "b", "text": "y", "human_score": 1E+2}'))
    with TestClient(create_app("mock/hash", store_path=tmp_path / "s.sqlite")) as c:
        r = c.post("/v1/compare", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert json.loads(body)["delta"] == 1e308


# -- slow and greedy clients (real sockets on loopback) -----------------------------------------------


@contextmanager
def serving_as_cli(app: FastAPI, timeout_s: float) -> Iterator[int]:
    """Run ``app`` with the uvicorn options ``trustjudge serve`` uses; yield its port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    options = uvicorn_options(timeout_s=timeout_s)
    options.pop("workers")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(20)
    s.bind((source, 0))  # any 127.x.y.z is this machine: other source addresses on loopback
    s.connect(("127.0.0.1", port))
    return s


def hold_request(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A request in progress: its head sent, its body only begun."""
    s = connect(port, source)
    s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000\r\n\r\n{\"items\": ")
    return s


def status_of(port: int, method: str, path: str, source: str = "127.0.0.1",
              body: dict[str, Any] | None = None) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else b""
    with connect(port, source) as s:
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    head, _, rest = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split()[1]), rest.decode(errors="replace")


SMALL = {"items": [{"id": "q", "question": "2+2?", "responses": [{"id": "a", "text": "4"}]}], "scale": 5}


def test_clients_stuck_in_their_request_head_do_not_make_healthz_or_requests_fail(tmp_path: Path) -> None:
    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite", max_connections=4)
    with time_limit(90), serving_as_cli(app, timeout_s=20) as port:
        stuck = [connect(port) for _ in range(16)]  # 4x the cap, each mid-head
        try:
            for s in stuck:
                s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\n")
            time.sleep(0.3)
            statuses = [status_of(port, "GET", "/healthz")[0] for _ in range(20)]
            statuses += [status_of(port, "POST", "/v1/score", body=SMALL)[0] for _ in range(5)]
        finally:
            for s in stuck:
                s.close()
    assert statuses == [200] * 25


def test_a_trickled_body_gets_408_at_the_request_deadline(tmp_path: Path) -> None:
    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite", body_timeout_s=3.0, request_deadline_s=1.5)
    with time_limit(60), serving_as_cli(app, timeout_s=5) as port, connect(port) as s:
        s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 200\r\n\r\n")
        began = time.monotonic()
        answer = b""
        took = math.inf
        try:
            for _ in range(200):  # one byte every 0.25 s: never silent for the 3 s idle timeout
                if select.select([s], [], [], 0.25)[0]:
                    took = time.monotonic() - began
                    break
                s.sendall(b" ")
            while chunk := s.recv(65536):  # the answer closes the connection
                answer += chunk
        except (BrokenPipeError, ConnectionResetError):
            pass  # a byte of ours crossed the server's close: what it sent before is in `answer`
    assert answer.startswith(b"HTTP/1.1 408") and b"--request-deadline" in answer, (took, answer[:300])
    assert 1.4 < took < 5, (took, answer[:300])


def test_requests_in_progress_are_limited_per_address_and_in_all(tmp_path: Path) -> None:
    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite", max_connections=3, max_requests_per_address=2)
    with time_limit(90), serving_as_cli(app, timeout_s=20) as port:
        load = app.state.in_progress

        def wait_for(active: int) -> None:  # until the server has the held requests' heads
            deadline = time.monotonic() + 20
            while load.active != active and time.monotonic() < deadline:
                time.sleep(0.02)
            assert load.active == active

        held = [hold_request(port), hold_request(port)]
        try:
            wait_for(2)
            status, text = status_of(port, "POST", "/v1/score", body=SMALL)
            assert status == 429 and "(--max-requests-per-address) is 2" in text
            assert status_of(port, "POST", "/v1/score", "127.0.0.2", SMALL)[0] == 200  # another address is served
            held.append(hold_request(port, "127.0.0.2"))
            wait_for(3)
            status, text = status_of(port, "POST", "/v1/score", "127.0.0.3", SMALL)
            assert status == 503 and "--max-connections" in text and "is 3" in text
            assert status_of(port, "GET", "/healthz", "127.0.0.3")[0] == 200  # liveness is never refused for load
        finally:
            for s in held:
                s.close()
        wait_for(0)  # the server frees the slots when it sees the clients go
        assert load.by_address == {}
        assert status_of(port, "POST", "/v1/score", body=SMALL)[0] == 200


# -- a small request is not held behind a long one -----------------------------------------------------


def slow_mock(delay_s: float) -> MockBackend:
    def script(request: Any) -> list[float]:
        time.sleep(delay_s)
        return hashed_probs(request)

    return MockBackend("slow", script=script, keep_history=False)


def many(items: int, responses: int) -> list[dict[str, Any]]:
    return [{"id": f"q{i}", "question": f"Question {i}?",
             "responses": [{"id": f"r{j}", "text": f"answer {i}.{j}"} for j in range(responses)]} for i in range(items)]


BIG: dict[str, tuple[str, dict[str, Any]]] = {
    "score": ("/v1/score", {"scale": 10, "items": many(60, 10)}),
    "audit": ("/v1/audit", {"scales": [5], "ks": [3], "bootstrap": 0, "items": many(40, 4)}),
    # one item far larger than a chunk: taken in parts (responses, or pairs, at a time)
    "one-item-score": ("/v1/score", {"scale": 10, "items": many(1, 600)}),
    "one-item-compare": ("/v1/compare", {"items": many(1, 30)}),  # 435 pairs, 870 judgments
}


def served_alone(tmp_path: Path, path: str, body: dict[str, Any]) -> Any:
    """What the library gives for ``body`` (the same mock, no delay): taking turns changes no number."""
    from trustjudge import Judge, items_from_dicts

    items = items_from_dicts(body["items"])
    with Judge(MockBackend("slow", keep_history=False), store=tmp_path / "alone.sqlite",
               scale=body.get("scale", 10)) as judge:
        if path == "/v1/audit":
            return judge.audit(items, scales=body["scales"], ks=body["ks"], bootstrap=0).report.to_dict()
        records = judge.score(items) if path == "/v1/score" else judge.compare(items)
        return {"records": [r.to_dict() for r in records]}


@pytest.mark.parametrize("big", list(BIG))
def test_a_one_item_score_is_not_held_behind_a_long_request(tmp_path: Path, big: str) -> None:
    from .test_server import serving

    backend = slow_mock(0.002)
    app = create_app(backend, store_path=tmp_path / "s.sqlite", chunk_size=32)
    path, body = BIG[big]
    done: dict[str, float] = {}
    answers: dict[str, httpx.Response] = {}
    with time_limit(120), serving(app) as url:

        def post(name: str, path: str, body: dict[str, Any]) -> None:
            with httpx.Client(base_url=url, timeout=120) as c:
                answers[name] = c.post(path, json=body)
            done[name] = time.monotonic()

        long = threading.Thread(target=post, args=("big", path, body))
        began = time.monotonic()
        long.start()
        while backend.calls == 0:  # the long request is being judged
            time.sleep(0.01)
        asked = time.monotonic()
        post("small", "/v1/score", SMALL)
        long.join(120)
    assert answers["small"].status_code == 200 and answers["big"].status_code == 200, answers
    assert answers["big"].json() == json.loads(json.dumps(served_alone(tmp_path, path, body)))
    assert done["small"] < done["big"]
    waited, whole = done["small"] - asked, done["big"] - began
    assert waited < whole / 2, (waited, whole)
    record = answers["small"].json()["records"][0]
    assert record["item_id"] == "q" and math.isfinite(record["scores"]["trustjudge"])


# -- the real bundled judge ---------------------------------------------------------------------------


@pytest.mark.model
def test_the_real_judge_serves_a_request_at_the_limits_and_refuses_one_just_over(tmp_path: Path) -> None:
    import importlib.util

    from .test_server import serving

    judge = "llamacpp/smollm2-135m" if importlib.util.find_spec("llama_cpp") else "hf/smollm2-135m"
    app = create_app(judge, store_path=tmp_path / "s.sqlite", max_prompt_bytes=score_bytes(), max_labels=3 * 5)
    over = grounded_item()
    over["responses"][0]["text"] += "!"  # one byte more
    with time_limit(600), serving(app) as url, httpx.Client(base_url=url, timeout=300) as c:
        r = c.post("/v1/score", json={"items": [over], "scale": 5})
        assert r.status_code == 413 and f"{score_bytes() + 1:,} prompt bytes" in r.json()["detail"]
        r = c.post("/v1/score", json={"items": [grounded_item()], "scale": 10})  # 30 labels: over
        assert r.status_code == 413 and "--max-request-labels" in r.json()["detail"]
        assert c.get("/v1/stats").json()["model_calls"] == 0
        r = c.post("/v1/score", json={"items": [grounded_item()], "scale": 5})
    assert r.status_code == 200, r.text
    records = r.json()["records"]
    assert [rec["response_id"] for rec in records] == ["r0", "r1", "r2"]
    assert all(rec["unscored"] is None and 1 <= rec["scores"]["trustjudge"] <= 5 for rec in records)


@pytest.mark.parametrize("kind", ["score", "compare", "criteria", "checklist", "criteria-compare"])
def test_an_item_taken_in_parts_gives_the_items_records_and_cost(tmp_path: Path, kind: str) -> None:
    from trustjudge import Judge, items_from_dicts
    from trustjudge.modes._base import Cost

    row = grounded_item(3, checklist=CHECKS, criteria=[CRITERION, {"name": "brevity", "description": "Short."}])
    row["responses"] += [{"id": f"x{i}", "text": f"more {i}", "checklist": ["Own check?"] * (i % 2)}
                         for i in range(5)]
    (item,) = items_from_dicts([row])
    with Judge("mock/hash", store=tmp_path / "s.sqlite") as judge:
        task = {"score": judge.score_task(10), "compare": judge.compare_task(), "criteria": judge.criteria_task(),
                "checklist": judge.checklist_task(), "criteria-compare": judge.criteria_compare_task()}[kind]
        parts = task.parts(item, 5)
        assert len(parts) > 1 and task.parts(item, task.size(item)) == [item]
        assert sum((task.cost(p) for p in parts), Cost()) == task.cost(item)
        whole = [r.to_dict() for r in judge.run(task, [item])]
        assert [r.to_dict() for r in judge.run(task, parts)] == whole


@pytest.mark.model
def test_with_the_real_judge_a_one_item_score_is_not_held_behind_a_long_score(tmp_path: Path) -> None:
    import importlib.util

    from .test_server import serving

    judge = "llamacpp/smollm2-135m" if importlib.util.find_spec("llama_cpp") else "hf/smollm2-135m"
    app = create_app(judge, store_path=tmp_path / "s.sqlite", chunk_size=4)
    engine = lambda: app.state.judge._engine  # noqa: E731 - made by the worker on its first chunk
    done: dict[str, float] = {}
    answers: dict[str, httpx.Response] = {}
    with time_limit(600), serving(app) as url:

        def post(name: str, body: dict[str, Any]) -> None:
            with httpx.Client(base_url=url, timeout=600) as c:
                answers[name] = c.post("/v1/score", json=body)
            done[name] = time.monotonic()

        long = threading.Thread(target=post, args=("big", {"scale": 5, "items": many(8, 4)}))  # 32 judgments
        began = time.monotonic()
        long.start()
        while engine() is None or engine().stats.model_calls == 0:
            time.sleep(0.01)
        asked = time.monotonic()
        post("small", SMALL)
        long.join(600)
    assert answers["small"].status_code == 200 and answers["big"].status_code == 200
    assert done["small"] < done["big"]
    waited, whole = done["small"] - asked, done["big"] - began
    print(f"one-item score answered in {waited:.2f} s behind a long score of {whole:.2f} s")
    assert waited < whole / 2
    assert 1 <= answers["small"].json()["records"][0]["scores"]["trustjudge"] <= 5
