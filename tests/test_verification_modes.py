"""Verification samples of every calibrated mode (issue 34): checks, claims, scores (within the tolerance) and
criteria are sampled through the mode's calibration units, written in the items format with their labels
empty, and tested on planted labels where the truth is known."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from trustjudge.audit._calibration import fit_binary, fit_vector
from trustjudge.audit._trust import Calibration
from trustjudge.cli import cli
from trustjudge.errors import ConfigError

N, KEPT = 120, 90
LEVELS = ["1", "2", "3", "4", "5"]


def _invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _calibration(mode: str) -> Calibration:
    """A calibration file of ``mode`` (its map fitted on random rows: the sample reads only its classes, levels
    and tolerance)."""
    rng = np.random.default_rng(0)
    if mode == "checklist":
        p = rng.uniform(0.05, 0.95, 40)
        human = (rng.uniform(size=40) < p).astype(int)
        cmap = fit_binary(p, human, "platt", ("fail", "pass"))
        probs = np.c_[1 - p, p]
    else:
        classes = ("SUPPORTED", "PARTIAL", "UNSUPPORTED") if mode == "claims" else tuple(LEVELS)
        probs = rng.dirichlet(np.ones(len(classes)), 40)
        human = np.array([rng.choice(len(classes), p=row) for row in probs])
        cmap = fit_vector(probs, human, classes)
    pointwise = mode in ("score", "criteria")
    return Calibration(mode, "mock/hash", "mock:hash", "t", "direct", cmap, probs.tolist(), human.tolist(),
                       levels=[1.0, 2.0, 3.0, 4.0, 5.0] if pointwise else None, tolerance=1.0 if pointwise else None)


def _block(i: int, verdict: str) -> dict[str, Any]:
    kept = i < KEPT
    return {"probabilities": None, "verdict": verdict, "confidence": 0.9 if kept else 0.4,
            "abstained": None if kept else "below_threshold"}


def _records(mode: str) -> list[dict[str, Any]]:
    """A run's annotated records: two checks (k1 passes, k2 fails), one claim (SUPPORTED), a score of 3, or two
    criteria scored 3 per response; the first KEPT responses' verdicts kept."""
    out = []
    for i in range(N):
        rec: dict[str, Any] = {"item_id": f"q{i}", "response_id": "r"}
        if mode == "checklist":
            rec["checks"] = [{"id": cid, "text": f"Check {cid}?", "p_pass": p, "unscored": None, "human": None,
                              "calibrated": _block(i, v)} for cid, p, v in (("k1", 0.9, "pass"), ("k2", 0.1, "fail"))]
        elif mode == "claims":
            rec["claims"] = [{"text": f"Claim {i}.", "probabilities": {"SUPPORTED": 0.8, "PARTIAL": 0.1,
                                                                      "UNSUPPORTED": 0.1},
                              "unscored": None, "human": None, "calibrated": _block(i, "SUPPORTED")}]
        else:
            dist = dict(zip(LEVELS, [0.05, 0.1, 0.6, 0.2, 0.05]))
            part = {"scores": {"discrete": 3.0}, "unscored": None, "distribution": dist, "calibrated": _block(i, "3")}
            if mode == "score":
                rec.update(part, human_score=None)
            else:
                rec["criteria"] = [{"name": name, **part, "human": None} for name in ("clarity", "accuracy")]
        out.append(rec)
    return out


def _items(mode: str) -> list[dict[str, Any]]:
    rows = []
    for i in range(N):
        row: dict[str, Any] = {"id": f"q{i}", "question": f"Question {i}?",
                               "responses": [{"id": "r", "text": f"Answer {i}."}]}
        if mode == "checklist":
            row["checklist"] = [{"id": "k1", "text": "Check k1?"}, {"id": "k2", "text": "Check k2?"}]
        rows.append(row)
    return rows


# Whether the human agrees with the judge's verdict on each part: (item index, part) -> bool.
Truth = Callable[[int, str], bool]


def _label(mode: str, response: dict[str, Any], i: int, agree: Truth) -> None:
    """Write the planted human label of each sampled part of ``response`` (item ``i``)."""
    if mode == "checklist":
        response["human_checks"] = {cid: (cid == "k1") == agree(i, cid) for cid in response["human_checks"]}
    elif mode == "claims":
        for claim in response["claims"]:
            claim["human"] = "SUPPORTED" if agree(i, claim["text"]) else "UNSUPPORTED"
    elif mode == "score":
        response["human_score"] = (4 if i % 2 else 2) if agree(i, "") else 5  # within 1 of 3, or 2 away
    else:
        response["human_criteria"] = {name: 3.4 if agree(i, name) else 1 for name in response["human_criteria"]}


def _part(mode: str, unit: dict[str, Any]) -> str:
    return "" if mode == "score" else unit["part"].get("id") or unit["part"].get("name") or unit["part"]["text"]


@pytest.mark.parametrize("mode", ["checklist", "claims", "score", "criteria"])
@pytest.mark.parametrize(("agree", "result"), [
    (lambda i, part: (i + len(part)) % 5 < 3, "refuted"),  # 60% agree, target 0.8
    (lambda i, part: (i + len(part)) % 20 != 0, "holds"),  # 95% agree
])
def test_a_sample_of_every_calibrated_mode_is_labelled_and_tested(tmp_path: Path, mode: str, agree: Truth,
                                                                  result: str) -> None:
    cal = tmp_path / "cal.json"
    _calibration(mode).save(cal)
    verdicts, items = tmp_path / "verdicts.jsonl", tmp_path / "items.jsonl"
    verdicts.write_text("".join(json.dumps(r) + "\n" for r in _records(mode)))
    items.write_text("".join(json.dumps(r) + "\n" for r in _items(mode)))
    sample = tmp_path / "sample.jsonl"
    drew = _invoke("sample", verdicts, "--items", items, "--calibration", cal, "--out", sample,
                   "--target-agreement", 0.8, "--risk-delta", 0.1, "--size", 60)
    assert drew.exit_code == 0, drew.output
    key = json.loads((tmp_path / "sample.jsonl.key.json").read_text())
    assert key["mode"] == mode and [u["stratum"] for u in key["units"]].count("kept") == 60
    rows = [json.loads(line) for line in sample.read_text().splitlines()]
    text = sample.read_text()
    assert "calibrated" not in text and "verdict" not in text  # the labellers do not see the judge's verdicts
    for row in rows:
        (response,) = row["responses"]
        _label(mode, response, int(row["id"][1:]), agree)
    sample.write_text("".join(json.dumps(r) + "\n" for r in rows))
    checked = _invoke("check-sample", sample, "--out", tmp_path / "result.json")
    assert checked.exit_code == 0, checked.output
    out = json.loads((tmp_path / "result.json").read_text())
    kept = [u for u in key["units"] if u["stratum"] == "kept"]
    assert out["result"] == result and out["kept_labelled"] == 60 and out["kept_unlabelled"] == 0
    assert out["kept_agreed"] == sum(agree(int(u["key"][0][1:]), _part(mode, u)) for u in kept)


def test_a_sampled_score_outside_the_scale_is_refused_naming_the_verdict(tmp_path: Path) -> None:
    cal = tmp_path / "cal.json"
    _calibration("score").save(cal)
    verdicts, items = tmp_path / "verdicts.jsonl", tmp_path / "items.jsonl"
    verdicts.write_text("".join(json.dumps(r) + "\n" for r in _records("score")))
    items.write_text("".join(json.dumps(r) + "\n" for r in _items("score")))
    sample = tmp_path / "sample.jsonl"
    _invoke("sample", verdicts, "--items", items, "--calibration", cal, "--out", sample, "--target-agreement", 0.8,
            "--risk-delta", 0.1, "--size", 5)
    rows = [json.loads(line) for line in sample.read_text().splitlines()]
    rows[0]["responses"][0]["human_score"] = 9
    sample.write_text("".join(json.dumps(r) + "\n" for r in rows))
    where = r"sample\.jsonl: line 1: item 'q\d+', response 'r': "
    with pytest.raises(ConfigError, match=where + r"the score 9(\.0)? lies outside the scale 1\.\.5"):
        _invoke("check-sample", sample)
    missing = CliRunner().invoke(cli, ["sample", str(verdicts), "--items", str(items), "--out", str(sample),
                                       "--target-agreement", "0.8", "--risk-delta", "0.1"])
    assert missing.exit_code != 0  # without the calibration, score records are not pairs
