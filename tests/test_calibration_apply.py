"""Calibrations applied while judging: compare/checklist/claims ``--calibration``, the library's
``Judge.apply_calibration``, the service's calibrated routes and the report's calibration plots."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from tests.conftest import write_jsonl
from trustjudge import ConfigError, Judge, LabelSet, MockBackend, load_items, register_mock
from trustjudge.audit._calibration import CalibrationMap, Selection
from trustjudge.audit._evaluation import evaluation
from trustjudge.audit._trust import Calibration, Tally, annotate, summary
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli
from trustjudge.cli._calibrated import describe
from trustjudge.report._trust import PLOT_IDS, calibration_section
from trustjudge.serve import create_app

# -- a scripted judge that knows the answer on most checks --------------------------------------------------

_RESPONSE = re.compile(r"France is (\w+)([.?]) \((\d+)\)")


def _check_rows(n: int, prefix: str = "c", start: int = 0) -> list[dict[str, Any]]:
    """One check ("names Paris") per item, labelled by whether the text does; on texts ending in "?" (one in
    ten) the scripted judge below is wrong, and its confidence varies from item to item. Items numbered from
    ``start`` (their texts differ from other numbers', so the store holds none of them)."""
    rows = []
    for i in range(start, start + n):
        paris = i % 3 != 0
        mark = "?" if i % 10 == 7 else "."
        rows.append({"id": f"{prefix}{i}", "question": "What is the capital of France?",
                     "checklist": [{"id": "paris", "text": "Does the response name Paris as the capital?"}],
                     "responses": [{"id": "r", "text": f"The capital of France is {'Paris' if paris else 'Lyon'}"
                                                       f"{mark} ({i})", "human_checks": {"paris": paris}}]})
    return rows


def _knowing(request: LabelRequest) -> list[float]:
    found = _RESPONSE.search(request.prompt)
    if found is None:  # not a check about our texts: an even split
        return [0.5] * len(request.labels)
    city, mark, i = found.group(1), found.group(2), int(found.group(3))
    right = (city == "Paris") != (mark == "?")
    confidence = 0.6 + 0.35 * ((i * 37) % 100) / 100
    p_yes = confidence if right else 1 - confidence
    return [p_yes if label.startswith("YES") else 1 - p_yes for label in request.labels]


@pytest.fixture
def knowing() -> Iterator[tuple[MockBackend, MockBackend]]:
    """Two judges with the same answers and different fingerprints: mock/know and mock/know2."""
    a, b = MockBackend("know", script=_knowing), MockBackend("know2", script=_knowing)
    register_mock("know", a)
    register_mock("know2", b)
    try:
        yield a, b
    finally:
        register_mock("know", None)
        register_mock("know2", None)


def _pair_rows(n: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        rows.append({"id": f"q{i}", "question": f"What is {i} + 2?",
                     "responses": [{"id": "a", "text": f"It is {i + 2}."}, {"id": "b", "text": f"Maybe {i + 7}."}],
                     "pairs": [{"first": "a", "second": "b", "human": "first" if i % 3 else "second"}]})
    return rows


def _invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- the numbers, on hand-made records -------------------------------------------------------------------

def _identity_checklist(probs: list[list[float]], human: list[int]) -> Calibration:
    cmap = CalibrationMap("platt", ("fail", "pass"), {"a": 1.0, "b": 0.0})  # sigmoid(logit(p)) = p
    return Calibration("checklist", "mock/x", "mock:x", "t", "direct", cmap, probs, human)


def _check_record(item: str, p_pass: float | None, human: float | None) -> dict[str, Any]:
    check = {"id": "k", "p_pass": p_pass, "unscored": None if p_pass is not None else "no_label_mass",
             "human": human}
    return {"item_id": item, "response_id": "r", "checks": [check]}


def test_summary_numbers_on_hand_made_records() -> None:
    cal = _identity_checklist([[0.1, 0.9], [0.8, 0.2]], [1, 0])
    selection = Selection(threshold=0.8, alpha=0.2, delta=0.1, n=2, kept=2, agreement=1.0, lower_bound=0.31)
    records = [_check_record("a", 0.95, 1.0), _check_record("b", 0.9, 0.0), _check_record("c", 0.3, 0.0),
               _check_record("d", 0.5, None), _check_record("e", None, 1.0)]
    annotated = annotate("checklist", records, cal, selection)
    blocks = [r["checks"][0]["calibrated"] for r in annotated]
    assert [None if b["confidence"] is None else round(b["confidence"], 6) for b in blocks] == \
        [0.95, 0.9, 0.7, 0.5, None]
    assert [b["verdict"] for b in blocks] == ["pass", "pass", "fail", "fail", None]
    assert [b["abstained"] for b in blocks] == [None, None, "below_threshold", "below_threshold", "unscored"]
    assert records[0]["checks"][0].get("calibrated") is None  # the input records are left as they were
    s = summary("checklist", annotated, cal, selection)
    # kept: the two checks at 0.95 and 0.9 of five; of those (both labelled) one agrees with its human
    assert (s["verdicts"], s["kept"], s["coverage"]) == (5, 2, pytest.approx(0.4))
    assert s["abstained"] == {"below_threshold": 2, "unscored": 1}
    assert (s["labelled_kept"], s["agreement_on_kept"]) == (2, pytest.approx(0.5))
    assert s["guarantee"] == selection.to_dict()
    assert s["calibration"] == {"judge": "mock/x", "n": 2, "method": "platt", "data_hash": cal.data_hash,
                                "overridden": []}
    tally = Tally("checklist", cal, selection)  # the streaming totals the CLI keeps are the same
    for r in annotated:
        tally.add(r)
    assert tally.result() == s
    line = describe({**s, "calibration": {**s["calibration"], "file": "cal.json"}})
    assert "kept 2 (coverage 0.400)" in line and "below_threshold 2, unscored 1" in line
    assert ("guarantee (of the procedure, over calibration sets): with probability >= 0.9, it keeps only verdicts "
            "agreeing with humans >= 0.8 (threshold 0.8000") in line
    assert "agreement with the labels given 0.500 on 2 kept" in line
    # without a selection every scored verdict is kept
    plain = summary("checklist", annotate("checklist", records, cal), cal, None)
    assert (plain["kept"], plain["abstained"], "guarantee" in plain) == (4, {"unscored": 1}, False)

    # the report's numbers: the three labelled scored checks (0.95 agrees, 0.9 does not, 0.3 -> fail agrees)
    ev = evaluation("checklist", annotated, cal, selection)
    assert ev["source"] == "records" and ev["n"] == 3
    assert [(round(p["coverage"], 6), round(p["agreement"], 6)) for p in ev["risk_curve"]] == \
        [(round(1 / 3, 6), 1.0), (round(2 / 3, 6), 0.5), (1.0, round(2 / 3, 6))]
    assert ev["before"]["ece"] == pytest.approx(ev["after"]["ece"])  # the identity map changes nothing
    assert ev["before"]["accuracy"] == pytest.approx(2 / 3)
    assert ev["selection"]["coverage"] == pytest.approx(2 / 3) and ev["selection"]["agreement"] == 0.5
    # with no labelled records, the calibration set is what the report shows
    assert evaluation("checklist", [_check_record("z", 0.6, None)], cal)["source"] == "calibration set"


def test_pairwise_records_are_calibrated_by_vector_scaling() -> None:
    cmap = CalibrationMap("vector", ("first", "second", "tie"), {"temperature": 0.5, "bias": [0.0, 0.0, -1.0]})
    cal = Calibration("compare", "mock/x", "mock:x", "t", "direct", cmap, [[0.5, 0.3, 0.2]] * 2, [0, 1])
    rec = {"item_id": "q", "first_id": "a", "second_id": "b", "human": "second",
           "probabilities": {"first": 0.5, "second": 0.3, "tie": 0.2}}
    (out,) = annotate("compare", [rec], cal)
    z = [2 * math.log(p) + b for p, b in zip((0.5, 0.3, 0.2), (0.0, 0.0, -1.0))]  # log(p) / T + bias
    total = sum(math.exp(v) for v in z)
    expected = [math.exp(v) / total for v in z]
    got = out["calibrated"]["probabilities"]
    assert [got[c] for c in ("first", "second", "tie")] == pytest.approx(expected)
    assert out["calibrated"]["verdict"] == "first" and out["probabilities"] == rec["probabilities"]
    s = summary("compare", [out], cal, None)
    assert (s["kept"], s["agreement_on_kept"]) == (1, 0.0)  # the human preferred the second


# -- the library: mismatches, overrides, zero calls -----------------------------------------------------------

def test_mismatched_judge_is_refused_and_an_override_is_recorded(tmp_path: Path,
                                                                  knowing: tuple[MockBackend, MockBackend]) -> None:
    items = load_items(write_jsonl(tmp_path / "cal.jsonl", _check_rows(120)))
    with Judge("mock/know", store=tmp_path / "s.sqlite") as judge:
        cal = judge.calibrate(items, "checklist")
        records = list(judge.checklist(items))
    with Judge("mock/know2", store=tmp_path / "s.sqlite") as other:
        with pytest.raises(ConfigError, match="judge fingerprint: calibrated 'mock:know', now 'mock:know2'"):
            other.apply_calibration(records, cal)
        annotated, s = other.apply_calibration(records, cal, override=True, target=0.8, delta=0.1)
    assert all(r["checks"][0]["calibrated"]["overridden"] == ["judge fingerprint"] for r in annotated)
    assert s["calibration"]["overridden"] == ["judge fingerprint"]
    assert s["guarantee"]["target_agreement"] == pytest.approx(0.8) and 0 < s["coverage"] <= 1
    with Judge("mock/know", store=tmp_path / "s.sqlite") as judge:
        with pytest.raises(ConfigError, match="for the checklist mode, not compare"):  # never overridable
            judge.check_calibration(cal, override=True, task=judge.compare_task())
        graded = judge.checklist_task(labels=LabelSet.parse("FULL=1,PARTIAL=0.5,NO=0"))
        with pytest.raises(ConfigError, match="labels: calibrated YES/NO, now FULL/PARTIAL/NO"):
            judge.check_calibration(cal, task=graded)
        assert judge.check_calibration(cal, task=graded, override=True).overridden == ["labels"]
        with pytest.raises(ConfigError, match=r"claims classes .* UNKNOWN"):
            claims_cal = Calibration("claims", cal.judge, cal.fingerprint, cal.template, "direct",
                                     CalibrationMap("vector", ("SUPPORTED", "PARTIAL", "UNSUPPORTED"),
                                                    {"temperature": 1.0, "bias": [0.0, 0.0, 0.0]}),
                                     [[0.4, 0.3, 0.3]] * 2, [0, 1])
            judge.check_calibration(claims_cal, task=judge.claims_task(unknown=True))


def test_cli_applies_a_calibration_and_reapplying_another_makes_zero_calls(
        tmp_path: Path, knowing: tuple[MockBackend, MockBackend]) -> None:
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _check_rows(120))
    new_items = write_jsonl(tmp_path / "new.jsonl", _check_rows(30, prefix="n", start=200))
    store = tmp_path / "s.sqlite"
    for method, out in (("platt", "platt.json"), ("isotonic", "iso.json")):
        fitted = _invoke("calibrate", cal_items, "--mode", "checklist", "--method", method, "-j", "mock/know",
                         "--store", store, "--out", tmp_path / out)
        assert fitted.exit_code == 0, fitted.output
    args = ["checklist", new_items, "-j", "mock/know", "--store", store, "--target-agreement", "0.8",
            "--risk-delta", "0.1"]
    first = _invoke(*args, "--calibration", tmp_path / "platt.json", "--out", tmp_path / "a.jsonl",
                    "--summary", tmp_path / "a.json")
    assert first.exit_code == 0, first.output
    assert "model calls 30" in first.stderr
    assert re.search(r"calibrated \(platt, 120 labelled checklist verdicts of mock/know, .*platt\.json data \w+\); "
                     r"30 verdicts, kept \d+ \(coverage [\d.]+\).*with probability >= 0\.9, it keeps only "
                     r"verdicts agreeing with humans >= 0\.8", first.stderr), first.stderr
    second = _invoke(*args, "--calibration", tmp_path / "iso.json", "--out", tmp_path / "b.jsonl",
                     "--summary", tmp_path / "b.json")
    assert second.exit_code == 0, second.output
    assert "model calls 0, from store 30" in second.stderr  # another calibration: everything from the store
    a, b = _lines(tmp_path / "a.jsonl"), _lines(tmp_path / "b.jsonl")
    for ra, rb in zip(a, b):
        ca, cb = ra["checks"][0], rb["checks"][0]
        assert ca["p_pass"] == cb["p_pass"]  # the raw probability, unchanged, beside the calibrated one
        assert ca["calibrated"]["probabilities"] != cb["calibrated"]["probabilities"]
    sa = json.loads((tmp_path / "a.json").read_text())
    g = sa["guarantee"]
    kept = [r for r in a if r["checks"][0]["calibrated"]["abstained"] is None]
    assert sa["kept"] == len(kept) and sa["coverage"] == pytest.approx(len(kept) / 30)
    assert all(r["checks"][0]["calibrated"]["confidence"] >= g["threshold"] for r in kept)
    assert g["agreement_lower_bound"] >= 0.8 - 1e-9 and g["calibration_n"] == 60  # part B of the 120
    assert sa["calibration"]["file"] == str(tmp_path / "platt.json")
    agree = sum((r["checks"][0]["calibrated"]["verdict"] == "pass") == (r["checks"][0]["human"] == 1.0) for r in kept)
    assert sa["agreement_on_kept"] == pytest.approx(agree / len(kept))


def test_cli_refuses_a_mismatch_before_judging_and_records_an_override(
        tmp_path: Path, knowing: tuple[MockBackend, MockBackend]) -> None:
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _check_rows(60))
    store, cal = tmp_path / "s.sqlite", tmp_path / "cal.json"
    assert _invoke("calibrate", cal_items, "--mode", "checklist", "-j", "mock/know", "--store", store,
                   "--out", cal).exit_code == 0
    other = tmp_path / "other.sqlite"
    knowing[1].calls = 0
    refused = CliRunner().invoke(cli, ["checklist", str(cal_items), "-j", "mock/know2", "--store", str(other),
                                       "--calibration", str(cal)])
    assert refused.exit_code != 0 and knowing[1].calls == 0  # nothing judged
    assert "judge fingerprint: calibrated 'mock:know', now 'mock:know2'" in str(refused.exception)
    ok = _invoke("checklist", cal_items, "-j", "mock/know2", "--store", other, "--calibration", cal,
                 "--calibration-override", "--out", tmp_path / "o.jsonl", "-q")
    assert ok.exit_code == 0, ok.output
    assert all(r["checks"][0]["calibrated"]["overridden"] == ["judge fingerprint"]
               for r in _lines(tmp_path / "o.jsonl"))
    # an unsupported target is refused before any judging, naming the calibration file
    unsupported = CliRunner().invoke(cli, ["checklist", str(cal_items), "-j", "mock/know2", "--store",
                                           str(tmp_path / "third.sqlite"), "--calibration", str(cal),
                                           "--target-agreement", "0.999"])
    assert "cannot support agreement >= 0.999" in str(unsupported.exception) and str(cal) in str(unsupported.exception)
    assert not (tmp_path / "third.sqlite").exists()
    # a checklist calibration on compare: the mode is named
    pairs = write_jsonl(tmp_path / "pairs.jsonl", _pair_rows(4))
    wrong = CliRunner().invoke(cli, ["compare", str(pairs), "-j", "mock/hash", "--store", str(store),
                                     "--calibration", str(cal)])
    assert "a calibration of checklist verdicts; `trustjudge compare` judges compare verdicts" in str(wrong.exception)


def test_the_calibration_options_need_a_calibration(tmp_path: Path) -> None:
    # (a mode without calibration units refuses them: tests/test_mode_commands.py, a registered mode)
    items = write_jsonl(tmp_path / "items.jsonl", _check_rows(2))
    for command in ("score", "criteria"):
        result = CliRunner().invoke(cli, [command, str(items), "-j", "mock/hash", "--tolerance", "1"])
        assert result.exit_code == 2 and "--tolerance needs --calibration" in result.output
    alone = CliRunner().invoke(cli, ["checklist", str(items), "-j", "mock/hash", "--target-agreement", "0.8"])
    assert alone.exit_code == 2 and "--target-agreement needs --calibration" in alone.output


def test_compare_and_claims_apply_their_calibrations(tmp_path: Path) -> None:
    pairs = write_jsonl(tmp_path / "pairs.jsonl", _pair_rows(12))
    store = tmp_path / "s.sqlite"
    assert _invoke("calibrate", pairs, "-j", "mock/hash", "--store", store, "--out",
                   tmp_path / "pc.json").exit_code == 0
    done = _invoke("compare", pairs, "-j", "mock/hash", "--store", store, "--calibration", tmp_path / "pc.json",
                   "--out", tmp_path / "p.jsonl")
    assert done.exit_code == 0, done.output
    assert "model calls: 0" in done.stderr and "calibrated (vector, 12 labelled compare verdicts" in done.stderr
    for rec in _lines(tmp_path / "p.jsonl"):
        block = rec["calibrated"]
        assert set(block) == {"probabilities", "verdict", "confidence"}  # no target: nothing abstains
        assert block["confidence"] == pytest.approx(max(block["probabilities"].values()))
        assert set(rec["probabilities"]) == {"first", "second", "tie"}
    claims = write_jsonl(tmp_path / "claims.jsonl", [
        {"id": f"k{i}", "question": "Where is the Louvre?", "evidence": "The Louvre is in Paris.",
         "responses": [{"id": "r", "claims": [{"text": "The Louvre is in Paris.", "human": "SUPPORTED"},
                                              {"text": f"It opened in {1700 + i}.", "human": "UNSUPPORTED"}],
                        "text": "x"}]} for i in range(6)])
    assert _invoke("calibrate", claims, "--mode", "claims", "-j", "mock/hash", "--store", store, "--out",
                   tmp_path / "cc.json").exit_code == 0
    done = _invoke("claims", claims, "-j", "mock/hash", "--store", store, "--calibration", tmp_path / "cc.json",
                   "--out", tmp_path / "c.jsonl", "--summary", tmp_path / "c.json")
    assert done.exit_code == 0, done.output
    recs = _lines(tmp_path / "c.jsonl")
    assert all(set(c["calibrated"]["probabilities"]) == {"SUPPORTED", "PARTIAL", "UNSUPPORTED"}
               for r in recs for c in r["claims"])
    assert json.loads((tmp_path / "c.json").read_text())["verdicts"] == 12
    unknown = CliRunner().invoke(cli, ["claims", str(claims), "-j", "mock/hash", "--store", str(store), "--unknown",
                                       "--calibration", str(tmp_path / "cc.json")])
    assert "this judging asks for SUPPORTED, PARTIAL, UNSUPPORTED, UNKNOWN" in str(unknown.exception)


# -- the report -------------------------------------------------------------------------------------------------

def test_reports_draw_reliability_before_and_after_and_the_selective_risk_curve(
        tmp_path: Path, knowing: tuple[MockBackend, MockBackend]) -> None:
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _check_rows(120))
    new_items = write_jsonl(tmp_path / "new.jsonl", _check_rows(30, prefix="n", start=200))
    store, cal = tmp_path / "s.sqlite", tmp_path / "cal.json"
    assert _invoke("calibrate", cal_items, "--mode", "checklist", "-j", "mock/know", "--store", store,
                   "--out", cal).exit_code == 0
    done = _invoke("checklist", new_items, "-j", "mock/know", "--store", store, "--calibration", cal,
                   "--target-agreement", "0.8", "--report", tmp_path / "r.html", "--out", tmp_path / "r.jsonl", "-q")
    assert done.exit_code == 0, done.output
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    for plot in PLOT_IDS:
        assert re.search(rf'<figure class="plot" id="{plot}">\s*<svg', page), plot
    assert '<a href="#calibrated">Calibration</a>' in page
    for part in ("diagonal", "before-0", "after-0"):
        assert f'id="plot-calibration-reliability-{part}"' in page
    for part in ("calibrated", "raw", "target", "chosen"):
        assert f'id="plot-selective-risk-{part}"' in page
    assert "Measured on the labelled verdicts of these records" in page
    # the holistic report takes a compare calibration the same way
    pairs = write_jsonl(tmp_path / "pairs.jsonl", _pair_rows(12))
    assert _invoke("calibrate", pairs, "-j", "mock/hash", "--store", store, "--out",
                   tmp_path / "pc.json").exit_code == 0
    done = _invoke("report", pairs, "-j", "mock/hash", "--store", store, "--scales", "5", "--bootstrap", "0",
                   "--calibration", tmp_path / "pc.json", "--html", tmp_path / "h.html", "-q")
    assert done.exit_code == 0, done.output
    page = (tmp_path / "h.html").read_text(encoding="utf-8")
    assert all(f'id="{plot}"' in page for plot in PLOT_IDS)
    assert 'id="plot-selective-risk-target"' not in page  # no target given: no target line
    key, title, html = calibration_section({})  # tolerant of an empty evaluation: the plots say "no data"
    assert (key, title) == ("calibrated", "Calibration") and all(f'id="{plot}"' in html for plot in PLOT_IDS)


# -- the service -----------------------------------------------------------------------------------------------

def test_service_applies_a_calibration_and_names_a_mismatch(tmp_path: Path,
                                                             knowing: tuple[MockBackend, MockBackend]) -> None:
    rows = _check_rows(120)
    with Judge("mock/know", store=tmp_path / "fit.sqlite") as judge:
        cal = judge.calibrate(load_items(write_jsonl(tmp_path / "cal.jsonl", rows)), "checklist").to_dict()
    new = _check_rows(20, prefix="n", start=200)
    app = create_app(knowing[0], store_path=tmp_path / "srv.sqlite")
    with TestClient(app) as c:
        ok = c.post("/v1/checklist", json={"items": new, "calibration": cal, "target_agreement": 0.8})
        assert ok.status_code == 200, ok.text
        body = ok.json()
        g = body["calibration"]["guarantee"]
        blocks = [r["checks"][0]["calibrated"] for r in body["records"]]
        assert all((b["abstained"] is None) == (b["confidence"] >= g["threshold"]) for b in blocks)
        assert body["calibration"]["kept"] == sum(b["abstained"] is None for b in blocks)
        assert all("p_pass" in r["checks"][0] for r in body["records"])
        plain = c.post("/v1/checklist", json={"items": new})
        assert plain.status_code == 200 and "calibration" not in plain.json()
        calls = app.state.judge.stats.model_calls
        again = c.post("/v1/checklist", json={"items": new, "calibration": cal})
        assert again.status_code == 200 and app.state.judge.stats.model_calls == calls  # zero calls

        other = {**cal, "fingerprint": "mock:elsewhere"}  # fitted for another judge
        bad = c.post("/v1/checklist", json={"items": new, "calibration": other})
        assert bad.status_code == 422
        (problem,) = bad.json()["detail"]
        assert problem["loc"] == ["body", "calibration"] and "judge fingerprint" in problem["msg"]
        forced = c.post("/v1/checklist", json={"items": new, "calibration": other, "calibration_override": True})
        assert forced.status_code == 200
        assert forced.json()["records"][0]["checks"][0]["calibrated"]["overridden"] == ["judge fingerprint"]

        too_high = c.post("/v1/checklist", json={"items": new, "calibration": cal, "target_agreement": 0.999})
        assert too_high.status_code == 422 and too_high.json()["detail"][0]["loc"] == ["body", "target_agreement"]
        no_cal = c.post("/v1/checklist", json={"items": new, "target_agreement": 0.8})
        assert no_cal.status_code == 422 and no_cal.json()["detail"][0]["loc"] == ["body", "target_agreement"]
        pairs = _pair_rows(2)
        wrong_mode = c.post("/v1/compare", json={"items": pairs, "calibration": cal})
        assert wrong_mode.status_code == 422 and "checklist mode, not compare" in wrong_mode.json()["detail"][0]["msg"]
        edited = json.loads(json.dumps(cal))
        edited["calibration_set"]["human"][0] = 1 - edited["calibration_set"]["human"][0]
        broken = c.post("/v1/claims", json={"items": [{"id": "x", "question": "q", "evidence": "e",
                                                      "responses": [{"id": "r", "text": "t", "claims": ["c"]}]}],
                                            "calibration": edited})
        assert broken.status_code == 422 and "data_hash" in broken.json()["detail"][0]["msg"]


# -- the real small judge, end to end -------------------------------------------------------------------------

@pytest.mark.model
def test_selective_checklist_run_on_the_real_small_judge_and_a_rerun_makes_zero_calls(tmp_path: Path) -> None:
    judge = "llamacpp/smollm2-135m"
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _check_rows(24))
    new_items = write_jsonl(tmp_path / "new.jsonl", _check_rows(8, prefix="n", start=100))
    store = tmp_path / "s.sqlite"
    fitted = _invoke("calibrate", cal_items, "--mode", "checklist", "-j", judge, "--store", store,
                     "--out", tmp_path / "platt.json")
    assert fitted.exit_code == 0, fitted.output
    refit = _invoke("calibrate", cal_items, "--mode", "checklist", "--method", "isotonic", "-j", judge,
                    "--store", store, "--out", tmp_path / "iso.json")
    assert refit.exit_code == 0 and "model calls 0" in refit.stderr, refit.stderr
    args = ["checklist", new_items, "-j", judge, "--store", store, "--target-agreement", "0.6",
            "--risk-delta", "0.3"]
    first = _invoke(*args, "--calibration", tmp_path / "platt.json", "--out", tmp_path / "a.jsonl",
                    "--summary", tmp_path / "a.json")
    assert first.exit_code == 0, first.output
    assert "model calls 8" in first.stderr, first.stderr
    summary_a = json.loads((tmp_path / "a.json").read_text())
    g = summary_a["guarantee"]
    assert g["calibration_n"] == 12 and g["agreement_lower_bound"] >= 0.6 - 1e-9  # part B of the 24
    records = _lines(tmp_path / "a.jsonl")
    for rec in records:
        check = rec["checks"][0]
        block = check["calibrated"]
        assert 0.0 <= check["p_pass"] <= 1.0  # the raw probability stays beside the calibrated one
        assert block["confidence"] == pytest.approx(max(block["probabilities"].values()))
        assert (block["abstained"] is None) == (block["confidence"] >= g["threshold"])
    assert summary_a["kept"] == sum(r["checks"][0]["calibrated"]["abstained"] is None for r in records)
    # the rerun: every judgment from the store, the same verdicts kept
    again = _invoke(*args, "--calibration", tmp_path / "platt.json", "--out", tmp_path / "a2.jsonl")
    assert again.exit_code == 0, again.output
    assert "model calls 0, from store 8" in again.stderr, again.stderr
    assert _lines(tmp_path / "a2.jsonl") == records
    # the same judgments under the isotonic calibration (no target: its step map pools the top confidences
    # into ties, which on 24 verdicts supports no target): no model call either
    second = _invoke("checklist", new_items, "-j", judge, "--store", store, "--calibration", tmp_path / "iso.json",
                     "--out", tmp_path / "b.jsonl", "--summary", tmp_path / "b.json")
    assert second.exit_code == 0, second.output
    assert "model calls 0, from store 8" in second.stderr, second.stderr
    assert [r["checks"][0]["p_pass"] for r in _lines(tmp_path / "b.jsonl")] == \
        [r["checks"][0]["p_pass"] for r in records]
    summary_b = json.loads((tmp_path / "b.json").read_text())
    assert summary_b["calibration"]["method"] == "isotonic" and summary_b["kept"] == 8 and "guarantee" not in summary_b
