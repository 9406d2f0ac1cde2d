"""A cascade's guarantee checked on the user's data (issue 34): `trustjudge sample` draws from a pairwise
cascade's records (kept: the verdicts a model tier decided; abstained: those left to people or to no tier) at
the cascade's own target and delta, and `check-sample` tests the machine verdicts' agreement exactly. A cascade
applies one calibration per tier, so the check is said, not remembered. Before, `sample` stopped at the cascade
summary with "field 'guarantee' is not an object"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tests.conftest import write_jsonl
from tests.test_cascade import pair_items, recorded_rows
from trustjudge.audit import _ledger as L
from trustjudge.cli import cli

FLIP = {"first": "second", "second": "first", "tie": "first"}


def _invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def cascade(tmp_path: Path) -> dict[str, Path]:
    """A real cascade, mock/hash -> recorded verdicts -> human, on 80 new pairs (labels known: the right answer);
    the first 30 have no recorded verdict, so what tier 1 passes on of them goes to people."""
    cal_items = write_jsonl(tmp_path / "cal.jsonl", pair_items(range(100, 300)))
    new = write_jsonl(tmp_path / "new.jsonl", pair_items(range(80)))
    rec = write_jsonl(tmp_path / "rec.jsonl", recorded_rows([*range(100, 300), *range(30, 80)]))  # q0-q29: none
    store, recorded = tmp_path / "s.sqlite", f"recorded/{rec}"
    for judge, out in (("mock/hash", "cal1.json"), (recorded, "cal2.json")):
        assert _invoke("calibrate", cal_items, "-j", judge, "--store", store, "--out", tmp_path / out,
                       "-q").exit_code == 0
    done = _invoke("select", new, "--cascade", f"mock/hash,{recorded},human", "--calibration", tmp_path / "cal1.json",
                   "--calibration", tmp_path / "cal2.json", "--target-agreement", 0.7, "--risk-delta", 0.1,
                   "--store", store, "--out", tmp_path / "out.jsonl", "--summary", tmp_path / "sum.json",
                   "--abstained-out", tmp_path / "todo.jsonl")
    assert done.exit_code == 0, done.output
    return {"items": new, "out": tmp_path / "out.jsonl", "summary": tmp_path / "sum.json",
            "cal1": tmp_path / "cal1.json", "sample": tmp_path / "sample.jsonl"}


def _truth(item_id: str) -> str:
    return "first" if int(item_id[1:]) % 2 == 0 else "second"  # pair_items: the right answer


def test_a_cascade_run_is_sampled_by_tier_and_its_machine_verdicts_tested(cascade: dict[str, Path]) -> None:
    records = _lines(cascade["out"])
    machine = {r["item_id"] for r in records if r["tier_judge"] != "human" and r["calibrated"]["abstained"] is None}
    assert 10 <= len(machine) < len(records), len(machine)  # both strata present
    drawn = _invoke("sample", cascade["out"], "--items", cascade["items"], "--summary", cascade["summary"],
                    "--out", cascade["sample"], "--size", 10, "--abstained-size", 5)
    assert drawn.exit_code == 0, drawn.output
    key = json.loads(cascade["sample"].with_name("sample.jsonl.key.json").read_text())
    assert key["cascade"][-1] == "human" and "calibration" not in key
    assert key["target_agreement"] == 0.7 and key["delta"] == 0.1  # the cascade's own
    kept = [u for u in key["units"] if u["stratum"] == "kept"]
    assert len(kept) == 10 and {u["key"][0] for u in kept} <= machine
    assert all(u["key"][0] not in machine for u in key["units"] if u["stratum"] == "abstained")
    rows = _lines(cascade["sample"])
    for row in rows:
        row["pairs"][0]["human"] = _truth(row["id"])
    cascade["sample"].write_text("".join(json.dumps(r) + "\n" for r in rows))
    checked = _invoke("check-sample", cascade["sample"], "--out", cascade["sample"].with_name("result.json"))
    assert checked.exit_code == 0, checked.output
    result = json.loads(cascade["sample"].with_name("result.json").read_text())
    assert result["kept_labelled"] == 10
    assert result["kept_agreed"] == sum(u["verdict"] == _truth(u["key"][0]) for u in kept)
    assert "not remembered: a cascade's check" in checked.stderr.replace("\n", " ")
    assert not L.ledger_path(cascade["cal1"]).exists()
    # the machine verdicts all contradicted by the labels: refuted
    for row in rows:
        unit = next(u for u in key["units"] if u["key"][0] == row["id"])
        row["pairs"][0]["human"] = FLIP[unit["verdict"]]
    cascade["sample"].write_text("".join(json.dumps(r) + "\n" for r in rows))
    refuted = _invoke("check-sample", cascade["sample"])
    assert refuted.exit_code == 0 and "REFUTED" in refuted.stderr, refuted.output


def test_a_cascade_sample_refuses_a_single_calibration(cascade: dict[str, Path]) -> None:
    res = _invoke("sample", cascade["out"], "--items", cascade["items"], "--summary", cascade["summary"],
                  "--calibration", cascade["cal1"], "--out", cascade["sample"])
    assert res.exit_code == 2 and "one calibration per model tier" in res.output, res.output
    assert not cascade["sample"].exists()
