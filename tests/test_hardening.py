"""Findings of the adversarial review (issue 15): each test failed before its fix.

The command line runs in-process through ``trustjudge.cli.main`` (its error handling included) on the
``mock/hash`` judge or a scripted mock, so these tests need no model.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trustjudge import MockBackend, Store, register_mock
from trustjudge.errors import BackendError, StoreError

from .conftest import run_cli, small_items, time_limit, write_jsonl


def main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """Run the CLI's entry point in-process; return (exit status, stdout, stderr)."""
    return run_cli(capsys, *args)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def failing_mock() -> Iterator[MockBackend]:
    def fail(request: Any) -> list[float]:
        raise BackendError("the judge server said no")

    backend = MockBackend("failing", script=fail)
    register_mock("failing", backend)
    try:
        yield backend
    finally:
        register_mock("failing", None)


# -- F1, F2: an output can never overwrite an input or the store -----------------------------------------


def test_f1_out_naming_the_input_is_refused(tmp_path: Path, items_file: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    before = items_file.read_bytes()
    code, _, err = main(capsys, "score", items_file, "-j", "mock/hash", "--store", tmp_path / "s.sqlite",
                        "--out", items_file)
    assert code == 2 and "would overwrite the input" in err
    assert items_file.read_bytes() == before
    # through another spelling of the same file, and a symlink
    link = tmp_path / "link.jsonl"
    link.symlink_to(items_file)
    code, _, err = main(capsys, "compare", items_file, "-j", "mock/hash", "--store", tmp_path / "s.sqlite",
                        "--out", tmp_path / "." / "link.jsonl")
    assert code == 2 and "would overwrite the input" in err
    assert items_file.read_bytes() == before


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_f2_out_naming_the_store_is_refused(tmp_path: Path, items_file: Path, suffix: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    code, _, err = main(capsys, "score", items_file, "-j", "mock/hash", "--store", store, "-q",
                        "--out", tmp_path / "first.jsonl")
    assert code == 0, err
    target = Path(f"{store}{suffix}")
    code, _, err = main(capsys, "score", items_file, "-j", "mock/hash", "--store", store, "-q",
                        "--scale", "5", "--out", target)
    assert code == 2 and "would overwrite the judgment store" in err
    with Store(store) as s:
        assert s.count() == 5 and s.integrity_check() == "ok"


def test_f2_json_and_html_outputs_are_guarded_too(tmp_path: Path, items_file: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    before = items_file.read_bytes()
    for args in (["audit", items_file, "--json", items_file], ["rank", items_file, "--json", store],
                 ["audit", items_file, "--out", tmp_path / "x.jsonl", "--json", tmp_path / "x.jsonl"],
                 ["report", items_file, "--html", items_file]):
        code, _, err = main(capsys, *args, "-j", "mock/hash", "--store", store, "-q")
        assert code == 2 and "would overwrite" in err, (args, err)
    assert items_file.read_bytes() == before
    assert not store.exists() or Store(store).count() == 0


def test_f2_a_failed_run_leaves_the_previous_output_as_it_was(tmp_path: Path, items_file: Path,
                                                              failing_mock: MockBackend,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scores.jsonl"
    out.write_text("previous results\n")

    class Boom(BaseException):  # the process dying (a backend's own exception is an unscored judgment)
        pass

    def explode(request: Any) -> list[float]:
        raise Boom("killed half way")

    failing_mock.script = explode
    with pytest.raises(Boom):
        main(capsys, "score", items_file, "-j", "mock/failing", "--store", tmp_path / "s.sqlite", "--out", out)
    assert out.read_text() == "previous results\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".scores")] == []


# -- F3: the input is read once (or a change is detected) ----------------------------------------------


def test_f3_an_input_edited_during_the_run_is_not_silently_dropped(tmp_path: Path, items_file: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from trustjudge import cli

    real = cli._make_judge

    def edit_then_make(*args: Any, **kwargs: Any) -> Any:
        # The file was validated; now a line becomes invalid before the judging reads it.
        text = items_file.read_text().splitlines()
        text[1] = text[1].replace('"question"', '"questio"')
        items_file.write_text("\n".join(text) + "\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(cli, "_make_judge", edit_then_make)
    out = tmp_path / "o.jsonl"
    code, _, err = main(capsys, "score", items_file, "-j", "mock/hash", "--store", tmp_path / "s.sqlite",
                        "-q", "--out", out)
    if code == 0:  # read once: every item of the validated file is judged
        assert len(lines(out)) == 5
    else:
        assert "changed" in err and not out.exists()


# -- F8: a store from a newer trustjudge is refused --------------------------------------------------------


def test_f8_a_store_with_an_unknown_migration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("INSERT INTO _migrations VALUES ('m999_from_the_future', 0)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="m999_from_the_future"):
        Store(path)


def test_f8_inserts_name_their_columns(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)  # a column added by a later (known) migration must not shift the values
    db.execute("ALTER TABLE outputs ADD COLUMN note TEXT")
    db.commit()
    db.close()
    with Store(path) as s:
        s.put_many([("k", "labels", "b", {"r": 1}, {"logprobs": [0.0]}, 3, 0, 0.1)])
        assert s.get_many(["k"])["k"].prompt_tokens == 3


# -- F12: a dead judge server fails fast; a run where every judgment failed exits non-zero ---------------


def test_f12_every_judgment_failed_exits_non_zero_with_the_cause(tmp_path: Path, items_file: Path,
                                                                 failing_mock: MockBackend,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = main(capsys, "score", items_file, "-j", "mock/failing", "--store", tmp_path / "s.sqlite",
                        "--out", tmp_path / "o.jsonl")
    assert code != 0
    assert "the judge server said no" in err


def _closed_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


def test_f12_connection_refused_fails_fast(tmp_path: Path, items_file: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("httpx")
    began = time.monotonic()
    with time_limit(30):
        code, _, err = main(capsys, "score", items_file, "-j", f"http/judge@http://127.0.0.1:{_closed_port()}",
                            "--store", tmp_path / "s.sqlite", "--out", tmp_path / "o.jsonl")
    assert code != 0 and "refused" in err.lower()
    assert time.monotonic() - began < 10
    assert "Traceback" not in err


@pytest.mark.parametrize("status", [401, 404])
def test_f12_auth_and_not_found_fail_fast_with_the_servers_message(tmp_path: Path, status: int) -> None:
    httpx = pytest.importorskip("httpx")
    from trustjudge import Judge, items_from_dicts
    from trustjudge.backends._openai import OpenAICompatibleBackend

    calls: list[str] = []

    def handler(request: Any) -> Any:
        calls.append(request.url.path)
        return httpx.Response(status, json={"error": {"message": f"server says {status}"}})

    backend = OpenAICompatibleBackend("m", "http://judge.invalid", labels="exact", context_length=4096,
                                      transport=httpx.MockTransport(handler))
    judge = Judge(backend, store=tmp_path / "s.sqlite", scale=5, retry_base_s=0.0)
    try:
        with time_limit(30), pytest.raises(BackendError, match=f"server says {status}"):
            list(judge.score(items_from_dicts(small_items())))
    finally:
        judge.close()
    assert len([c for c in calls if c.endswith("/completions")]) <= 2


# -- input files: F4, F5, F6, F32 (CSV); F13, F14, F15, F25, F31, F33 (JSON); F37 (pairs) -----------------


def _values(path: Path, **kwargs: Any) -> list[Any]:
    from trustjudge import iter_items

    return list(iter_items(path, **kwargs))


def _errors(values: list[Any]) -> list[str]:
    from trustjudge import InputError

    return [str(v) for v in values if isinstance(v, InputError)]


def test_f4_csv_unterminated_quote_is_an_error_not_one_huge_response(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_text('id,question,response\nq1,Q?,"fine"\nq2,Q?,"never closed\nq3,Q?,x\nq4,Q?,y\n')
    values = _values(path)
    errors = _errors(values)
    assert len(errors) == 1 and f"{path}:3:" in errors[0] and "never closed" in errors[0]
    assert [v.id for v in values if not isinstance(v, Exception)] == ["q1"]


def test_f5_csv_invalid_utf8_fails_only_its_record(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_bytes(b"id,question,response\nq1,Q?,good\nq2,Q?,bad \xff byte\nq3,Q?,good too\n")
    values = _values(path)
    errors = _errors(values)
    assert len(errors) == 1 and f"{path}:3: field 'response': invalid UTF-8" in errors[0]
    assert [v.id for v in values if not isinstance(v, Exception)] == ["q1", "q3"]


def test_f6_csv_rows_of_one_id_with_different_questions_are_an_error(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_text("id,question,response_id,response\nq1,First?,a,x\nq1,Second?,b,y\n")
    errors = _errors(_values(path))
    assert len(errors) == 1 and f"{path}:3: field 'question'" in errors[0]


def test_f32_csv_errors_name_the_records_first_line(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_text('question,response_a,response_b,label\n"Q?","multi\nline\nanswer",b,X\n')
    errors = _errors(_values(path))
    assert len(errors) == 1 and errors[0].startswith(f"{path}:2: field 'label'")


def test_f16_csv_field_over_the_csv_modules_limit_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    path.write_text(f"id,question,response\nq1,Q?,{'x' * 200_000}\nq2,Q?,{'y' * 1_100_000}\n")
    values = _values(path)
    assert [v.id for v in values if not isinstance(v, Exception)] == ["q1"]
    errors = _errors(values)
    assert len(errors) == 1 and f"{path}:3:" in errors[0]


@pytest.mark.parametrize(("line", "expect"), [
    ('{"id": "q", "question": "\\ud800", "responses": [{"text": "a"}]}', "field 'question': contains a lone surrogate"),
    ('{"id": "q", "question": "Q", "responses": [{"text": "\\udfff"}]}', "field 'responses[0].text': contains a lone"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"id": "q", "question": "Q", "responses": [{"text": "a", "human_score": ' + "9" * 5000 + "}]}",
     "invalid JSON"),
    ('{"id": "q", "question": "Q", "responses": [{"text": "a", "human_score": NaN}]}', "NaN is not a valid"),
    ('{"id": "q", "id": "r", "question": "Q", "responses": [{"text": "a"}]}', "duplicate key 'id'"),
    ('{"id": "q", "question": "Q", "response_a": "x", "response_b": "y", "responses": [{"text": "a"}]}',
     "field 'responses': cannot be combined"),
    ('{"id": "q", "question": "Q", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}], "pairs": []}',
     "field 'pairs': must hold at least one pair"),
    ('{"id": "q", "question": "Q", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}], '
     '"pairs": [{"first": "a", "second": "b"}, {"first": "b", "second": "a"}]}', "field 'pairs[1].first': repeats"),
])
def test_bad_json_lines_name_file_line_and_field(tmp_path: Path, line: str, expect: str) -> None:
    # F13 deep nesting, F14 long integers, F15 lone surrogates, F31 NaN and duplicate keys, F37 pairs
    path = tmp_path / "items.jsonl"
    path.write_text('{"id": "ok", "question": "Q", "responses": [{"text": "a"}]}\n' + line + "\n")
    errors = _errors(_values(path))
    assert len(errors) == 1 and errors[0].startswith(f"{path}:2: ") and expect in errors[0], errors


def test_f15_lone_surrogate_on_the_command_line_is_a_clear_error(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text('{"id": "q\\ud800", "question": "Q", "responses": [{"text": "a"}]}\n')
    code, _, err = main(capsys, "score", path, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "-q")
    assert code == 2 and f"{path}:1: field 'id'" in err and "Traceback" not in err


def test_f25_jsonl_with_a_bom_is_read(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(small_items()[0]).encode() + b"\n")
    values = _values(path)
    assert _errors(values) == [] and len(values) == 1


def test_f33_jsonl_whose_first_line_is_an_array_is_read_as_lines(tmp_path: Path) -> None:
    from trustjudge.io._adapters import iter_dataset

    for name in ("items.jsonl", "items.txt"):
        path = tmp_path / name
        path.write_text('["not", "an", "item"]\n' + json.dumps(small_items()[0]) + "\n")
        values = list(iter_dataset(path))
        assert len(values) == 2 and f"{path}:1: " in _errors(values)[0]


# -- the service: F9, F10, F35, F36 ---------------------------------------------------------------------


def test_f9_one_bad_request_does_not_fail_the_requests_merged_with_it(tmp_path: Path) -> None:
    import asyncio

    from trustjudge import Judge, items_from_dicts
    from trustjudge.serve import JudgeWorker

    def script(request: Any) -> list[float]:
        if "poison" in request.prompt:
            raise RuntimeError("this prompt breaks the backend")
        return [0.5] * len(request.labels)

    judge = Judge(MockBackend("poison", script=script), store=tmp_path / "s.sqlite", scale=5)
    worker = JudgeWorker(judge, batch_wait_s=0.3)
    good = items_from_dicts([{"id": "g", "question": "Q", "responses": [{"text": "fine"}]}])
    bad = items_from_dicts([{"id": "b", "question": "Q", "responses": [{"text": "poison"}]}])

    async def both() -> list[Any]:
        task = judge.score_task(5, "direct")
        return await asyncio.gather(worker.submit(task, good), worker.submit(task, bad), return_exceptions=True)

    try:
        with time_limit(30):
            ok, failed = asyncio.run(both())
    finally:
        worker.stop(10)
        judge.close()
    # The backend's error is the poisoned judgment's alone: unscored, named (issue 23: no traceback).
    assert isinstance(failed, list) and failed[0]["unscored"] == "backend_error"
    assert isinstance(ok, list) and ok[0]["item_id"] == "g" and ok[0]["unscored"] is None


def test_f9_lone_surrogates_are_refused_with_422(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from trustjudge.serve import create_app

    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite")
    body = '{"items": [{"id": "q", "question": "Q", "responses": [{"text": "a\\ud800"}]}], "scale": 5}'
    with TestClient(app) as c:
        r = c.post("/v1/score", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["field"] == "responses[0].text"


def test_f10_judgments_per_request_are_limited(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from trustjudge.serve import create_app

    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite", max_judgments=100)
    many = [{"id": "q", "question": "Q", "responses": [{"text": f"r{i}"} for i in range(20)]}]  # 190 pairs
    with TestClient(app) as c:
        r = c.post("/v1/compare", json={"items": many})
        assert r.status_code == 413 and "380 judgments" in r.json()["detail"]
        assert c.post("/v1/score", json={"items": many}).status_code == 200
        assert c.post("/v1/audit", json={"items": many, "scales": [5]}).status_code == 413


def test_f35_healthz_does_not_reveal_the_store_path(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from trustjudge.serve import create_app

    app = create_app("mock/hash", store_path=tmp_path / "secret-folder" / "s.sqlite", api_keys=["k" * 20])
    with TestClient(app) as c:
        r = c.get("/healthz")
        assert r.status_code == 200 and "secret-folder" not in r.text


def _raw_request(url: str, data: bytes, *, read_after_s: float | None = None) -> bytes:
    import socket
    from urllib.parse import urlparse

    u = urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=20) as sock:
        sock.sendall(data)
        if read_after_s is not None:
            time.sleep(read_after_s)
        chunks = []
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if b"\r\n\r\n" in b"".join(chunks) and b"}" in chunk:
                    break
        except ConnectionResetError:
            return b"RESET:" + b"".join(chunks)
    return b"".join(chunks)


def test_f36_oversized_body_gets_413_not_a_reset_and_slow_bodies_time_out(tmp_path: Path) -> None:
    from trustjudge.serve import create_app

    from .test_server import serving

    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite", max_body_bytes=1000, body_timeout_s=1.0)
    with time_limit(90), serving(app) as url:
        body = b"x" * 200_000
        head = (f"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        answer = _raw_request(url, head + body, read_after_s=0.5)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        slow = _raw_request(url, b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: 100\r\n\r\n{")
        assert slow.startswith(b"HTTP/1.1 408"), slow[:200]


# -- records say how each number was obtained ---------------------------------------------------------


class TopKMock(MockBackend):
    """A mock whose labels come 'from the top-k', as an HTTP judge without exact echo reports them."""

    def label_logprobs(self, requests: Any) -> Any:
        from dataclasses import replace

        return [replace(r, method="top_k") for r in super().label_logprobs(requests)]


def test_records_carry_their_method_and_top_k_warns_once(tmp_path: Path, items_file: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    register_mock("topk", TopKMock("topk"))
    try:
        out = tmp_path / "o.jsonl"
        code, _, err = main(capsys, "score", items_file, "-j", "mock/topk", "--store", tmp_path / "s.sqlite",
                            "--out", out, "--scale", "5")
        assert code == 0, err
        assert [r["label_method"] for r in lines(out)] == ["top_k"] * 5
        assert err.count("top-k log-probabilities") == 1 and "labels read: top_k 5" in err
        code, _, err = main(capsys, "compare", items_file, "-j", "mock/topk", "--store", tmp_path / "s.sqlite",
                            "--out", out, "-q")
        assert code == 0 and err.count("top-k log-probabilities") == 1
        assert {r["label_method"] for r in lines(out)} == {"top_k"}
        assert {o["label_method"] for r in lines(out) for o in r["orders"]} == {"top_k"}
    finally:
        register_mock("topk", None)
    code, _, err = main(capsys, "score", items_file, "-j", "mock/hash", "--store", tmp_path / "s.sqlite",
                        "--out", out)
    assert code == 0 and {r["label_method"] for r in lines(out)} == {"exact"} and "top-k" not in err
    assert "labels read: exact 5" in err


# -- tracebacks that reached the user: F17-F23 ---------------------------------------------------------


def test_f17_a_store_folder_that_cannot_be_created(tmp_path: Path, items_file: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = main(capsys, "score", items_file, "-j", "mock/hash", "--store", blocker / "s.sqlite", "-q")
    assert code == 2 and "cannot create the judgment store's folder" in err and "Traceback" not in err


def test_f18_a_damaged_or_half_migrated_store_is_a_clear_error(tmp_path: Path, items_file: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    assert main(capsys, "score", items_file, "-j", "mock/hash", "--store", store, "-q")[0] == 0
    db = sqlite3.connect(store)
    db.execute("DROP TABLE claims")  # half-migrated: the migration is recorded, its table is gone
    db.commit()
    db.close()
    code, _, err = main(capsys, "score", items_file, "-j", "mock/hash", "--store", store, "-q", "--scale", "5")
    assert code == 2 and "damaged or half-migrated" in err and "no such table: claims" in err


def test_f19_a_full_disk_is_named_and_the_store_works_once_space_is_back(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as s:
        pages = s._db.execute("PRAGMA page_count").fetchone()[0]
        s._db.execute(f"PRAGMA max_page_count = {pages}")  # what a full disk looks like to SQLite
        rows = [(f"k{i}", "labels", "b", {"r": i}, {"logprobs": [0.0] * 100}, 3, 0, 0.1) for i in range(200)]
        with pytest.raises(StoreError, match="disk is full"):
            s.put_many(rows)
        s._db.execute("PRAGMA max_page_count = 1000000")
        s.put_many(rows)
        assert s.count() == 200


def test_f19_the_service_answers_503_when_the_store_is_full(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from trustjudge.serve import create_app

    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite")
    store = app.state.judge.store
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    many = [{"id": f"q{i}", "question": "Q" * 500, "responses": [{"text": f"r{i}" * 200}]} for i in range(50)]
    with TestClient(app) as c:
        r = c.post("/v1/score", json={"items": many, "scale": 100})
        assert r.status_code == 503 and "disk is full" in r.json()["detail"]
        store._db.execute("PRAGMA max_page_count = 1000000")
        assert c.post("/v1/score", json={"items": many, "scale": 100}).status_code == 200


def test_f20_unwritable_outputs_fail_before_any_judging(tmp_path: Path, items_file: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    store = tmp_path / "s.sqlite"
    for args in (["score", "--out", blocker / "o.jsonl"], ["audit", "--json", blocker / "a.json"],
                 ["rank", "--json", blocker / "r.json"], ["report", "--html", blocker / "r.html"]):
        code, _, err = main(capsys, args[0], items_file, *args[1:], "-j", "mock/hash", "--store", store, "-q")
        assert code == 2 and "cannot write" in err and "Traceback" not in err, (args, err)
    assert not store.exists() or Store(store).count() == 0


@pytest.mark.parametrize("args", [["audit", "--ks", "0,1,2"], ["audit", "--delta-sweep", "a,b"],
                                  ["audit", "--scales", "7"], ["report", "--ks", "2", "--html", "r.html"],
                                  ["score", "--min-label-mass", "5"], ["score", "--batch-size", "0"],
                                  ["score", "--temperature", "nan"], ["score", "--max-new-tokens", "-1"],
                                  ["audit", "--bootstrap", "-5"], ["compare", "--delta", "inf"]])
def test_f21_f28_f29_bad_options_fail_before_any_judging(tmp_path: Path, items_file: Path, args: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    code, _, err = main(capsys, args[0], items_file, *args[1:], "-j", "mock/hash", "--store", store, "-q")
    assert code == 2 and "Traceback" not in err, err
    assert not store.exists() or Store(store).count() == 0


def test_f22_a_malformed_judge_url_is_a_clear_error(tmp_path: Path, items_file: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("httpx")
    for url in ("http://127.0.0.1:99999", "http://[::1"):
        with time_limit(20):
            code, _, err = main(capsys, "score", items_file, "-j", f"http/m@{url}", "--store", tmp_path / "s.sqlite")
        assert code == 2 and "invalid judge server URL" in err and "Traceback" not in err, err


def test_f23_stdout_that_is_not_utf8(tmp_path: Path) -> None:
    import os
    import subprocess

    rows = [{"id": "q-é", "question": "Ünïcode?", "responses": [{"id": "ä", "text": "Grüße ✓"}]}]
    items = write_jsonl(tmp_path / "items.jsonl", rows)
    result = subprocess.run([sys.executable, "-m", "trustjudge.cli", "score", str(items), "-j", "mock/hash",
                             "--store", str(tmp_path / "s.sqlite")], capture_output=True, timeout=120,
                            env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    record = json.loads(result.stdout.decode("ascii"))
    assert record["item_id"] == "q-é" and record["response_id"] == "ä"


# -- small things: F24-F39 -------------------------------------------------------------------------------


def test_f24_f34_dash_means_stdin_and_stdout(tmp_path: Path, items_file: Path) -> None:
    import os
    import subprocess

    cmd = [sys.executable, "-m", "trustjudge.cli", "score", "-", "-j", "mock/hash", "--store",
           str(tmp_path / "s.sqlite"), "--out", "-", "-q"]
    result = subprocess.run(cmd, input=items_file.read_bytes(), capture_output=True, timeout=120, env=os.environ)
    assert result.returncode == 0, result.stderr.decode()
    assert len(result.stdout.decode().splitlines()) == 5
    bad = subprocess.run(cmd, input=b'{"id": "x"}\n', capture_output=True, timeout=120, env=os.environ)
    assert bad.returncode == 2 and "<stdin>:1: field 'question'" in bad.stderr.decode()


def test_f24_a_fifo_is_read(tmp_path: Path, items_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import threading

    fifo = tmp_path / "items.jsonl.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(items_file.read_bytes()), daemon=True)
    writer.start()
    out = tmp_path / "o.jsonl"
    with time_limit(30):
        code, _, err = main(capsys, "score", fifo, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "-q",
                            "--out", out)
    writer.join(10)
    assert code == 0, err
    assert len(lines(out)) == 5


def test_f27_an_empty_input_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    code, _, err = main(capsys, "score", empty, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "-q")
    assert code == 2 and "holds no items" in err


def test_f30_ctrl_c_says_how_to_resume(tmp_path: Path, items_file: Path, failing_mock: MockBackend,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    def interrupt(request: Any) -> list[float]:
        raise KeyboardInterrupt

    failing_mock.script = interrupt
    code, _, err = main(capsys, "score", items_file, "-j", "mock/failing", "--store", tmp_path / "s.sqlite")
    assert code == 130 and "run the same command to resume" in err


def test_f38_an_api_key_sent_elsewhere_or_in_clear_text_is_warned_about(monkeypatch: pytest.MonkeyPatch,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("httpx")
    from trustjudge.backends._openai import build

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with caplog.at_level("WARNING", logger="trustjudge"):
        build("openai", "gpt@http://judge.example.com:8000").close()
    text = caplog.text
    assert "OPENAI_API_KEY" in text and "plain HTTP" in text and "judge.example.com" in text
    caplog.clear()
    with caplog.at_level("WARNING", logger="trustjudge"):
        build("openai", "gpt").close()
    assert caplog.text == ""


def test_f39_audit_takes_a_pairwise_template(tmp_path: Path, items_file: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from trustjudge import Judge

    template = tmp_path / "pair.txt"
    template.write_text("Which is better for ${question}? A: ${response_a} B: ${response_b} ${task}")
    code, _, err = main(capsys, "audit", items_file, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "-q",
                        "--scales", "5", "--bootstrap", "0", "--pairwise-template", template)
    assert code == 0, err
    judge = Judge("mock/hash", store=tmp_path / "s.sqlite", pairwise_template=template)
    try:
        list(judge.compare([it for it in __import__("trustjudge").load_items(items_file)]))
        assert judge.stats.model_calls == 0  # the audit stored these very prompts
    finally:
        judge.close()


def test_f26_a_read_only_store_can_be_re_aggregated(tmp_path: Path, items_file: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import shutil
    import subprocess
    import tempfile

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the command as another user")
    folder = Path(tempfile.mkdtemp(prefix="trustjudge-ro-"))
    try:
        folder.chmod(0o755)
        items = folder / "items.jsonl"
        items.write_bytes(items_file.read_bytes())
        store = folder / "s.sqlite"
        assert main(capsys, "score", items, "-j", "mock/hash", "--store", store, "-q", "--out",
                    folder / "first.jsonl")[0] == 0
        for p in folder.iterdir():
            p.chmod(0o644)
        # another user: neither the store nor its folder is writable
        result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                                 "-m", "trustjudge.cli", "score", str(items), "-j", "mock/hash", "--store", str(store)],
                                capture_output=True, text=True, timeout=120,
                                env={**os.environ, "HOME": str(folder), "TRUSTJUDGE_CACHE": str(folder)})
        assert result.returncode == 0, result.stderr
        assert [json.loads(x) for x in result.stdout.splitlines()] == lines(folder / "first.jsonl")
        changed = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                                  "-m", "trustjudge.cli", "score", str(items), "-j", "mock/hash", "--store",
                                  str(store), "--scale", "5"], capture_output=True, text=True, timeout=120,
                                 env={**os.environ, "HOME": str(folder), "TRUSTJUDGE_CACHE": str(folder)})
        assert changed.returncode == 2 and "cannot be written" in changed.stderr, changed.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- F11: a dead run's claims do not stall a resume ---------------------------------------------------------


def _foreign_claims(store: Path, judge: Any, items: Any, *, host: str, started: str | None,
                    expires_in: float) -> int:
    """Claim every judgment ``items`` need as another run would have: this PID (alive), another host."""
    import os

    from trustjudge.engine import _store

    task = judge.score_task()
    keys = [judge.engine._label_key(q.prompt, judge.engine._closed(q.labels))
            for item in items for r in item.responses
            for q in [task.question(item, r.text, judge.backend.format_prompt)]]
    db = sqlite3.connect(store)
    columns = [row[1] for row in db.execute("PRAGMA table_info(claims)")]
    row = {"owner": "dead-run", "host": host, "pid": os.getpid(), "expires_at": time.time() + expires_in,
           "boot": _store._boot_id() if hasattr(_store, "_boot_id") else "",
           "started": started if started is not None else "",
           "pidns": _store._pid_namespace() if hasattr(_store, "_pid_namespace") else ""}
    names = ["key", *(c for c in columns if c in row)]
    db.executemany(f"INSERT INTO claims ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                   [(k, *(row[c] for c in names[1:])) for k in keys])
    db.commit()
    db.close()
    return len(keys)


def test_f11_a_reused_pid_under_another_host_name_does_not_stall_the_resume(tmp_path: Path) -> None:
    from trustjudge import Judge, items_from_dicts

    store = tmp_path / "s.sqlite"
    items = items_from_dicts(small_items())
    judge = Judge("mock/hash", store=store, scale=5)
    try:
        # The dead run's PID now belongs to a live process (this one, started at another time) and the
        # container came back with another host name: its claims are void all the same.
        assert _foreign_claims(store, judge, items, host="old-container", started="1", expires_in=900) == 5
        with time_limit(20):
            records = list(judge.score(items))
        assert all(r.unscored is None for r in records) and judge.stats.model_calls == 5
    finally:
        judge.close()


def test_f11_waiting_for_another_run_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from trustjudge import Judge, items_from_dicts

    store = tmp_path / "s.sqlite"
    items = items_from_dicts(small_items())
    judge = Judge("mock/hash", store=store, scale=5)
    try:
        # A live run on another machine holds the claims; its lease lapses in 2 s (it stopped renewing).
        _foreign_claims(store, judge, items, host="other-machine", started=None, expires_in=2)
        with time_limit(30), caplog.at_level("WARNING", logger="trustjudge"):
            records = list(judge.score(items))
        assert all(r.unscored is None for r in records)
        assert "waiting for 5 judgment(s) that another run (host other-machine" in caplog.text
    finally:
        judge.close()


def test_f36_a_client_that_never_finishes_its_request_head_is_disconnected(tmp_path: Path) -> None:
    import socket
    import threading

    import uvicorn

    from trustjudge.serve import create_app, uvicorn_options

    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    options = uvicorn_options(timeout_s=1.0)
    options.pop("workers")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        with time_limit(60):
            while not server.started:
                time.sleep(0.02)
            with socket.create_connection(("127.0.0.1", port), timeout=15) as client:
                client.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\n")  # and never the rest
                began = time.monotonic()
                assert client.recv(100) == b""  # closed by the server
                assert time.monotonic() - began < 10
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
