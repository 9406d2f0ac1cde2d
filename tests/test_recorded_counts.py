"""A recorded judge asks no model (issue 39): its lookups are counted as recorded, never as model calls, in every
summary a command prints and in the cascade's summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import write_jsonl
from tests.test_trust import _pair_items
from trustjudge.cli import cli


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, str]:
    rows = _pair_items(6 if "cascade" not in tmp_path.name else 80)
    items = write_jsonl(tmp_path / "items.jsonl", rows)
    verdicts = write_jsonl(tmp_path / "rec.jsonl", [  # the human's verdict, as a sure judge would give
        {"item_id": r["id"], "a": "a", "b": "b", "verdict": "A" if r["pairs"][0]["human"] == "first" else "B"}
        for r in rows])
    return items, f"recorded/{verdicts}"


def _said(result: object) -> str:
    return " ".join(getattr(result, "output", "").split())


def test_compare_counts_recorded_lookups_not_model_calls(tmp_path: Path, recorded: tuple[Path, str]) -> None:
    items, judge = recorded
    args = ["compare", str(items), "-j", judge, "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "v")]
    first = _said(CliRunner().invoke(cli, args))
    assert "model calls: 0 (labels 0, generations 0); recorded lookups: 12; from store: 0" in first, first
    again = _said(CliRunner().invoke(cli, args))
    assert "model calls: 0 (labels 0, generations 0); from store: 12" in again and "recorded lookups" not in again


def test_calibrate_and_select_count_recorded_lookups(tmp_path: Path, recorded: tuple[Path, str]) -> None:
    items, judge = recorded
    store = str(tmp_path / "s.sqlite")
    cal = CliRunner().invoke(cli, ["calibrate", str(items), "-j", judge, "--store", store, "--out",
                                   str(tmp_path / "cal.json")])
    assert "model calls 0, recorded lookups 12, from store 0" in _said(cal), _said(cal)
    other = str(tmp_path / "other.sqlite")
    sel = CliRunner().invoke(cli, ["select", str(items), "-j", judge, "--store", other, "--calibration",
                                   str(tmp_path / "cal.json"), "--out", str(tmp_path / "v.jsonl")])
    assert "model calls 0, recorded lookups 12, from store 0" in _said(sel), _said(sel)


def test_a_cascade_tier_of_recorded_verdicts_makes_no_model_call(tmp_path: Path, recorded: tuple[Path, str]) -> None:
    items, judge = recorded
    store = str(tmp_path / "s.sqlite")
    for name, out in (("mock/hash", "c1.json"), (judge, "c2.json")):
        done = CliRunner().invoke(cli, ["calibrate", str(items), "-j", name, "--store", store, "--out",
                                        str(tmp_path / out), "-q"])
        assert done.exit_code == 0, done.output
    result = CliRunner().invoke(cli, ["select", str(items), "--cascade", f"mock/hash,{judge}", "--calibration",
                                      str(tmp_path / "c1.json"), "--calibration", str(tmp_path / "c2.json"),
                                      "--target-agreement", "0.5", "--store", str(tmp_path / "fresh.sqlite"),
                                      "--summary", str(tmp_path / "sum.json"), "--out", str(tmp_path / "v.jsonl")])
    assert result.exit_code == 0, result.output
    tiers = json.loads((tmp_path / "sum.json").read_text())["tiers"]
    assert tiers[0]["model_calls"] == 160 and tiers[0]["recorded_lookups"] == 0  # both orders of 80 pairs
    assert tiers[1]["model_calls"] == 0 and tiers[1]["recorded_lookups"] == 2 * tiers[1]["asked"]


def test_dry_run_says_recorded_lookups_apart_from_model_calls(tmp_path: Path, recorded: tuple[Path, str]) -> None:
    items, judge = recorded
    args = ["compare", str(items), "-j", judge, "--store", str(tmp_path / "s.sqlite"), "--dry-run"]
    said = _said(CliRunner().invoke(cli, args))
    assert "model calls to make │ 0 │" in said and "recorded lookups to make │ 12 │" in said, said
