"""A refuted guarantee is remembered (issue 34): `check-sample` writes its result beside the calibration file,
and every later run of that calibration on the same items says it on the guarantee line, in the summary and in
each record's calibrated block; a run on other items does not."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from trustjudge.audit import _ledger as L
from trustjudge.cli import cli
from trustjudge.errors import ConfigError


def _invoke(*args: Any) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _pairs(path: Path, n: int, start: int = 0, human: Any = None) -> Path:
    path.write_text("".join(json.dumps({
        "id": f"q{i}", "question": f"What is {i} + 2?",
        "responses": [{"id": "a", "text": f"It is {i + 2}."}, {"id": "b", "text": f"Maybe {i + 7}."}],
        "pairs": [{"first": "a", "second": "b", "human": None if human is None else human(i)}]}) + "\n"
        for i in range(start, start + n)))
    return path


def _calibrated(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A calibration of mock/hash whose labels are the judge's own verdicts (so that a target keeps most pairs),
    and the judge's verdict on each pair of new items."""
    store = tmp_path / "s.sqlite"
    raw = _pairs(tmp_path / "cal-raw.jsonl", 120, start=1000)
    assert _invoke("compare", raw, "-j", "mock/hash", "--store", store, "--out", tmp_path / "r.jsonl",
                   "-q").exit_code == 0
    verdict = {r["item_id"]: r["verdicts"]["likelihood"] for r in _lines(tmp_path / "r.jsonl")}
    labelled = _pairs(tmp_path / "cal.jsonl", 120, start=1000, human=lambda i: verdict[f"q{i}"])
    assert _invoke("calibrate", labelled, "-j", "mock/hash", "--store", store, "--out",
                   tmp_path / "cal.json").exit_code == 0
    return store, tmp_path / "cal.json", verdict


def _run(items: Path, store: Path, cal: Path, out: Path, summary: Path) -> Result:
    done = _invoke("compare", items, "-j", "mock/hash", "--store", store, "--calibration", cal,
                   "--target-agreement", 0.8, "--risk-delta", 0.1, "--out", out, "--summary", summary)
    assert done.exit_code == 0, done.output
    return done


def test_a_refuted_guarantee_is_said_by_every_later_run_on_the_same_data_and_not_on_other_data(
        tmp_path: Path) -> None:
    store, cal, _ = _calibrated(tmp_path)
    new = _pairs(tmp_path / "new.jsonl", 150)
    first = _run(new, store, cal, tmp_path / "v.jsonl", tmp_path / "sum.json")
    assert "check-sample" not in first.stderr  # nothing checked yet
    records = _lines(tmp_path / "v.jsonl")
    kept = sum(r["calibrated"]["abstained"] is None for r in records)
    assert kept >= 60, kept
    sample = tmp_path / "sample.jsonl"
    assert _invoke("sample", tmp_path / "v.jsonl", "--items", new, "--summary", tmp_path / "sum.json",
                   "--out", sample, "--size", 50).exit_code == 0
    # planted labels: the judge's verdict on 3 pairs in 5, the other response on the rest (agreement 0.6)
    said = {r["item_id"]: r["calibrated"]["verdict"] for r in records}
    rows = _lines(sample)
    for row in rows:
        for pair in row["pairs"]:
            i = int(row["id"][1:])
            pair["human"] = said[row["id"]] if i % 5 < 3 else ("second" if said[row["id"]] == "first" else "first")
    sample.write_text("".join(json.dumps(r) + "\n" for r in rows))
    checked = _invoke("check-sample", sample)
    assert checked.exit_code == 0 and "REFUTED" in checked.stderr, checked.output
    ledger = L.ledger_path(cal)
    assert ledger.exists() and f"remembered in {ledger}" in checked.stderr.replace("\n", "")
    (entry,) = L.read(ledger)
    assert entry["result"] == "refuted" and entry["kept_labelled"] == 50

    again = _run(new, store, cal, tmp_path / "v2.jsonl", tmp_path / "sum2.json")
    notice = (f"guarantee refuted by check-sample on 50 labels: agreement {entry['agreement']:.3f} < target 0.8")
    assert notice in again.stderr.replace("\n", "")
    summary = json.loads((tmp_path / "sum2.json").read_text())
    assert summary["verification"]["result"] == "refuted" and summary["verification"]["notice"].startswith(notice)
    assert all(r["calibrated"]["verification"]["result"] == "refuted" for r in _lines(tmp_path / "v2.jsonl"))

    other = _pairs(tmp_path / "other.jsonl", 150, start=500)  # other data, same calibration: nothing to say
    elsewhere = _run(other, store, cal, tmp_path / "v3.jsonl", tmp_path / "sum3.json")
    assert "check-sample on" not in elsewhere.stderr
    assert "verification" not in json.loads((tmp_path / "sum3.json").read_text())
    assert all("verification" not in r["calibrated"] for r in _lines(tmp_path / "v3.jsonl"))

    selected = _invoke("select", new, "-j", "mock/hash", "--store", store, "--calibration", cal,
                       "--target-agreement", 0.8, "--out", tmp_path / "v4.jsonl", "--summary", tmp_path / "sum4.json")
    assert notice in selected.stderr.replace("\n", "")
    assert all(r["calibrated"]["verification"]["result"] == "refuted" for r in _lines(tmp_path / "v4.jsonl"))
    # a sample of the select run, drawn from its --summary alone, is remembered beside the same file
    assert _invoke("sample", tmp_path / "v4.jsonl", "--items", new, "--summary", tmp_path / "sum4.json",
                   "--out", tmp_path / "s4.jsonl", "--size", 20).exit_code == 0
    assert json.loads((tmp_path / "s4.jsonl.key.json").read_text())["calibration"]["file"] == str(cal.resolve())


def test_a_bad_ledger_is_refused_naming_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "cal.json.checks.json"
    good = {"calibration_data_hash": "abc", "items_sha256": "def", "result": "refuted", "kept_labelled": 10,
            "kept_agreed": 5, "agreement": 0.5, "target_agreement": 0.8, "delta": 0.1}
    L.remember(path, good)
    assert L.lookup(path, "abc", "def") is not None and L.lookup(path, "abc", "other") is None
    data = json.loads(path.read_text())
    data["checks"][0]["result"] = "maybe"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"cal\.json\.checks\.json: checks\[0\]: field 'result' is 'maybe'"):
        L.read(path)
    data["checks"][0] = {**good, "agreement": 2}
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"checks\[0\]: field 'agreement' is not a number"):
        L.lookup(path, "abc", "def")


def _sure_labelled(tmp_path: Path, store: Path, stem: str, n: int, start: int) -> Path:
    """``n`` pairs judged by the hash judge and labelled with its verdict where it is sure (top probability
    >= 0.42), with a wrong one elsewhere: a calibration on them keeps only the sure verdicts."""
    raw = _pairs(tmp_path / f"{stem}-raw.jsonl", n, start=start)
    judged = tmp_path / f"{stem}-judged.jsonl"
    assert _invoke("compare", raw, "-j", "mock/hash", "--store", store, "--out", judged, "-q").exit_code == 0
    wrong = {"first": "second", "second": "tie", "tie": "first"}
    said = {r["item_id"]: r["verdicts"]["likelihood"] if max(r["probabilities"].values()) >= 0.42
            else wrong[r["verdicts"]["likelihood"]] for r in _lines(judged)}
    return _pairs(tmp_path / f"{stem}-cal.jsonl", n, start=start, human=lambda i: said[f"q{i}"])


def _other_calibration(tmp_path: Path, store: Path) -> Path:
    """Another calibration of the same judging, whose labels disagree with the judge's less confident verdicts:
    at the same target it abstains on verdicts the first one keeps."""
    labelled = _sure_labelled(tmp_path, store, "other", 200, 3000)
    assert _invoke("calibrate", labelled, "-j", "mock/hash", "--store", store, "--out",
                   tmp_path / "other.json").exit_code == 0
    return tmp_path / "other.json"


def test_a_sample_is_drawn_only_under_the_calibration_that_annotated_the_run(tmp_path: Path) -> None:
    store, cal, _ = _calibrated(tmp_path)
    new = _pairs(tmp_path / "new.jsonl", 150)
    _run(new, store, cal, tmp_path / "v.jsonl", tmp_path / "sum.json")
    other = _other_calibration(tmp_path, store)
    verdicts, sample = tmp_path / "v.jsonl", tmp_path / "sample.jsonl"
    levels = ["--target-agreement", 0.8, "--risk-delta", 0.1, "--size", 30]
    # another calibration, no --summary: before, sampled, and check-sample remembered its result beside other.json
    wrong = CliRunner().invoke(cli, [str(a) for a in ("sample", verdicts, "--items", new, "--calibration", other,
                                                      "--out", sample, *levels)])
    assert wrong.exit_code != 0 and isinstance(wrong.exception, ConfigError)
    assert re.search(rf"v\.jsonl: line \d+: field 'calibrated\.abstained' is null \(kept\), but "
                     rf"{re.escape(str(other.resolve()))} at target 0\.8, delta 0\.1 gives 'below_threshold'",
                     str(wrong.exception)), wrong.exception
    assert not sample.exists() and not (tmp_path / "sample.jsonl.key.json").exists()
    assert not L.ledger_path(other).exists()
    # the calibration the run applied, no --summary: sampled, checked and remembered beside it, end to end
    assert _invoke("sample", verdicts, "--items", new, "--calibration", cal, "--out", sample, *levels).exit_code == 0
    said = {r["item_id"]: r["calibrated"]["verdict"] for r in _lines(verdicts)}
    rows = _lines(sample)
    for row in rows:  # planted: every label the judge's verdict
        for pair in row["pairs"]:
            pair["human"] = said[row["id"]]
    sample.write_text("".join(json.dumps(r) + "\n" for r in rows))
    checked = _invoke("check-sample", sample)
    assert checked.exit_code == 0 and "guarantee holds" in checked.stderr, checked.output
    (entry,) = L.read(L.ledger_path(cal))
    assert entry["result"] == "holds" and entry["kept_labelled"] == 30
    # a hand-edited verdict is refused, with --summary too (before: only the calibration's data hash was compared)
    records = _lines(verdicts)
    records[2]["calibrated"]["verdict"] = wrong_of = {"first": "second", "second": "first", "tie": "first"}[
        records[2]["calibrated"]["verdict"]]
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(ConfigError, match=rf"edited\.jsonl: line 3: field 'calibrated\.verdict' is '{wrong_of}', but "):
        _invoke("sample", edited, "--items", new, "--summary", tmp_path / "sum.json", "--out", tmp_path / "e.jsonl")


@pytest.mark.parametrize(("estimator", "target"), [("ensemble", 0.6), ("annotators", 0.4)])
def test_a_select_run_of_a_combined_estimator_samples_under_its_own_calibration(tmp_path: Path, estimator: str,
                                                                              target: float) -> None:
    """The re-annotation `sample` checks the records with gives what `select` gave for each estimator (the
    ensemble's templates and the panel's judgments are in the records): none is refused, kept and abstained."""
    store = tmp_path / "s.sqlite"
    labelled = _sure_labelled(tmp_path, store, "cal", 120, 1000)
    cal, new = tmp_path / "cal.json", _pairs(tmp_path / "new.jsonl", 60)
    base = ["-j", "mock/hash", "--store", store]
    assert _invoke("calibrate", labelled, *base, "--out", cal, "--confidence", estimator,
                   *(["--panel-size", 3] if estimator == "annotators" else [])).exit_code == 0
    assert _invoke("select", new, *base, "--calibration", cal, "--target-agreement", target, "--risk-delta", 0.2,
                   "--out", tmp_path / "v.jsonl", "--summary", tmp_path / "sum.json").exit_code == 0
    drawn = _invoke("sample", tmp_path / "v.jsonl", "--items", new, "--summary", tmp_path / "sum.json",
                    "--out", tmp_path / "sample.jsonl", "--size", 5)
    assert drawn.exit_code == 0, drawn.output
    run = json.loads((tmp_path / "sample.jsonl.key.json").read_text())["run"]
    assert run["kept"] > 0 and run["abstained"] > 0, run
