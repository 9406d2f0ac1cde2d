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

from trustjudge.audit._sample import verdict_units
from trustjudge.audit._trust import Calibration, annotate, fit_map
from trustjudge.cli import cli
from trustjudge.errors import ConfigError

N, KEPT = 120, 90
LEVELS = ["1", "2", "3", "4", "5"]


def _invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


# Each mode's raw probabilities of a sure verdict (the kept ones: a check k1 that passes, k2 that fails, a
# SUPPORTED claim, a score of 3) and of an unsure one (abstained on at the target).
SURE = {"checklist": {"k1": 0.95, "k2": 0.05}, "claims": [0.9, 0.05, 0.05],
        "score": [0.05, 0.1, 0.6, 0.2, 0.05]}
UNSURE = {"checklist": {"k1": 0.6, "k2": 0.4}, "claims": [0.4, 0.3, 0.3], "score": [0.2] * 5}


def _calibration(mode: str) -> Calibration:
    """A calibration of ``mode`` whose set can support target 0.8 at delta 0.1: its sure verdicts always agree
    with the human, its unsure ones about half the time."""
    if mode == "checklist":
        classes: tuple[str, ...] = ("fail", "pass")
        rows = [(p, int(p > 0.5) if p in (0.95, 0.05) else j % 2) for p in (0.95, 0.05, 0.6, 0.4) for j in range(50)]
        probs, human = [[1 - p, p] for p, _ in rows], [h for _, h in rows]
    else:
        key = "claims" if mode == "claims" else "score"
        classes = ("SUPPORTED", "PARTIAL", "UNSUPPORTED") if mode == "claims" else tuple(LEVELS)
        sure, unsure = SURE[key], UNSURE[key]
        top = int(np.argmax(sure))
        flipped = list(reversed(sure))  # the other end of the classes, sure too
        probs = [sure] * 50 + [flipped] * 50 + [unsure] * 100
        human = [top] * 50 + [len(classes) - 1 - top] * 50 + [j % len(classes) for j in range(100)]
    pointwise = mode in ("score", "criteria")
    cmap = fit_map(mode, "vector" if pointwise else "platt", classes, probs, human)
    keys: list[list[str | int]] = [[f"c{j}", "r"] for j in range(len(human))]  # each a labelled verdict of its own
    return Calibration(mode, "mock/hash", "mock:hash", "t", "direct", cmap, probs, human, keys=keys,
                       levels=[1.0, 2.0, 3.0, 4.0, 5.0] if pointwise else None, tolerance=1.0 if pointwise else None)


def _raw(mode: str) -> list[dict[str, Any]]:
    """A run's records as the judge writes them: two checks (k1, k2), one claim, a score, or two criteria scored
    per response; the first KEPT responses' verdicts sure, the others unsure."""
    out = []
    for i in range(N):
        rec: dict[str, Any] = {"item_id": f"q{i}", "response_id": "r"}
        probs = SURE if i < KEPT else UNSURE
        if mode == "checklist":
            rec["checks"] = [{"id": cid, "text": f"Check {cid}?", "p_pass": p, "unscored": None, "human": None}
                             for cid, p in probs["checklist"].items()]
        elif mode == "claims":
            rec["claims"] = [{"text": f"Claim {i}.", "unscored": None, "human": None,
                              "probabilities": dict(zip(("SUPPORTED", "PARTIAL", "UNSUPPORTED"), probs["claims"]))}]
        else:
            part = {"scores": {"discrete": 3.0}, "unscored": None, "distribution": dict(zip(LEVELS, probs["score"]))}
            if mode == "score":
                rec.update(part, human_score=None)
            else:
                rec["criteria"] = [{"name": name, **part, "human": None} for name in ("clarity", "accuracy")]
        out.append(rec)
    return out


def _records(mode: str, cal: Calibration) -> list[dict[str, Any]]:
    """The run's records as `--calibration CAL --target-agreement 0.8 --risk-delta 0.1 --out` writes them (the
    library's own annotation and selection): the sure verdicts kept, the unsure ones abstained on."""
    out = annotate(mode, _raw(mode), cal, cal.selection(0.8, 0.1))
    kept = [u for u in verdict_units(mode, out, "run", cal.map.classes, cal.levels) if u["stratum"] == "kept"]
    assert {int(u["key"][0][1:]) < KEPT for u in kept} == {True} and len(kept) >= KEPT
    assert {u["verdict"] for u in kept} <= {"pass", "fail", "SUPPORTED", "3"}
    return out


def _write(tmp_path: Path, mode: str) -> tuple[Path, Path, Path]:
    """The calibration file, the run's annotated records and its items."""
    cal, verdicts, items = tmp_path / "cal.json", tmp_path / "verdicts.jsonl", tmp_path / "items.jsonl"
    calibration = _calibration(mode)
    calibration.save(cal)
    verdicts.write_text("".join(json.dumps(r) + "\n" for r in _records(mode, calibration)))
    items.write_text("".join(json.dumps(r) + "\n" for r in _items(mode)))
    return cal, verdicts, items


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
    cal, verdicts, items = _write(tmp_path, mode)
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
    cal, verdicts, items = _write(tmp_path, "score")
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


def _sample_exit(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str]:
    """`trustjudge sample ARGS` as the shell runs it: its exit status and its one-line error."""
    import sys

    from trustjudge.cli import main

    monkeypatch.setattr(sys, "argv", ["trustjudge", "sample", *map(str, args)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    return int(exit_info.value.code or 0), " ".join(capsys.readouterr().err.split())


def test_a_sample_under_a_calibration_that_did_not_annotate_the_records_is_refused_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cal, verdicts, items = _write(tmp_path, "checklist")
    other = tmp_path / "other.json"  # the same judging, another calibration set: its unsure verdicts agree too
    first = _calibration("checklist")
    human = [int(p[1] > 0.5) for p in first.probs]
    Calibration("checklist", "mock/hash", "mock:hash", "t", "direct",
                fit_map("checklist", "platt", first.map.classes, first.probs, human), first.probs, human,
                keys=first.keys).save(other)
    loaded = Calibration.load(other)
    again = annotate("checklist", _raw("checklist"), loaded, loaded.selection(0.8, 0.1))
    assert all(c["calibrated"]["abstained"] is None for r in again for c in r["checks"])  # it keeps every verdict
    sample = tmp_path / "sample.jsonl"
    common = ["--items", items, "--out", sample, "--target-agreement", 0.8, "--risk-delta", 0.1, "--size", 20]
    code, said = _sample_exit(monkeypatch, capsys, verdicts, "--calibration", other, *common)
    # before: exit 0, and check-sample then remembered the result beside other.json
    assert code == 2, said
    assert (f"{verdicts}: line {KEPT + 1}: field 'checks.0.calibrated.abstained' is 'below_threshold' (abstained), "
            f"but {other.resolve()} at target 0.8, delta 0.1 gives null (kept)") in said
    assert "give the calibration the run applied" in said and "--summary" in said
    assert not sample.exists() and not (tmp_path / "sample.jsonl.key.json").exists()
    assert not (tmp_path / "other.json.checks.json").exists()
    # another target than the run's is refused the same way (its kept verdicts are not these)
    code, said = _sample_exit(monkeypatch, capsys, verdicts, "--calibration", cal, *common[:4],
                              "--target-agreement", 0.6, "--risk-delta", 0.1)
    assert code == 2 and "at target 0.6, delta 0.1 gives" in said, said
    # the calibration the run applied samples them
    assert _invoke("sample", verdicts, "--calibration", cal, *common).exit_code == 0 and sample.exists()


@pytest.mark.parametrize(("line", "part", "field", "value", "message"), [
    (KEPT + 3, 1, "abstained", None, "is null (kept), but {cal} at target 0.8, delta 0.1 gives 'below_threshold'"),
    (4, 0, "abstained", "below_threshold", "is 'below_threshold' (abstained), but {cal} at target 0.8, delta 0.1 "
                                           "gives null (kept)"),
    (7, 1, "verdict", "pass", "is 'pass', but {cal} at target 0.8, delta 0.1 gives 'fail'"),
])
def test_a_hand_edited_kept_flag_or_verdict_is_refused_naming_the_line_and_field(
        tmp_path: Path, line: int, part: int, field: str, value: Any, message: str) -> None:
    cal, verdicts, items = _write(tmp_path, "checklist")
    rows = [json.loads(text) for text in verdicts.read_text().splitlines()]
    rows[line - 1]["checks"][part]["calibrated"][field] = value
    verdicts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    where = f"{verdicts}: line {line}: field 'checks.{part}.calibrated.{field}' "
    with pytest.raises(ConfigError) as refused:  # before: sampled, its check remembered for cal.json
        _invoke("sample", verdicts, "--items", items, "--calibration", cal, "--out", tmp_path / "s.jsonl",
                "--target-agreement", 0.8, "--risk-delta", 0.1, "--size", 20)
    assert where + message.format(cal=cal.resolve()) in str(refused.value)
    assert not (tmp_path / "s.jsonl.key.json").exists()
