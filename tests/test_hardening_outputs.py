"""Outputs that cannot damage the system or the inputs, and scores that are never NaN (issue 23).

Every test failed before its fix. The command line runs in-process through ``trustjudge.cli.main`` (its
error handling included) on the ``mock/hash`` judge, so these tests need no model. They never touch the
machine's own devices: FIFOs, ptys, symlinks and device nodes are made in the test's temporary folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import run_cli, time_limit


def main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """Run the CLI's entry point in-process; return (exit status, stdout, stderr)."""
    return run_cli(capsys, *args)


def records(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@contextlib.contextmanager
def fifo_reader(fifo: Path) -> Iterator[list[bytes]]:
    """Read ``fifo`` in a thread while the block runs (the list gets what was read); opened at once without
    blocking, so the writer's open never waits, and the thread ends with the block even if nothing came."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    chunks: list[bytes] = []
    done = threading.Event()

    def drain() -> None:
        while True:
            ready, _, _ = select.select([fd], [], [], 0.05)
            data = os.read(fd, 1 << 16) if ready else b""
            chunks.append(data)
            if not data:
                if done.is_set():
                    return
                time.sleep(0.01)  # no writer yet (or any more): a FIFO reads as empty

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    try:
        yield chunks
    finally:
        done.set()
        thread.join(10)
        os.close(fd)


def score(capsys: pytest.CaptureFixture[str], tmp_path: Path, items: Path, out: Path,
          *extra: str | Path) -> tuple[int, str]:
    with time_limit(60):
        code, _, err = main(capsys, "score", items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "-q",
                            "--out", out, *extra)
    return code, err


# -- an output naming a device, a FIFO or a symlink is streamed to or written through, never replaced ----

def test_an_output_fifo_is_streamed_to_not_replaced(tmp_path: Path, items_file: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    with fifo_reader(fifo) as chunks:
        code, err = score(capsys, tmp_path, items_file, fifo)
    assert code == 0, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert len(records(b"".join(chunks).decode())) == 5


def test_an_output_device_node_is_streamed_to_not_replaced(tmp_path: Path, items_file: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    null = os.stat("/dev/null")
    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, null.st_rdev)
        os.close(os.open(node, os.O_WRONLY))  # a folder mounted nodev refuses to open device nodes
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a usable device node here: {exc}")
    code, err = score(capsys, tmp_path, items_file, node)
    assert code == 0, err
    st = os.lstat(node)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev, "the device node was replaced"


def test_an_output_symlink_to_a_terminal_gets_the_bytes(tmp_path: Path, items_file: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import tty

    master, slave = os.openpty()
    try:
        tty.setraw(slave)  # no newline translation: the bytes as written
        link = tmp_path / "terminal"
        link.symlink_to(os.ttyname(slave))
        code, err = score(capsys, tmp_path, items_file, link)
        ready, _, _ = select.select([master], [], [], 5)
        data = os.read(master, 1 << 20) if ready else b""
        still_a_terminal = link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)
    finally:
        os.close(slave)
        os.close(master)
    assert code == 0, err
    assert still_a_terminal, "the symlink to the terminal was replaced"
    assert len(records(data.decode())) == 5


@pytest.mark.parametrize("exists", [True, False], ids=["file", "dangling"])
def test_an_output_symlink_is_written_through_and_kept(tmp_path: Path, items_file: Path, exists: bool,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "real" / "scores.jsonl"
    target.parent.mkdir()
    if exists:
        target.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    code, err = score(capsys, tmp_path, items_file, link)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert len(records(target.read_text())) == 5


def test_an_output_symlink_loop_is_refused_before_judging(tmp_path: Path, items_file: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.symlink_to(b)
    b.symlink_to(a)
    code, err = score(capsys, tmp_path, items_file, a)
    assert code == 2 and "symlink loop" in err, err
    assert a.is_symlink() and b.is_symlink()
    assert not (tmp_path / "s.sqlite").exists()


def test_json_and_html_outputs_stream_to_a_fifo(tmp_path: Path, items_file: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    for command, option in (("audit", "--json"), ("report", "--html")):
        fifo = tmp_path / f"{command}.fifo"
        os.mkfifo(fifo)
        with fifo_reader(fifo) as chunks, time_limit(120):
            code, _, err = main(capsys, command, items_file, "-j", "mock/hash", "--store",
                                tmp_path / "s.sqlite", "-q", option, fifo)
        assert code == 0, (command, err)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), command
        text = b"".join(chunks).decode()
        assert (json.loads(text) if option == "--json" else text.startswith("<!")), command


# -- an output naming the --suite file is refused, and the suite kept ----------------------------------

@pytest.mark.parametrize("command", ["criteria", "checklist"])
@pytest.mark.parametrize("option", ["--out", "--audit", "--report"])
def test_an_output_naming_the_suite_is_refused_and_the_suite_kept(tmp_path: Path, items_file: Path, command: str,
                                                                  option: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"criteria": [{"name": "accuracy", "description": "Is it right?"}],
                                 "checklist": ["Is it right?"]}))
    before = suite.read_bytes()
    link = tmp_path / "suite-link.json"
    link.symlink_to(suite)
    for target in (suite, link):
        with time_limit(60):
            code, _, err = main(capsys, command, items_file, "--suite", suite, "-j", "mock/hash", "--store",
                                tmp_path / "s.sqlite", "-q", option, target)
        assert code == 2 and f"{option} {target} would overwrite the input {suite}" in err, err
    assert suite.read_bytes() == before
    assert not (tmp_path / "s.sqlite").exists()


# -- with a symlinked store, the real store's WAL, shared-memory and journal files are protected --------

@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_the_real_store_files_behind_a_symlinked_store_are_protected(tmp_path: Path, items_file: Path, suffix: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from trustjudge import Store

    real = tmp_path / "real" / "judgments.sqlite"
    real.parent.mkdir()
    link = tmp_path / "store.sqlite"
    link.symlink_to(real)
    code, err = score(capsys, tmp_path, items_file, tmp_path / "first.jsonl", "--store", link)
    assert code == 0, err
    target = Path(f"{real}{suffix}")
    code, err = score(capsys, tmp_path, items_file, target, "--store", link, "--scale", "5")
    assert code == 2 and "would overwrite the judgment store's" in err and str(target) in err, err
    with Store(real) as s:
        assert s.count() == 5 and s.integrity_check() == "ok"


# -- no label mass at all is unscored with its reason, even with --min-label-mass 0 ---------------------

def _zero_mass_runs() -> dict[str, Any]:
    from trustjudge import Check, Criterion

    criteria, checks = [Criterion("accuracy", "Is it right?")], [Check("1", "Is it right?")]
    return {"score": lambda j, items: list(j.score(items)),
            "compare": lambda j, items: list(j.compare(items)),
            "criteria": lambda j, items: list(j.criteria(items, criteria)),
            "criteria-pairwise": lambda j, items: list(j.compare_criteria(items, criteria)),
            "checklist": lambda j, items: list(j.checklist(items, checks)),
            "claims": lambda j, items: list(j.claims(items)),
            "audit": lambda j, items: [j.audit(items).report]}


@pytest.mark.parametrize("kind", list(_zero_mass_runs()))
def test_zero_label_mass_is_unscored_not_a_crash_or_nan(tmp_path: Path, kind: str) -> None:
    from trustjudge import Judge, MockBackend, items_from_dicts

    nothing = MockBackend("nothing", script=lambda request: [0.0] * len(request.labels))
    items = items_from_dicts([{"id": "q", "question": "Q?", "evidence": ["E."], "responses": [
        {"id": "a", "text": "x", "claims": ["C1."]}, {"id": "b", "text": "y", "claims": ["C2."]}]}])
    judge = Judge(nothing, store=tmp_path / "s.sqlite", min_label_mass=0)
    try:
        got = _zero_mass_runs()[kind](judge, items)
    finally:
        judge.close()
    assert got
    for record in got:
        if kind == "audit":
            assert record.unscored_compare.get("no_label_mass"), record.unscored_compare
            assert all(counts.get("no_label_mass") for counts in record.unscored_scores.values())
            continue
        row = record.to_dict()
        assert row["unscored"] is not None, row
        text = json.dumps(row, allow_nan=False)  # no NaN anywhere: NaN is not a score
        assert "no_label_mass" in text, row


def test_score_with_min_label_mass_0_gives_unscored_records_for_no_mass(tmp_path: Path, items_file: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from trustjudge import MockBackend, register_mock

    register_mock("nothing", MockBackend("nothing", script=lambda request: [0.0] * len(request.labels)))
    try:
        with time_limit(60):
            code, out, err = main(capsys, "score", items_file, "-j", "mock/nothing", "--store",
                                  tmp_path / "s.sqlite", "-q", "--min-label-mass", "0")
    finally:
        register_mock("nothing", None)
    rows = records(out)
    assert len(rows) == 5 and all(r["unscored"] == "no_label_mass" for r in rows), rows
    assert code == 0, err


# -- a bad --rank-seed fails before any judging, naming the option --------------------------------------

def test_a_negative_rank_seed_fails_before_any_judging_naming_the_option(tmp_path: Path, items_file: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with time_limit(60):
        code, _, err = main(capsys, "rank", items_file, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "-q",
                            "--rank-seed", "-1")
    assert code == 2 and "--rank-seed" in err, err
    assert not (tmp_path / "s.sqlite").exists()


# -- user strings are shown as written, never read as rich markup ---------------------------------------

def test_an_id_that_looks_like_markup_is_shown_in_the_error_not_a_markup_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    row = {"id": "[/x]", "question": "Q", "responses": [{"id": "a", "text": "t"}]}
    items = tmp_path / "dup.jsonl"
    items.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    code, _, err = main(capsys, "score", items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "-q")
    assert code == 2 and "duplicate item id '[/x]'" in err, err


def test_system_names_with_brackets_are_shown_as_written_in_the_ranking(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    systems = ["gpt-4 [beta]", "[bold]claude"]
    items = tmp_path / "systems.jsonl"
    items.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Q{i}?", "responses": [
        {"id": s, "text": f"answer {i} {s}", "system": s} for s in systems]}) + "\n" for i in range(3)))
    with time_limit(60):
        code, out, err = main(capsys, "rank", items, "-j", "mock/hash", "--store", tmp_path / "s.sqlite", "-q",
                              "--bootstrap", "10")
    assert code == 0, err
    assert "gpt-4 [beta]" in out and "[bold]claude" in out, out


# -- a temporary file left by a killed write is removed by the next write of the same output (issue 38, H11) --


def _temp(folder: Path, name: str, age_s: float = 60.0, token: str = "k1ll3d_x") -> Path:
    tmp = folder / f".{name}.trustjudge.{token}.tmp"
    tmp.write_bytes(b"")
    then = time.time() - age_s
    os.utime(tmp, (then, then))
    return tmp


def test_a_stale_temporary_file_of_the_output_is_removed_by_the_next_write(tmp_path: Path, items_file: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import fcntl

    out = tmp_path / "o.jsonl"
    stale = _temp(tmp_path, "o.jsonl")
    young = _temp(tmp_path, "o.jsonl", age_s=0.0, token="young___")  # its writer may not have locked it yet
    held = _temp(tmp_path, "o.jsonl", token="held____")  # a live writer's: locked
    other = _temp(tmp_path, "other.jsonl")  # another output's
    lookalike = tmp_path / ".o.jsonl.trustjudge.k1ll3d_x.tmp.keep"
    lookalike.write_bytes(b"mine")
    fd = os.open(held, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        code, err = score(capsys, tmp_path, items_file, out)
    finally:
        os.close(fd)
    assert code == 0, err
    assert not stale.exists()
    assert young.exists() and held.exists() and other.exists() and lookalike.read_bytes() == b"mine"
    assert len(records(out.read_text())) == 5
    assert sorted(p.name for p in tmp_path.iterdir() if "trustjudge" in p.name) == sorted(
        p.name for p in (young, held, other, lookalike))


def test_a_stale_temporary_file_is_removed_by_the_next_store_export(tmp_path: Path, items_file: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert score(capsys, tmp_path, items_file, tmp_path / "o.jsonl")[0] == 0
    stale = _temp(tmp_path, "e.jsonl.gz")
    code, _, err = main(capsys, "store", "export", "--store", tmp_path / "s.sqlite", "--out", tmp_path / "e.jsonl.gz")
    assert code == 0, err
    assert not stale.exists() and (tmp_path / "e.jsonl.gz").stat().st_size > 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".e.")] == []
