"""The command line, end to end: real bundled judge, store reuse, dry run, bad input, kill and resume."""

from __future__ import annotations

import inspect
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trustjudge import MockBackend, register_mock

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
        "DEFAULT_JUDGE", "Backend", "BackendError", "Calibration", "Check", "ChecklistRecord", "CompareRecord",
        "ConfigError",
        "CriteriaRecord", "Criterion", "InputError", "Item", "Judge", "JudgeConfig", "LabelSet", "MockBackend", "Pair",
        "PrerequisiteError", "Response", "Rule", "ScoreRecord", "Store", "StoreError", "TransientBackendError",
        "TrustJudgeError", "Turn", "compare", "default_store_path", "get_backend", "items_from_dicts", "iter_items",
        "load_items", "read_items", "register_backend", "register_mock", "score", "to_pandas",
        "MODES", "Mode", "TemplateSpec", "get_mode", "register_mode", "unregister_mode",
        "VerificationSample", "verification_sample",
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
    # The library's Judge.rank is what the command prints: the same ranking from the same store, zero calls.
    from trustjudge import Judge, load_items

    with Judge("mock/hash", store=tmp_path / "s.sqlite") as j:
        ranking = j.rank(load_items(items), bootstrap=50)
        assert j.stats.model_calls == 0
    cli_json = {k: v for k, v in outs[0].items() if k not in ("judge", "protocol")}
    assert json.loads(json.dumps(ranking.to_dict())) == cli_json


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


# -- every judging command takes, and honours, the same judge and engine options ------------------------

JUDGING_COMMANDS = {"score": [], "compare": [], "audit": [], "rank": [], "report": ["--html", "r.html"]}


class _Built(Exception):
    """Raised by a recording judge factory: the command got as far as building its judge."""


def _invoke(*args: str | Path) -> Any:
    from click.testing import CliRunner

    from trustjudge.cli import cli

    return CliRunner().invoke(cli, [str(a) for a in args])


def _template(tmp_path: Path, kind: str, marker: str) -> Path:
    import trustjudge

    default = (Path(trustjudge.__file__).parent / "templates" / f"{kind}.txt").read_text(encoding="utf-8")
    path = tmp_path / f"{kind}-{marker}.txt"
    path.write_text(f"{marker}\n{default}", encoding="utf-8")
    return path


@pytest.mark.parametrize("command", sorted(JUDGING_COMMANDS))
def test_every_judging_command_builds_its_judge_from_the_same_options(
        command: str, tmp_path: Path, items_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trustjudge import cli

    built: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    real = cli._make_judge

    def record(*args: Any, **kwargs: Any) -> Any:
        built.append((args, kwargs))
        raise _Built

    monkeypatch.setattr(cli, "_make_judge", record)
    # compare's --template is its pairwise one (checked, with the items, before the judge is built)
    store, template = tmp_path / "s.sqlite", _template(tmp_path, "pairwise" if command == "compare" else "pointwise",
                                                       "MINE")
    result = _invoke(command, items_file, *JUDGING_COMMANDS[command], "-j", "mock/hash", "--store", store,
                     "--protocol", "cot", "--batch-size", "3", "--temperature", "0.5", "--seed", "7",
                     "--max-new-tokens", "9", "--min-label-mass", "0.01", "--closing", "needed", "--template",
                     template, "--ray", "ray://head:10001", "-q")
    assert isinstance(result.exception, _Built), result.output
    (args, kwargs), = built
    given = inspect.signature(real).bind(*args, **kwargs).arguments
    given.update(given.pop("extra", {}))
    assert {k: given.get(k) for k in ("judge", "store", "protocol", "batch_size", "temperature", "seed",
                                      "max_new_tokens", "min_label_mass", "closing", "ray_address")} == {
        "judge": "mock/hash", "store": store, "protocol": "cot", "batch_size": 3, "temperature": 0.5, "seed": 7,
        "max_new_tokens": 9, "min_label_mass": 0.01, "closing": "needed", "ray_address": "ray://head:10001"}
    # compare judges pairs only, so its --template is the pairwise one; the others take both kinds.
    templates = {"pairwise_template": template} if command == "compare" else {"pointwise_template": template}
    assert {k: given.get(k) for k in templates} == templates
    if command in ("audit", "rank", "report"):
        help_text = _invoke(command, "--help").output
        assert "--pairwise-template" in help_text


class _Batches(MockBackend):
    """The deterministic mock judge, recording how many prompts each backend call gets."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.batches: list[int] = []

    def label_logprobs(self, requests: Any) -> Any:
        self.batches.append(len(requests))
        return super().label_logprobs(requests)


@pytest.fixture
def batches() -> Iterator[_Batches]:
    backend = _Batches("batches")
    register_mock("batches", backend)
    try:
        yield backend
    finally:
        register_mock("batches", None)


def _report(tmp_path: Path, items_file: Path, *args: str | Path) -> Any:
    result = _invoke("report", items_file, "-j", "mock/batches", "--store", tmp_path / "s.sqlite", "--html",
                     tmp_path / "r.html", "--scales", "5", "--bootstrap", "0", "-q", *args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.html").exists()
    return result


def test_report_honours_batch_size(tmp_path: Path, items_file: Path, batches: _Batches) -> None:
    _report(tmp_path / "default", items_file)
    assert max(batches.batches) > 3  # 5 responses and 8 ordered pairs: the default batch holds more than 3
    batches.batches.clear()
    _report(tmp_path, items_file, "--batch-size", "3")
    assert batches.batches and max(batches.batches) == 3


def test_report_honours_templates(tmp_path: Path, items_file: Path, batches: _Batches) -> None:
    pointwise = _template(tmp_path, "pointwise", "POINTWISE-MARKER")
    pairwise = _template(tmp_path, "pairwise", "PAIRWISE-MARKER")
    _report(tmp_path, items_file, "--template", pointwise, "--pairwise-template", pairwise)
    prompts = [request.prompt for request in batches.history]
    assert len(prompts) == 5 + 8
    assert sum("POINTWISE-MARKER" in p for p in prompts) == 5 and sum("PAIRWISE-MARKER" in p for p in prompts) == 8
    with sqlite3.connect(tmp_path / "s.sqlite") as db:  # the prompts stored are the templates' too
        stored = [row[0] for row in db.execute("SELECT request FROM outputs")]
    assert len(stored) == 13 and all("POINTWISE-MARKER" in r or "PAIRWISE-MARKER" in r for r in stored)


def test_report_honours_closing_and_writes_its_records(tmp_path: Path, items_file: Path, batches: _Batches) -> None:
    out = tmp_path / "records.jsonl"
    _report(tmp_path, items_file, "--closing", "needed", "--out", out)
    rows = records(out)
    assert {r["kind"] for r in rows} == {"score", "compare"} and len(rows) == 5 + 4
    assert all(r.get("closing") == "needed" for r in rows)


def test_report_ray_takes_the_same_path_as_score(tmp_path: Path, items_file: Path, batches: _Batches,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Starting Ray takes minutes on a loaded machine (tests/test_ray.py covers the backend itself): the
    # ray backend is replaced by the mock, which records what the command asked for.
    from trustjudge import cli
    from trustjudge.backends import _ray

    asked: list[tuple[str, str | None]] = []
    engines: list[int] = []

    def fake_ray_backend(inner: str, address: str | None) -> MockBackend:
        asked.append((inner, address))
        return batches

    def keep(*args: Any, **kwargs: Any) -> Any:
        judge = real(*args, **kwargs)
        engines.append(judge.engine.batch_size)
        return judge

    real = cli._make_judge
    monkeypatch.setattr(_ray, "ray_backend", fake_ray_backend)
    monkeypatch.setattr(cli, "_make_judge", keep)
    _report(tmp_path, items_file, "--ray")
    _report(tmp_path / "cluster", items_file, "--ray", "ray://head:10001")
    score = _invoke("score", items_file, "-j", "mock/batches", "--store", tmp_path / "s.sqlite", "-q", "--ray")
    assert score.exit_code == 0, score.output
    assert asked == [("mock/batches", None), ("mock/batches", "ray://head:10001"), ("mock/batches", None)]
    assert engines == [256, 256, 256]  # whole chunks per Ray job, as for score
