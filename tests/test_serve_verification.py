"""The verification sample on the service (issue 34): /v1/verification/sample draws from a calibrated route's
records what `trustjudge sample` draws from the same records written out, refuses records the calibration did not
annotate (422 naming the field), and /v1/verification/check tests the labels exactly, as `check-sample` does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.test_verification_ledger import _invoke, _lines, _other_calibration, _pairs
from trustjudge.serve import create_app

FLIP = {"first": "second", "second": "first", "tie": "first"}


def _problem(response: Any) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    (problem,) = response.json()["detail"]
    return dict(problem)


def test_a_served_run_is_sampled_and_checked_as_the_cli_does(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    cal = _other_calibration(tmp_path, store)  # abstains on the hash judge's unsure verdicts
    new = _pairs(tmp_path / "new.jsonl", 120)
    app = create_app("mock/hash", store_path=store, calibrations={"pairs": cal})
    with TestClient(app) as c:
        judged = c.post("/v1/compare", json={"items": _lines(new), "calibration_name": "pairs",
                                             "target_agreement": 0.8, "risk_delta": 0.1})
        assert judged.status_code == 200, judged.text
        records = judged.json()["records"]
        ask = {"records": records, "calibration_name": "pairs", "target_agreement": 0.8, "risk_delta": 0.1,
               "size": 30, "seed": 4}
        drawn = c.post("/v1/verification/sample", json=ask)
        assert drawn.status_code == 200, drawn.text
        sample = drawn.json()
        kept = [u for u in sample["units"] if u["stratum"] == "kept"]
        assert len(kept) == 30 and sample["run"]["abstained"] > 0 and sample["run"]["kept"] > 30
        # the CLI's sample of the same records, written out: the same draw
        out = tmp_path / "v.jsonl"
        out.write_text("".join(json.dumps(r) + "\n" for r in records))
        assert _invoke("sample", out, "--items", new, "--calibration", cal, "--target-agreement", 0.8,
                       "--risk-delta", 0.1, "--size", 30, "--seed", 4, "--out", tmp_path / "s.jsonl").exit_code == 0
        assert json.loads((tmp_path / "s.jsonl.key.json").read_text())["units"] == sample["units"]
        # labels: 18 of the 30 kept agree (0.6 < 0.8): refuted; all agreeing: holds
        labels = [{"key": u["key"], "human": u["verdict"] if i % 5 < 3 else FLIP[u["verdict"]]}
                  for i, u in enumerate(kept)]
        refuted = c.post("/v1/verification/check", json={"sample": sample, "labels": labels})
        assert refuted.status_code == 200, refuted.text
        assert (refuted.json()["result"], refuted.json()["kept_agreed"]) == ("refuted", 18)
        held = c.post("/v1/verification/check", json={"sample": sample, "labels": [
            {"key": u["key"], "human": u["verdict"]} for u in kept]})
        assert held.json()["result"] == "holds" and held.json()["kept_labelled"] == 30
        # records the calibration did not annotate (an edited verdict): 422 naming the record and field
        edited = json.loads(json.dumps(records))
        edited[2]["calibrated"]["verdict"] = FLIP[edited[2]["calibrated"]["verdict"]]
        problem = _problem(c.post("/v1/verification/sample", json={**ask, "records": edited}))
        assert problem["loc"] == ["body", "records"] and "line 3: field 'calibrated.verdict'" in problem["msg"]
        # a label for a verdict not sampled, a bad label, a broken sample: 422 each, naming the field
        stray = _problem(c.post("/v1/verification/check", json={"sample": sample, "labels": [
            {"key": ["nope", "a", "b"], "human": "first"}]}))
        assert stray["loc"] == ["body", "labels"] and "labels[0]" in stray["msg"]
        bad = _problem(c.post("/v1/verification/check", json={"sample": sample, "labels": [
            {"key": kept[0]["key"], "human": "sideways"}]}))
        assert bad["loc"] == ["body", "labels"] and "'sideways' is not one of first, second, tie" in bad["msg"]
        broken = _problem(c.post("/v1/verification/check", json={"sample": {**sample, "delta": 2}, "labels": []}))
        assert broken["loc"] == ["body", "sample"] and "field 'delta'" in broken["msg"]
        neither = _problem(c.post("/v1/verification/sample", json={k: v for k, v in ask.items()
                                                                   if k != "calibration_name"}))
        assert neither["loc"] == ["body", "calibration"]
        assert app.state.judge.stats.model_calls == 240  # the compare route's only: sampling and checks make none
