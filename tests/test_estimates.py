"""Time estimates: the store's measured speed, else the shipped figure, else the backend's default."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from trustjudge import Judge, MockBackend
from trustjudge.backends import _speeds
from trustjudge.backends._models import BUNDLED
from trustjudge.backends._speeds import MIN_MEASURED_TOKENS, Speed
from trustjudge.cli._common import duration
from trustjudge.engine._store import Store
from trustjudge.io._items import parse_record

ITEMS = [parse_record({"id": f"q{i}", "question": f"question {i} " * 5,
                         "responses": [{"id": "a", "text": "one two three " * (i + 1)},
                                       {"id": "b", "text": "four five"}]}, "test", i + 1)
         for i in range(3)]


def test_the_model_adds_per_call_and_per_token_costs() -> None:
    s = Speed(prompt_tokens_per_s=100, seconds_per_call=0.5, generated_tokens_per_s=10)
    assert s.seconds(4, 1000, 20) == pytest.approx(4 * 0.5 + 10 + 2)
    assert math.isnan(Speed(0).seconds(1, 1))
    assert Speed(100).seconds(0, 0, 50) == pytest.approx(5.0)  # generations at the prompt rate / 10 if unknown


def test_plan_uses_the_shipped_figure_then_the_stores_measurement(tmp_path: Path) -> None:
    hint = Speed(200.0, seconds_per_call=1.0, source="shipped figure for mock/x")
    j = Judge(MockBackend("est"), store=tmp_path / "s.sqlite")
    j.engine.speed_hint = hint
    plan = j.plan(ITEMS, "score")
    assert plan.speed == hint and not plan.measured
    assert plan.model_calls == 6 and plan.judgments_to_run == 6
    assert plan.estimated_seconds == pytest.approx(6 * 1.0 + plan.tokens_read_to_run / 200.0)
    # Responses to one question share the prompt's head: the backend evaluates it once (its KV cache).
    assert 0 < plan.tokens_read_to_run < plan.prompt_tokens_to_run
    # A shipped figure wins over the store's measurement (it models per-call costs too).
    j.store.record_speed(j.backend.fingerprint, 5000, 1.0)
    assert j.plan(ITEMS, "score").speed == hint
    j.close()


def test_without_a_shipped_figure_the_stores_measurement_is_used_once_it_is_enough(tmp_path: Path) -> None:
    j = Judge(MockBackend("est1"), store=tmp_path / "s.sqlite")
    # Too few tokens timed in the store: the backend's default.
    j.store.record_speed(j.backend.fingerprint, MIN_MEASURED_TOKENS - 1, 1.0)
    assert "default estimate" in j.plan(ITEMS, "score").speed.source
    # Enough: the store's own rate, named as such.
    j.store.record_speed(j.backend.fingerprint, 1, 9.0)  # now 1000 tokens in 10 s
    measured = j.plan(ITEMS, "score")
    assert measured.measured and measured.tokens_per_s == pytest.approx(100.0)
    assert "measured in this store" in measured.speed.source
    j.close()


def test_without_a_figure_the_backend_default_is_named(tmp_path: Path) -> None:
    j = Judge(MockBackend("est2"), store=tmp_path / "s.sqlite")
    plan = j.plan(ITEMS, "compare")
    assert plan.speed.prompt_tokens_per_s == j.backend.default_tokens_per_s
    assert "default estimate for MockBackend" in plan.speed.source
    j.close()


def test_a_stored_judgment_costs_nothing_in_the_estimate(tmp_path: Path) -> None:
    j = Judge(MockBackend("est3"), store=tmp_path / "s.sqlite")
    j.engine.speed_hint = Speed(100.0, seconds_per_call=2.0)
    before = j.plan(ITEMS, "score")
    list(j.score(ITEMS[:1]))
    after = j.plan(ITEMS, "score")
    assert after.stored == 2 and after.model_calls == before.model_calls - 2
    assert after.estimated_seconds < before.estimated_seconds
    j.close()


def test_cot_counts_two_calls_and_the_critiques(tmp_path: Path) -> None:
    j = Judge(MockBackend("est4"), store=tmp_path / "s.sqlite", protocol="cot", max_new_tokens=64)
    j.engine.speed_hint = Speed(100.0, seconds_per_call=0.0, generated_tokens_per_s=8.0)
    plan = j.plan(ITEMS, "score")
    assert plan.model_calls == 12 and plan.generated_tokens_to_run == 6 * 64
    assert 6 * 64 < plan.tokens_read_to_run <= 2 * plan.prompt_tokens_to_run + 6 * 64
    assert plan.estimated_seconds == pytest.approx(plan.tokens_read_to_run / 100 + 6 * 64 / 8)
    j.close()


def test_shipped_names_where_the_figure_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(_speeds.MEASURED, "llamacpp/x", Speed(42.0, 0.1))
    monkeypatch.setattr(_speeds, "MEASURED_ON", "2026-12-03, 2 cores")
    got = _speeds.shipped("llamacpp/x")
    assert got is not None and got.prompt_tokens_per_s == 42.0
    assert got.source == "shipped figure for llamacpp/x (bench/estimates.py, 2026-12-03, 2 cores)"
    assert _speeds.shipped("llamacpp/unknown") is None


def test_duration_reads_like_a_clock() -> None:
    assert [duration(x) for x in (4.4, 65, 3599.6, 7620)] == ["4 s", "1 min 05 s", "1 h 00 min", "2 h 07 min"]


def test_dry_run_says_where_the_speed_comes_from(tmp_path: Path, items_file: Path) -> None:
    store = tmp_path / "s.sqlite"
    Store(store).close()
    plan = subprocess.run([sys.executable, "-m", "trustjudge", "score", str(items_file), "--judge", "mock/hash",
                           "--store", str(store), "--dry-run"], capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    assert "speed from" in plan.stdout and "default estimate for MockBackend" in plan.stdout
    assert "estimated time" in plan.stdout


def test_the_store_measures_speed_in_the_unit_the_estimates_use(tmp_path: Path) -> None:
    # Tokens a prompt shares with the one run before it are in the backend's KV cache: neither the plan nor
    # the measurement counts them, so a measured rate applies to the plan's tokens as they are.
    j = Judge(MockBackend("est5"), store=tmp_path / "s.sqlite")
    planned = j.plan(ITEMS, "score")
    list(j.score(ITEMS))
    measured = j.store.measured_speed(j.backend.fingerprint)
    assert measured is not None
    assert measured[0] == planned.tokens_read_to_run < j.stats.prompt_tokens
    j.close()


def test_every_bundled_judge_has_a_shipped_figure() -> None:
    # bench/estimates.py writes the table; a bundled judge without a row would fall back to a guess.
    names = {f"{prefix}/{name}" for name in BUNDLED for prefix in ("llamacpp", "hf")}
    missing = names - set(_speeds.MEASURED)
    assert not missing, f"run bench/estimates.py for {sorted(missing)}"
    assert all(s.prompt_tokens_per_s > 0 and s.seconds_per_call >= 0 for s in _speeds.MEASURED.values())


