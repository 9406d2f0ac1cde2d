"""Crash and resume, and several processes on one store: nothing lost, nothing repeated.

The CLI runs as a subprocess on the ``mock/hash`` judge, which appends one line per model call to
``TRUSTJUDGE_MOCK_CALLS`` (calls are counted across processes) and sleeps ``TRUSTJUDGE_MOCK_DELAY``
seconds per call, so that a run can be killed half way.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import write_jsonl

pytestmark = pytest.mark.slow  # subprocesses, servers or Ray: opt-in locally (scripts/test --quick skips)

CLI = [sys.executable, "-m", "trustjudge.cli"]
BATCH = 4


def make_items(tmp_path: Path, n: int = 40) -> Path:
    rows = [{"id": f"q{i}", "question": f"Question {i}?",
             "responses": [{"id": str(k), "text": f"answer {i}.{k}"} for k in range(3)]} for i in range(n)]
    return write_jsonl(tmp_path / "items.jsonl", rows)


def calls(path: Path) -> int:
    return len(path.read_text().split()) if path.exists() else 0


def records(path: Path) -> list[Any]:
    return sorted((json.loads(line) for line in path.read_text().splitlines()),
                  key=lambda r: json.dumps(r, sort_keys=True))


def cli(command: str, items: Path, store: Path, out: Path, count: Path, delay: float) -> list[str]:
    return [*CLI, command, str(items), "--judge", "mock/hash", "--store", str(store), "--batch-size", str(BATCH),
            "-q", "--out", str(out)]


def env(count: Path, delay: float) -> dict[str, str]:
    return {**os.environ, "TRUSTJUDGE_MOCK_CALLS": str(count), "TRUSTJUDGE_MOCK_DELAY": str(delay)}


def wait_for_calls(count: Path, n: int, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while calls(count) < n:
        assert proc.poll() is None, "the run ended before the kill"
        assert time.time() < deadline, f"no {n} calls after {timeout} s"
        time.sleep(0.005)


def clean_run(command: str, items: Path, tmp_path: Path) -> tuple[list[Any], int]:
    count = tmp_path / "clean-calls.txt"
    out = tmp_path / "clean.jsonl"
    done = subprocess.run(cli(command, items, tmp_path / "clean.sqlite", out, count, 0.0), env=env(count, 0.0),
                          check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return records(out), calls(count)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("command", ["score", "compare"])
def test_sigkill_at_random_moments_then_resume(command: str, seed: int, tmp_path: Path) -> None:
    items = make_items(tmp_path)
    want, total = clean_run(command, items, tmp_path)
    assert total == 40 * (3 if command == "score" else 6)
    store, count = tmp_path / "s.sqlite", tmp_path / "calls.txt"
    rng = random.Random(seed)
    kills = sorted(rng.sample(range(BATCH, total - 2 * BATCH), 2))
    for attempt, at in enumerate(kills):
        proc = subprocess.Popen(cli(command, items, store, tmp_path / f"partial{attempt}.jsonl", count, 0.01),
                                env=env(count, 0.01), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_calls(count, at, proc)
        time.sleep(rng.uniform(0.0, 0.05))  # anywhere in a batch: before, during or after its store write
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    final = tmp_path / "final.jsonl"
    done = subprocess.run(cli(command, items, store, final, count, 0.0), env=env(count, 0.0), check=False,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert records(final) == want  # byte for byte after sorting: nothing missing, nothing different
    assert total <= calls(count) <= total + BATCH * len(kills)  # at most the batch in flight per kill
    db = sqlite3.connect(store)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT COUNT(*) FROM outputs").fetchone()[0] == total
    assert db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0  # the killed runs' claims were taken over


@pytest.mark.parametrize("command", ["score", "compare"])
def test_two_processes_on_one_store_split_the_work(command: str, tmp_path: Path) -> None:
    items = make_items(tmp_path)
    want, total = clean_run(command, items, tmp_path)
    store = tmp_path / "s.sqlite"
    count_a, count_b = tmp_path / "a.txt", tmp_path / "b.txt"
    # 0.1 s per call: A's 120 calls last 12 s, longer than B takes to start on a loaded machine (importing
    # trustjudge is seconds of CPU there), so that B really shares the work.
    a = subprocess.Popen(cli(command, items, store, tmp_path / "a.jsonl", count_a, 0.1), env=env(count_a, 0.1),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for_calls(count_a, 2 * BATCH, a)  # A is under way when B starts
    b = subprocess.Popen(cli(command, items, store, tmp_path / "b.jsonl", count_b, 0.1), env=env(count_b, 0.1),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for proc in (a, b):
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    # Nothing computed twice, both processes worked, both outputs complete and equal to a single run's.
    assert calls(count_a) + calls(count_b) == total
    assert calls(count_a) > 0 and calls(count_b) > 0
    assert records(tmp_path / "a.jsonl") == want and records(tmp_path / "b.jsonl") == want
    db = sqlite3.connect(store)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT COUNT(*) FROM outputs").fetchone()[0] == total
