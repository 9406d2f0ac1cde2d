"""The verification sample from Python (issue 34: in the library as in the CLI): `trustjudge.verification_sample`
draws from `Judge.select`'s records what `trustjudge sample` draws from its --out, refuses records its
calibration did not annotate, and `VerificationSample.check` tests the labels exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_verification_ledger import _invoke, _other_calibration, _pairs
from trustjudge import Calibration, ConfigError, Judge, load_items, verification_sample

FLIP = {"first": "second", "second": "first", "tie": "first"}


def test_a_sample_of_a_select_run_is_the_cli_s_and_its_check_is_exact(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    cal_path = _other_calibration(tmp_path, store)  # it abstains on the judge's unsure verdicts
    cal, new = Calibration.load(cal_path), _pairs(tmp_path / "new.jsonl", 150)
    with Judge("mock/hash", store=store) as judge:
        records, summary = judge.select(load_items(new), cal, target=0.8, delta=0.1)
        assert summary["kept"] >= 40 and summary["kept"] < 150, summary["kept"]
    drawn = verification_sample(records, cal, target=0.8, delta=0.1, size=40, seed=5)
    assert drawn.run["kept"] == summary["kept"] and drawn.size == 40
    kept = [u for u in drawn.units if u["stratum"] == "kept"]
    assert len(kept) == 40 and len(drawn.units) == 50  # and a quarter as many abstained
    # the CLI draws the same verdicts from the same records written out
    out = tmp_path / "v.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert _invoke("sample", out, "--items", new, "--calibration", cal_path, "--target-agreement", 0.8,
                   "--risk-delta", 0.1, "--size", 40, "--seed", 5, "--out", tmp_path / "s.jsonl").exit_code == 0
    assert json.loads((tmp_path / "s.jsonl.key.json").read_text())["units"] == drawn.units
    # every kept label agrees: holds (P(Bin(40, 0.8) >= 40) = 0.8^40 <= 0.1); 28 of 40 (0.7): refuted
    agreeing = {tuple(u["key"]): u["verdict"] for u in drawn.units}
    held = drawn.check(agreeing)
    assert held["result"] == "holds" and held["kept_agreed"] == 40 and held["p_below_target"] == pytest.approx(
        0.8 ** 40)
    some = {tuple(u["key"]): u["verdict"] if i % 10 < 7 else FLIP[u["verdict"]] for i, u in enumerate(kept)}
    refuted = drawn.check(some)
    assert refuted["result"] == "refuted" and refuted["kept_agreed"] == 28 and refuted["kept_labelled"] == 40
    assert refuted["abstained"]["labelled"] == 0  # the abstained units were not labelled


def test_records_the_calibration_did_not_annotate_are_refused_naming_the_line(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    cal = Calibration.load(_other_calibration(tmp_path, store))
    with Judge("mock/hash", store=store) as judge:
        records, _ = judge.select(load_items(_pairs(tmp_path / "new.jsonl", 60)), cal, target=0.8, delta=0.1)
    with pytest.raises(ConfigError, match=r"records: line \d+: field 'calibrated\.abstained' is "
                       r"'below_threshold' \(abstained\), but the calibration at target 0\.6"):
        verification_sample(records, cal, target=0.6, delta=0.1, size=10)  # another target than the run's
    edited = json.loads(json.dumps(records))
    edited[4]["calibrated"]["verdict"] = FLIP[edited[4]["calibrated"]["verdict"]]
    with pytest.raises(ConfigError, match=r"records: line 5: field 'calibrated\.verdict'"):
        verification_sample(edited, cal, target=0.8, delta=0.1, size=10)
