"""The command line, end to end: real bundled judge, store reuse, dry run, bad input, kill and resume."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import write_jsonl

CLI = [sys.executable, "-m", "trustjudge.cli"]


def run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def records(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.model
def test_score_and_compare_on_the_bundled_judge(tmp_path: Path, items_file: Path) -> None:
    store = tmp_path / "s.sqlite"
    out = tmp_path / "scores.jsonl"
    first = run("score", items_file, "--judge", "hf/smollm2-135m", "--store", store, "--out", out, "--scale", "10")
    assert first.returncode == 0, first.stderr
    assert "model calls: 5" in first.stderr
    rows = records(out)
    assert len(rows) == 5
    for row in rows:
        assert set(row["scores"]) == {"discrete", "geval", "expected", "trustjudge"}
        assert row["judge"] == "hf/smollm2-135m" and row["protocol"] == "direct" and row["scale"] == 10
        assert 1 <= row["scores"]["expected"] <= 10 and 0 < row["label_mass"] <= 1
        assert row["scores"]["geval"] <= row["scores"]["expected"] + 1e-9
    second = run("score", items_file, "--judge", "hf/smollm2-135m", "--store", store, "--out", tmp_path / "again.jsonl",
                 "--scale", "10")
    assert "model calls: 0" in second.stderr and "from store: 5" in second.stderr
    assert records(tmp_path / "again.jsonl") == rows

    cmp_out = tmp_path / "verdicts.jsonl"
    result = run("compare", items_file, "--judge", "hf/smollm2-135m", "--store", store, "--out", cmp_out)
    assert result.returncode == 0, result.stderr
    pairs = records(cmp_out)
    assert len(pairs) == 4  # 3 pairs in q1, 1 in q2
    for p in pairs:
        assert set(p["verdicts"]) == {"single", "two_pass", "likelihood", "ppl"}
        assert abs(sum(p["probabilities"].values()) - 1) < 1e-9
        assert [o["shown_first"] for o in p["orders"]] == [p["first_id"], p["second_id"]]
        assert p["ppl_source"] == "verdict_probability"


@pytest.mark.model
def test_dry_run_counts_tokens_and_stored(tmp_path: Path, items_file: Path) -> None:
    store = tmp_path / "s.sqlite"
    plan = run("score", items_file, "--judge", "hf/smollm2-135m", "--store", store, "--dry-run", "--scale", "5")
    assert plan.returncode == 0, plan.stderr
    assert "model calls to make" in plan.stdout and "│                         5 │" not in plan.stderr
    assert not store.exists() or sqlite3.connect(store).execute("SELECT COUNT(*) FROM outputs").fetchone()[0] == 0


def test_bad_input_names_file_line_field_and_exits_2(tmp_path: Path, items_file: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(items_file.read_text() + '{"id": "q3", "responses": [{"id": "a", "text": "x"}]}\n')
    result = run("score", bad, "--judge", "mock/hash", "--store", tmp_path / "s.sqlite", "--out", tmp_path / "o.jsonl")
    assert result.returncode == 2
    assert f"{bad}:3: field 'question': is missing" in result.stderr
    assert "Traceback" not in result.stderr
    skipped = run("score", bad, "--judge", "mock/hash", "--store", tmp_path / "s.sqlite", "--out",
                  tmp_path / "o.jsonl", "--skip-invalid")
    assert skipped.returncode == 0, skipped.stderr
    assert "1 invalid line(s) skipped" in skipped.stderr
    assert len(records(tmp_path / "o.jsonl")) == 5


def test_unknown_judge_is_a_clear_error(tmp_path: Path, items_file: Path) -> None:
    result = run("score", items_file, "--judge", "nope/x", "--store", tmp_path / "s.sqlite")
    assert result.returncode == 2 and "unknown judge 'nope/x'" in result.stderr


def test_public_api_is_pinned() -> None:
    import trustjudge

    assert sorted(trustjudge.__all__) == sorted([
        "DEFAULT_JUDGE", "Backend", "BackendError", "CompareRecord", "ConfigError", "InputError", "Item", "Judge",
        "MockBackend", "Pair", "PrerequisiteError", "Response", "ScoreRecord", "Store", "StoreError",
        "TransientBackendError", "TrustJudgeError", "compare", "default_store_path", "get_backend",
        "items_from_dicts", "iter_items", "load_items", "register_backend", "register_mock", "score",
    ])


def test_rank_is_reproducible_and_writes_json(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "question": f"Question {i}?",
             "responses": [{"id": s, "text": f"{s} says {i}", "system": s} for s in ("alpha", "beta", "gamma")]}
            for i in range(6)]
    items = write_jsonl(tmp_path / "items.jsonl", rows)
    outs = []
    for n in (1, 2):
        result = run("rank", items, "--judge", "mock/hash", "--store", tmp_path / "s.sqlite", "-q",
                     "--bootstrap", "50", "--json", tmp_path / f"r{n}.json")
        assert result.returncode == 0, result.stderr
        assert "UserWarning" not in result.stderr
        outs.append(json.loads((tmp_path / f"r{n}.json").read_text()))
    assert outs[0] == outs[1]
    assert sorted(s["system"] for s in outs[0]["systems"]) == ["alpha", "beta", "gamma"]


def test_audit_json_is_identical_across_processes(tmp_path: Path, items_file: Path) -> None:
    # Separate processes have separate string-hash seeds: nothing may depend on set iteration order.
    outs = []
    for n in (1, 2):
        result = run("audit", items_file, "--judge", "mock/hash", "--store", tmp_path / "s.sqlite", "-q",
                     "--bootstrap", "200", "--json", tmp_path / f"a{n}.json")
        assert result.returncode == 0, result.stderr
        outs.append((tmp_path / f"a{n}.json").read_text())
    assert outs[0] == outs[1]
    data = json.loads(outs[0])
    assert data["pairs"] == 4 and "conflict" in data and "ntr" in data
