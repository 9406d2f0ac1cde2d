"""The adversarial reviews' reproductions, replayed on every run (issues 15 and 23).

Odd bytes, NaN, huge numbers, deep nesting and bad JSON in item files, suites and store exports; devices,
FIFOs and symlinks as outputs (made in the test's temporary folder only: the machine's own devices are never
touched); odd shapes; a judge server that accepts connections and never answers. Each case goes through the
command line in-process (``trustjudge.cli.main``, its error handling included) or the library, on the
``mock/hash`` judge, and must end with exit status 0 or 2: 2 with one line naming the file (and line and
field where there is one), never a traceback, a replaced device or a changed input.

The module is bounded in time: every case has its own limit, and the whole module must finish within
:data:`BUDGET_S` (checked when its last test has run).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import stat
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trustjudge import Criterion, InputError, items_from_dicts
from trustjudge.errors import BackendUnavailable

from ._silent_server import SilentServer
from .conftest import small_items, time_limit

BUDGET_S = 60.0
"""The most the whole module may take (it ran in about 10 s on 2 cores)."""


@pytest.fixture(scope="module", autouse=True)
def _module_budget() -> Iterator[None]:
    began = time.monotonic()
    yield
    took = time.monotonic() - began
    assert took < BUDGET_S, f"the adversarial module took {took:.1f} s, over its {BUDGET_S:.0f} s budget"


def main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """Run the CLI's entry point in-process (at most 20 s); return (exit status, stdout, stderr)."""
    from trustjudge import cli

    old = sys.argv
    sys.argv = ["trustjudge", *map(str, args)]
    code = 0
    try:
        with time_limit(20):
            cli.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old
    out, err = capsys.readouterr()
    return code, out, err


GOOD = json.dumps(small_items()[0])
DEEP = "[" * 100_000 + "]" * 100_000


def _item(**response: Any) -> str:
    return json.dumps({"id": "q", "question": "Q?", "responses": [{"id": "a", "text": "A.", **response}]})


# (file name, content, what the one error line says; None: the file is judged, exit 0)
ITEM_FILES: list[tuple[str, bytes | str, str | None]] = [
    ("invalid-utf8.jsonl", b'{"id": "q", "question": "Q?", "responses": [{"text": "\xff\xfe"}]}\n', "invalid UTF-8"),
    ("raw-nul.jsonl", b'{"id": "q",\x00 "question": "Q?"}\n', "invalid JSON"),
    ("escaped-nul-and-rtl.jsonl", _item(text="A\u0000B\u202e\U0001f600") + "\n", None),
    ("crlf.jsonl", GOOD + "\r\n" + GOOD.replace('"q1"', '"q9"') + "\r\n", None),
    ("bom-first.jsonl", "\ufeff" + GOOD + "\n", None),
    ("bom-inside.jsonl", GOOD + "\n\ufeff" + GOOD.replace('"q1"', '"q9"') + "\n", "invalid JSON"),
    ("lone-surrogate.jsonl", _item(text="\ud800") + "\n", "lone surrogate"),
    ("surrogate-id.jsonl", GOOD.replace('"q1"', '"q\\udfff"') + "\n", "field 'id'"),
    ("nan.jsonl", _item().replace('"A."}', '"A.", "human_score": NaN}') + "\n", "NaN is not a valid JSON number"),
    ("infinity.jsonl", _item().replace('"A."}', '"A.", "human_score": -Infinity}') + "\n", "-Infinity"),
    ("huge-float.jsonl", _item().replace('"A."}', '"A.", "human_score": 1e400}') + "\n", "must be a finite number"),
    ("huge-int.jsonl", _item().replace('"A."}', '"A.", "human_score": ' + "9" * 400 + "}") + "\n",
     "must be a finite number"),
    ("over-long-int.jsonl", _item().replace('"A."}', '"A.", "human_score": ' + "9" * 5000 + "}") + "\n",
     "invalid JSON"),
    ("number-string.jsonl", _item(human_score="1_000") + "\n", "decimal notation"),
    ("nan-string.jsonl", _item(human_score="nan") + "\n", "decimal notation"),
    ("huge-weight.jsonl", json.dumps({"id": "q", "question": "Q?", "responses": [{"text": "a"}],
                                      "checklist": [{"text": "ok?", "weight": 1e308}]}) + "\n", "must be at most"),
    ("deep.jsonl", DEEP + "\n", "nested too deeply"),
    ("deep-value.jsonl", _item(human_score=json.loads("[" * 500 + "]" * 500)) + "\n", "must be a number, got list"),
    ("deep-label.jsonl", json.dumps({"question": "Q?", "response_a": "a", "response_b": "b",
                                     "label": json.loads("[" * 500 + "]" * 500)}) + "\n", "field 'label'"),
    ("truncated.jsonl", GOOD[: len(GOOD) // 2] + "\n", "invalid JSON"),
    ("trailing-garbage.jsonl", GOOD + " garbage\n", "invalid JSON"),
    ("duplicate-key.jsonl", GOOD.replace('{"id": "q1"', '{"id": "q1", "id": "q2"') + "\n", "duplicate key"),
    ("duplicate-id.jsonl", GOOD + "\n" + GOOD + "\n", "duplicate item id"),
    ("not-an-object.jsonl", "[1, 2, 3]\n", "expected a JSON object"),
    ("array-of-strings.json", '["a", "b"]', "cannot tell the dataset format"),
    ("items-array.json", json.dumps(small_items(), indent=2), None),
    ("items-array-bad-element.json", json.dumps([*small_items(), {"id": "q3"}], indent=2), "field 'question'"),
    ("items-array-nan.json", json.dumps(small_items(), indent=2).replace('"human_score": 5', '"human_score": NaN'),
     "NaN is not a valid JSON number"),
    ("empty.jsonl", b"", "holds no items"),
    ("only-blank.jsonl", "\n \n\t\n", "holds no items"),
    ("csv-invalid-utf8.csv", b"id,question,response\nq1,Q?,good\nq2,Q?,bad \xff\n", "invalid UTF-8"),
    ("csv-unterminated.csv", 'id,question,response\nq1,Q?,"never closed\nq2,Q?,x\n', "never closed"),
    ("csv-mixed-forms.csv", "id,question,response,response_a,response_b\nq,Q?,x,a,b\n", "use one form"),
    ("csv-one-id-two-questions.csv", "id,question,response_id,response\nq1,A?,a,x\nq1,B?,b,y\n", "field 'question'"),
    ("csv-huge-field.csv", "id,question,response\nq1,Q?," + "y" * 1_100_000 + "\n", "characters"),
]


@pytest.mark.parametrize(("name", "content", "expect"), ITEM_FILES, ids=[c[0] for c in ITEM_FILES])
def test_an_odd_item_file_is_judged_or_named_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         name: str, content: bytes | str, expect: str | None) -> None:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8", errors="surrogatepass", newline="")
    else:
        path.write_bytes(content)
    before = path.read_bytes()
    out = tmp_path / "o.jsonl"
    code, _, err = main(capsys, "score", path, "-j", "mock/hash", "-q", "--store", tmp_path / "s.sqlite",
                        "--out", out)
    assert "Traceback" not in err
    assert path.read_bytes() == before
    if expect is None:
        assert code == 0, err
        assert out.read_text().strip()
    else:
        assert code == 2 and f"{path}" in err and expect in err, err
        assert not out.exists()


SUITES: list[tuple[str, str, str]] = [
    ("deep.json", f'{{"criteria": {DEEP}}}', "nested too deeply"),
    ("deep.toml", f"criteria = {DEEP}\n", "nested too deeply"),
    ("huge-weight.json", json.dumps({"criteria": [{"name": "a", "description": "A?", "weight": 1e308},
                                                  {"name": "b", "description": "B?", "weight": 1e308}]}),
     "must be at most"),
    ("weight-string.json", json.dumps({"criteria": [{"name": "a", "description": "A?", "weight": "1e400"}]}),
     "must be a finite number"),
    ("negative-weight.toml", '[[criteria]]\nname = "a"\ndescription = "A?"\nweight = -1\n', "must be 0 or more"),
    ("nan-weight.toml", '[[criteria]]\nname = "a"\ndescription = "A?"\nweight = nan\n', "must be a finite number"),
    ("nan.json", '{"criteria": [{"name": "a", "description": "A?", "weight": NaN}]}', "NaN is not a valid"),
    ("empty-name.json", json.dumps({"criteria": [{"name": " ", "description": "A?"}]}), "must not be empty"),
    ("array.json", "[1, 2]", "expected a JSON object"),
    ("unknown-field.json", json.dumps({"criteria": [], "rubric": 1}), "is not a suite field"),
    ("invalid-utf8.json", '{"criteria": [{"name": "\udcff"}]}', "invalid UTF-8"),
]


@pytest.mark.parametrize(("name", "content", "expect"), SUITES, ids=[c[0] for c in SUITES])
def test_an_odd_suite_is_named_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], items_file: Path,
                                           name: str, content: str, expect: str) -> None:
    suite = tmp_path / name
    suite.write_bytes(content.encode("utf-8", errors="surrogateescape"))
    code, _, err = main(capsys, "criteria", items_file, "--suite", suite, "-j", "mock/hash", "-q",
                        "--store", tmp_path / "s.sqlite")
    assert code == 2 and f"{suite}" in err and expect in err and "Traceback" not in err, err


@pytest.mark.parametrize(("line", "expect"), [
    (DEEP, "nested too deeply"),
    ('{"key": ' + "1" * 5000 + "}", "not valid JSON"),
    ('{"key": ' + "[" * 500 + "]" * 500 + "}", "is missing"),
    ("NaN", "expected a JSON object"),
])
def test_an_odd_store_export_is_refused_naming_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        line: str, expect: str) -> None:
    export = tmp_path / "export.jsonl"
    export.write_text(line + "\n")
    code, _, err = main(capsys, "store", "import", export, "--store", tmp_path / "s.sqlite")
    assert code == 2 and f"{export}:1" in err and expect in err and "Traceback" not in err, err


# -- outputs that are devices, FIFOs or symlinks (in the temporary folder) ----------------------------------


@contextlib.contextmanager
def _drained(fifo: Path) -> Iterator[list[bytes]]:
    """Read ``fifo`` in a thread while the block runs (opened at once without blocking, so the writer's open
    never waits; the thread ends with the block)."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    got: list[bytes] = []
    done = threading.Event()

    def drain() -> None:
        while True:
            ready, _, _ = select.select([fd], [], [], 0.05)
            data = os.read(fd, 1 << 16) if ready else b""
            got.append(data)
            if not data:
                if done.is_set():
                    return
                time.sleep(0.01)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        done.set()
        thread.join(10)
        with contextlib.suppress(BlockingIOError):  # what came after the thread's last look
            while data := os.read(fd, 1 << 16):
                got.append(data)
        os.close(fd)


def test_outputs_that_are_fifos_symlinks_or_devices_are_written_through(tmp_path: Path, items_file: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    def score(out: Path) -> tuple[int, str]:
        code, _, err = main(capsys, "score", items_file, "-j", "mock/hash", "-q", "--store", tmp_path / "s.sqlite",
                            "--out", out)
        return code, err

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with _drained(fifo) as got:
        code, err = score(fifo)
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and b"".join(got).count(b"\n") == 5

    target = tmp_path / "real.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)  # dangling until the output is written
    assert score(link)[0] == 0
    assert link.is_symlink() and len(target.read_text().splitlines()) == 5

    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    code, err = score(loop)
    assert code == 2 and "symlink loop" in err and loop.is_symlink()

    code, err = score(tmp_path)
    assert code == 2 and ("is a directory" in err or "is a folder" in err), err

    code, err = score(items_file)
    assert code == 2 and "would overwrite the input" in err

    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a null device, in the temporary folder
    except (PermissionError, OSError):
        return  # not root (or no CAP_MKNOD): the FIFO above is the streamed case
    code, err = score(node)
    assert code == 0, err
    assert stat.S_ISCHR(os.lstat(node).st_mode)  # streamed to, not replaced by a regular file


# -- the library and the service ---------------------------------------------------------------------------


@pytest.mark.parametrize(("record", "expect"), [
    ({"id": float("nan"), "question": "Q", "responses": [{"text": "a"}]}, "field 'id'"),
    ({"id": "q", "question": float("inf"), "responses": [{"text": "a"}]}, "field 'question'"),
    ({"id": "q", "question": "Q", "responses": [{"text": "a", "human_score": float("nan")}]}, "finite"),
    ({"id": "q", "question": "Q", "responses": [{"text": "a"}],
      "criteria": [{"name": "c", "description": "d", "weight": 1e308}]}, "must be at most"),
    ({"id": "q", "question": "Q", "responses": [{"text": "a", "human_score": json.loads("[" * 400 + "]" * 400)}]},
     "must be a number"),
    ({"id": "q", "question": "Q", "responses": "a"}, "field 'responses'"),
])
def test_odd_records_in_memory_are_refused_naming_the_field(record: dict[str, Any], expect: str) -> None:
    with pytest.raises(InputError, match=expect):
        items_from_dicts([record])


def test_odd_code_arguments_are_refused_naming_the_argument() -> None:
    from trustjudge._integrations import one_item

    for make, field in ((lambda: Criterion("a", "", weight=-1), "description"),
                        (lambda: Criterion("a", "d", weight=-1), "weight"),
                        (lambda: one_item("Q?", [None]), "response"),  # type: ignore[list-item]
                        (lambda: one_item("Q?", ["a", "\ud800"]), "response B"),
                        (lambda: one_item(3, ["a"]), "question")):  # type: ignore[arg-type]
        with pytest.raises(InputError, match=f"field '{field}'"):
            make()


def test_the_service_answers_422_not_500_to_odd_numbers(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trustjudge.serve import create_app

    app = create_app("mock/hash", store_path=tmp_path / "s.sqlite")
    huge = [{"name": "a", "description": "A?", "weight": 1e308}, {"name": "b", "description": "B?", "weight": 1e308}]
    with TestClient(app) as c:
        r = c.post("/v1/criteria", json={"items": small_items(), "criteria": huge})
        assert r.status_code == 422, r.text  # before: 500 (OverflowError)
        body = '{"items": [{"id": NaN, "question": "Q", "responses": [{"text": "a"}]}]}'
        r = c.post("/v1/score", content=body, headers={"content-type": "application/json"})
        assert 400 <= r.status_code < 500, r.text


def test_a_judge_server_that_never_answers_stops_the_run_within_seconds(tmp_path: Path) -> None:
    pytest.importorskip("httpx")
    from trustjudge import Judge

    with SilentServer() as url:
        judge = Judge(f"http/judge@{url}?timeout=0.5&labels=top_k&ctx=4096", store=tmp_path / "s.sqlite",
                      scale=5, retry_base_s=0.0)
        began = time.monotonic()
        try:
            with time_limit(30), pytest.raises(BackendUnavailable, match="has not answered"):
                list(judge.score(items_from_dicts(small_items())))
        finally:
            judge.close()
        assert time.monotonic() - began < 5
