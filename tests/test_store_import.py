"""`trustjudge store import`: an export loads back exactly, reruns make no model call, bad rows are refused whole."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import small_items
from trustjudge import InputError, Judge, items_from_dicts
from trustjudge.engine._store import Store
from trustjudge.engine._store_io import import_file, read_export

COLUMNS = "key, kind, backend, request, result, prompt_tokens, completion_tokens, latency_s, created_at"


def _invoke(*args: str | Path) -> Any:
    from click.testing import CliRunner

    from trustjudge.cli import cli

    return CliRunner().invoke(cli, [str(a) for a in args])


def _judge_all(store: Path) -> tuple[int, int]:
    """Score and compare the small items, and score one with `cot` (critiques: `generate` rows); returns the
    model calls made and the outputs read from the store."""
    calls = stored = 0
    for protocol in ("direct", "cot"):
        judge = Judge("mock/hash", store=store, protocol=protocol, scale=5)
        try:
            items = items_from_dicts(small_items())
            list(judge.score(items))
            if protocol == "direct":
                list(judge.compare(items))
            calls += judge.stats.model_calls
            stored += judge.stats.from_store
        finally:
            judge.close()
    return calls, stored


def _rows(store: Path) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(store)
    try:
        return db.execute(f"SELECT {COLUMNS} FROM outputs ORDER BY key").fetchall()
    finally:
        db.close()


@pytest.fixture()
def judged(tmp_path: Path) -> Path:
    store = tmp_path / "judged.sqlite"
    calls, _ = _judge_all(store)
    assert calls > 0
    return store


@pytest.mark.parametrize("name", ["export.jsonl.gz", "export.jsonl"])
def test_export_then_import_reproduces_every_row_and_a_rerun_makes_no_call(tmp_path: Path, judged: Path,
                                                                            name: str) -> None:
    out = tmp_path / name
    done = _invoke("store", "export", "--store", judged, "--out", out)
    assert done.exit_code == 0, done.output
    raw = out.read_bytes()
    assert (raw[:2] == b"\x1f\x8b") == name.endswith(".gz")  # gzip magic only for a .gz name
    fresh = tmp_path / "fresh.sqlite"
    loaded = _invoke("store", "import", out, "--store", fresh)
    assert loaded.exit_code == 0, loaded.output
    original = _rows(judged)
    assert {r[1] for r in original} == {"labels", "generate"}
    assert f"imported {len(original)} outputs" in loaded.output
    assert _rows(fresh) == original  # every column of every row, byte for byte
    # A second import is a no-op (every key already stored with the same content).
    again = _invoke("store", "import", out, "--store", fresh)
    assert again.exit_code == 0 and f"({len(original)} already stored)" in again.output
    assert _rows(fresh) == original
    # Judging the same items on the imported store makes no model call.
    calls, stored = _judge_all(fresh)
    assert calls == 0 and stored > 0


@pytest.mark.parametrize("name", ["export.jsonl.gz", "export.jsonl", "export.parquet", None])
def test_export_says_on_stderr_how_many_outputs_it_wrote_and_where(tmp_path: Path, judged: Path,
                                                                    name: str | None) -> None:
    if name is not None and name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    out = tmp_path / name if name is not None else None
    where = ("--out", out) if out is not None else ()
    done = _invoke("store", "export", "--store", judged, *where)
    assert done.exit_code == 0, done.output
    n = len(_rows(judged))
    # Before: nothing at all on success, while `store import` says "imported N outputs".
    assert done.stderr == f"exported {n} outputs from {judged} to {out or 'standard output'}\n"
    if out is None:
        assert len(done.stdout.splitlines()) == n  # standard output holds the export alone
    # A filter that keeps nothing says 0; --quiet (-q) says nothing, and still writes.
    none = _invoke("store", "export", "--store", judged, "--backend", "mock:other", *where)
    assert none.exit_code == 0 and none.stderr.startswith("exported 0 outputs from ")
    for flag in ("--quiet", "-q"):
        quiet = _invoke("store", "export", "--store", judged, flag, *where)
        assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr
    if out is not None:
        assert out.stat().st_size > 0
    else:
        assert len(quiet.stdout.splitlines()) == n


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines()


def _write(path: Path, lines: list[str]) -> None:
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


def _drop(field: str) -> Any:
    def edit(row: dict[str, Any]) -> None:
        del row[field]
    return edit


def _set(field: str, value: Any) -> Any:
    def edit(row: dict[str, Any]) -> None:
        row[field] = value
    return edit


@pytest.mark.parametrize(("edit", "field", "message"), [
    (None, None, "not valid JSON"),
    (_drop("result"), "result", "is missing"),
    (_drop("key"), "key", "is missing"),
    (_set("prompt_tokens", "12"), "prompt_tokens", "non-negative integer"),
    (_set("prompt_tokens", True), "prompt_tokens", "non-negative integer"),
    (_set("latency_s", "fast"), "latency_s", "finite number"),
    (_set("request", "a prompt"), "request", "JSON object"),
    (_set("kind", "score"), "kind", "must be one of"),
    (_set("backend", ""), "backend", "non-empty string"),
    (_set("colour", "red"), "colour", "not a field"),
])
def test_a_corrupted_line_is_refused_with_its_line_and_nothing_is_imported(tmp_path: Path, judged: Path, edit: Any,
                                                                          field: str | None, message: str) -> None:
    out = tmp_path / "export.jsonl.gz"
    assert _invoke("store", "export", "--store", judged, "--out", out).exit_code == 0
    lines = _lines(out)
    bad = 4  # 1-based: a row after good ones, so a half-import would show
    if edit is None:
        lines[bad - 1] = lines[bad - 1][:-7]  # cut off the end: not JSON
    else:
        row = json.loads(lines[bad - 1])
        edit(row)
        lines[bad - 1] = json.dumps(row)
    broken = tmp_path / "broken.jsonl.gz"
    _write(broken, lines)
    target = tmp_path / "target.sqlite"
    _judge_all(target)  # the target holds rows already: they must come out unchanged
    before = _rows(target)
    extra = tmp_path / "extra.sqlite"  # a store with a row the target lacks, exported after the bad line's rows
    with Store(extra) as s:
        s.put_many([("s256:" + "0" * 64, "labels", "mock:extra", {"prompt": "p", "labels": ["A"]},
                     {"logprobs": [-0.1]}, 3, 0, 0.01)])
    assert _invoke("store", "export", "--store", extra, "--out", tmp_path / "extra.jsonl").exit_code == 0
    _write(broken, lines + (tmp_path / "extra.jsonl").read_text().splitlines())
    refused = _invoke("store", "import", broken, "--store", target)
    assert refused.exit_code != 0
    exc = refused.exception
    assert isinstance(exc, InputError), refused.output
    assert exc.line == bad and exc.field == field and exc.file == str(broken)
    assert message in str(exc) and f"{broken}:{bad}:" in str(exc)
    assert _rows(target) == before


def test_a_row_conflicting_with_a_stored_one_is_refused(tmp_path: Path, judged: Path) -> None:
    out = tmp_path / "export.jsonl"
    assert _invoke("store", "export", "--store", judged, "--out", out).exit_code == 0
    lines = out.read_text().splitlines()
    row = json.loads(lines[2])
    target = tmp_path / "target.sqlite"
    with Store(target) as s:
        s.put_many([(row["key"], row["kind"], row["backend"], row["request"], {**row["result"], "extra": 1},
                     row["prompt_tokens"], row["completion_tokens"], row["latency_s"])])
    before = _rows(target)
    with Store(target) as s, pytest.raises(InputError) as caught:
        import_file(out, s)
    assert caught.value.line == 3 and caught.value.field == "result" and "already in the store" in str(caught.value)
    assert _rows(target) == before
    # The same key twice in one file with other content: the later line is named.
    twice = tmp_path / "twice.jsonl"
    row["result"] = {**row["result"], "extra": 2}
    twice.write_text("\n".join([*lines, json.dumps(row)]) + "\n")
    with Store(tmp_path / "empty.sqlite") as s, pytest.raises(InputError) as caught:
        import_file(twice, s)
    assert caught.value.line == len(lines) + 1 and "also on line 3" in str(caught.value)
    assert _rows(tmp_path / "empty.sqlite") == []


def test_a_truncated_gzip_export_is_refused(tmp_path: Path, judged: Path) -> None:
    out = tmp_path / "export.jsonl.gz"
    assert _invoke("store", "export", "--store", judged, "--out", out).exit_code == 0
    assert len(read_export(out)) == len(_rows(judged))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(out.read_bytes()[:-40])
    with pytest.raises(InputError) as caught:
        read_export(cut)
    assert caught.value.file == str(cut) and "cannot be read" in str(caught.value)


DRIVER = Path(__file__).resolve().parents[1] / "bench" / "guarantee_judge.py"
DATA = next((p / "shared" / "data" for p in DRIVER.parents[1:4] if (p / "shared" / "data").is_dir()), None)


@pytest.mark.skipif(DATA is None, reason="the study data (../shared/data) is not on this machine")
def test_the_study_driver_resumes_from_its_export_with_no_model_call(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    def run(store: Path) -> str:
        env = {**os.environ, "PYTHONPATH": str(DRIVER.parents[1] / "src")}
        done = subprocess.run([sys.executable, str(DRIVER), "--judge", "mock/hash", "--limit", "1", "--data", str(DATA),
                               "--store", str(store), "--export", str(export)], capture_output=True, text=True,
                              env=env, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    export = tmp_path / "study.jsonl.gz"
    first = run(tmp_path / "first.sqlite")
    assert "all chunks done" in first and export.is_file()
    judged = _rows(tmp_path / "first.sqlite")
    assert len(judged) >= 8  # at least one judgment per chunk
    # A later session with an empty store: imports the export, then every chunk comes from the store.
    second = run(tmp_path / "second.sqlite")
    assert f"imported {export}: {len(judged)} outputs" in second
    done = [line for line in second.splitlines() if ": done," in line]
    assert len(done) == 8 and all(" 0 model calls" in line for line in done)
    assert _rows(tmp_path / "second.sqlite") == judged
