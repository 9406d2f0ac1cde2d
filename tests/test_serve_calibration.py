"""The service's calibrations held by the server (``trustjudge serve --calibration NAME=PATH``, requests naming
one with ``calibration_name``): selective verdicts, the 4xx of a bad name or a calibration for another judge, a
client never naming a file, and the CLI option; score and criteria calibrations (sent or named, their tolerance,
the records the CLI writes)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner
from fastapi.testclient import TestClient

from tests.conftest import write_jsonl
from tests.test_trust_pointwise import _criteria_rows, _knowing, _real_rows, _score_rows
from trustjudge import ConfigError, Judge, MockBackend, load_items, register_mock
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli
from trustjudge.cli._serve import serve as serve_command
from trustjudge.serve import create_app

TEXT = re.compile(r"Answer (\d+): (\w+)")


def check_rows(indices: range, *, labelled: bool = True) -> list[dict[str, Any]]:
    """One check per item ("names Paris"), true on two items in three."""
    rows = []
    for i in indices:
        city = "Paris" if i % 3 else "Lyon"
        resp: dict[str, Any] = {"id": "r", "text": f"Answer {i}: {city} is the capital."}
        if labelled:
            resp["human_checks"] = {"paris": city == "Paris"}
        rows.append({"id": f"i{i}", "question": "What is the capital of France?",
                     "checklist": [{"id": "paris", "text": "Does it name Paris?"}], "responses": [resp]})
    return rows


def sure_but_for_some(req: LabelRequest) -> list[float]:
    """Right and sure, except on items 0 mod 5: unsure and wrong-leaning."""
    m = TEXT.search(req.prompt)
    assert m is not None
    i, right = int(m.group(1)), m.group(2) == "Paris"
    p_yes = (0.45 if right else 0.55) if i % 5 == 0 else (0.95 if right else 0.05)
    return [p_yes if lab.upper().startswith("YES") else 1 - p_yes for lab in req.labels]


@pytest.fixture
def calibration_file(tmp_path: Path) -> Path:
    """A checklist calibration of mock/sure on 300 labelled items (saved as `trustjudge calibrate` does)."""
    with Judge(MockBackend("sure", sure_but_for_some), store=tmp_path / "fit.sqlite") as judge:
        cal = judge.calibrate(load_items(write_jsonl(tmp_path / "cal.jsonl", check_rows(range(1000, 1300)))),
                              "checklist")
    cal.save(tmp_path / "sure.json")
    return tmp_path / "sure.json"


def test_a_request_names_a_calibration_the_server_holds(tmp_path: Path, calibration_file: Path) -> None:
    backend = MockBackend("sure", sure_but_for_some)
    app = create_app(backend, store_path=tmp_path / "srv.sqlite", calibrations={"sure-v1": calibration_file})
    new = check_rows(range(40), labelled=False)
    with TestClient(app) as c:
        stats = c.get("/v1/stats").json()
        assert list(stats["calibrations"]) == ["sure-v1"]
        held = stats["calibrations"]["sure-v1"]
        assert (held["mode"], held["judge"], held["n"]) == ("checklist", "sure", 300)
        assert str(calibration_file) not in json.dumps(stats)  # the server's paths stay on the server
        ok = c.post("/v1/checklist", json={"items": new, "calibration_name": "sure-v1", "target_agreement": 0.9})
        assert ok.status_code == 200, ok.text
        body = ok.json()
        summary = body["calibration"]
        assert summary["calibration"]["name"] == "sure-v1" and summary["calibration"]["n"] == 300
        threshold = summary["guarantee"]["threshold"]
        blocks = {int(r["item_id"][1:]): r["checks"][0]["calibrated"] for r in body["records"]}
        # the unsure items (0 mod 5) are abstained on, the rest kept, each with its confidence
        assert sorted(i for i, b in blocks.items() if b["abstained"] is not None) == list(range(0, 40, 5))
        assert all(b["abstained"] == "below_threshold" for i, b in blocks.items() if i % 5 == 0)
        assert all((b["confidence"] >= threshold) == (b["abstained"] is None) for b in blocks.values())
        assert summary["kept"] == 32 and summary["coverage"] == pytest.approx(32 / 40)
        calls = app.state.judge.stats.model_calls
        assert calls == 40
        # the same calibration sent inline gives the same records, from the store
        inline = c.post("/v1/checklist", json={"items": new, "target_agreement": 0.9,
                                               "calibration": json.loads(calibration_file.read_text())})
        assert inline.status_code == 200 and inline.json()["records"] == body["records"]
        assert "name" not in inline.json()["calibration"]["calibration"]
        assert app.state.judge.stats.model_calls == calls


def _problem(response: Any) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    (problem,) = response.json()["detail"]
    return dict(problem)


def test_a_bad_name_or_a_calibration_for_another_judge_is_a_422_naming_the_field(tmp_path: Path,
                                                                                 calibration_file: Path) -> None:
    other = Judge(MockBackend("other", sure_but_for_some), store=tmp_path / "o.sqlite")
    try:
        foreign = other.calibrate(load_items(write_jsonl(tmp_path / "c2.jsonl", check_rows(range(2000, 2100)))),
                                  "checklist")
    finally:
        other.close()
    app = create_app(MockBackend("sure", sure_but_for_some), store_path=tmp_path / "srv.sqlite",
                     calibrations={"sure-v1": calibration_file, "foreign": foreign}, preload=False)
    items = check_rows(range(5), labelled=False)
    with TestClient(app) as c:
        unknown = _problem(c.post("/v1/checklist", json={"items": items, "calibration_name": "nope"}))
        assert unknown["loc"] == ["body", "calibration_name"]
        assert "no calibration named 'nope' on this server (it holds foreign, sure-v1" in unknown["msg"]
        # a path is only a name the server does not hold: no file is read
        path = _problem(c.post("/v1/checklist", json={"items": items, "calibration_name": str(calibration_file)}))
        assert path["loc"] == ["body", "calibration_name"] and "no calibration named" in path["msg"]
        as_text = c.post("/v1/checklist", json={"items": items, "calibration": str(calibration_file)})
        assert as_text.status_code == 422 and as_text.json()["detail"][0]["loc"] == ["body", "calibration"]
        both = _problem(c.post("/v1/checklist", json={"items": items, "calibration_name": "sure-v1",
                                                      "calibration": foreign.to_dict()}))
        assert both["loc"] == ["body", "calibration_name"] and "not both" in both["msg"]
        # fitted for another judge: refused, naming the field and why; accepted with the override
        wrong = _problem(c.post("/v1/checklist", json={"items": items, "calibration_name": "foreign"}))
        assert wrong["loc"] == ["body", "calibration_name"]
        assert "calibration 'foreign'" in wrong["msg"] and "judge fingerprint" in wrong["msg"]
        sent = _problem(c.post("/v1/checklist", json={"items": items, "calibration": foreign.to_dict()}))
        assert sent["loc"] == ["body", "calibration"] and "judge fingerprint" in sent["msg"]
        forced = c.post("/v1/checklist", json={"items": items, "calibration_name": "foreign",
                                               "calibration_override": True})
        assert forced.status_code == 200
        assert forced.json()["records"][0]["checks"][0]["calibrated"]["overridden"] == ["judge fingerprint"]
        # a checklist calibration on the compare route: the mode is named
        pairs = [{"id": "p", "question": "q", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]}]
        mode = _problem(c.post("/v1/compare", json={"items": pairs, "calibration_name": "sure-v1"}))
        assert mode["loc"] == ["body", "calibration_name"] and "checklist mode, not compare" in mode["msg"]
        too_high = _problem(c.post("/v1/checklist", json={"items": items, "calibration_name": "sure-v1",
                                                          "target_agreement": 0.9999}))
        assert too_high["loc"] == ["body", "target_agreement"]
        assert app.state.judge.stats.model_calls == 5  # only the overridden request judged


def test_the_server_refuses_to_start_with_a_calibration_it_cannot_use(tmp_path: Path,
                                                                      calibration_file: Path) -> None:
    with pytest.raises(ConfigError, match=rf"calibration 'sure-v1' \({re.escape(str(calibration_file))}\): the "
                                          r"calibration file does not fit this judging \(judge fingerprint"):
        create_app(MockBackend("elsewhere"), store_path=tmp_path / "a.sqlite",
                   calibrations={"sure-v1": calibration_file})
    with pytest.raises(ConfigError, match="calibration name 'a b'"):
        create_app("mock/hash", store_path=tmp_path / "b.sqlite", calibrations={"a b": calibration_file})
    broken = tmp_path / "broken.json"
    broken.write_text("{nope", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken.json: line 1: not JSON"):
        create_app("mock/hash", store_path=tmp_path / "c.sqlite", calibrations={"x": broken})


def test_trustjudge_serve_takes_named_calibrations(tmp_path: Path, calibration_file: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    started: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.update(app=app, **kw))
    register_mock("sure", MockBackend("sure", sure_but_for_some))
    try:
        runner = CliRunner()
        base = ["--judge", "mock/sure", "--store", str(tmp_path / "s.sqlite")]
        done = runner.invoke(serve_command, [*base, "--calibration", f"v1={calibration_file}"])
        assert done.exit_code == 0, done.output
        assert list(started["app"].state.calibrations) == ["v1"]
        for bad, message in ((["--calibration", str(calibration_file)], "give NAME=PATH"),
                             (["--calibration", f"v1={calibration_file}", "--calibration", f"v1={calibration_file}"],
                              "the name 'v1' is given twice"),
                             (["--calibration", f"v1={tmp_path / 'none.json'}"], "no file"),
                             (["--calibration", "a b=" + str(calibration_file)], "calibration name 'a b'")):
            done = runner.invoke(serve_command, [*base, *bad])
            assert done.exit_code == 2 and message in done.output, done.output
        hash_judge = runner.invoke(serve_command, ["--judge", "mock/hash", "--store", str(tmp_path / "h.sqlite"),
                                                   "--calibration", f"v1={calibration_file}"])
        assert hash_judge.exit_code == 2 and "calibration 'v1'" in hash_judge.output
        assert "judge fingerprint" in hash_judge.output
    finally:
        register_mock("sure", None)


@pytest.mark.model
def test_the_real_small_judge_served_with_a_named_calibration(tmp_path: Path) -> None:
    name = "llamacpp/smollm2-135m"
    store = tmp_path / "s.sqlite"
    with Judge(name, store=store) as judge:
        cal = judge.calibrate(load_items(write_jsonl(tmp_path / "cal.jsonl", check_rows(range(100, 124)))),
                              "checklist")
    cal.save(tmp_path / "smol.json")
    app = create_app(name, store_path=store, calibrations={"smol": tmp_path / "smol.json"})
    new = check_rows(range(8))
    with TestClient(app) as c:
        ask = {"items": new, "calibration_name": "smol", "target_agreement": 0.6, "risk_delta": 0.3}
        first = c.post("/v1/checklist", json=ask)
        assert first.status_code == 200, first.text
        body = first.json()
        g = body["calibration"]["guarantee"]
        assert body["calibration"]["calibration"]["name"] == "smol" and g["calibration_n"] == 12  # part B of 24
        assert g["agreement_lower_bound"] >= 0.6 - 1e-9
        for rec in body["records"]:
            check = rec["checks"][0]
            block = check["calibrated"]
            assert 0.0 <= check["p_pass"] <= 1.0
            assert block["confidence"] == pytest.approx(max(block["probabilities"].values()))
            assert (block["abstained"] is None) == (block["confidence"] >= g["threshold"])
        kept = sum(r["checks"][0]["calibrated"]["abstained"] is None for r in body["records"])
        assert body["calibration"]["kept"] == kept
        calls = app.state.judge.stats.model_calls
        assert calls == 8
        again = c.post("/v1/checklist", json=ask)  # every judgment from the store
        assert again.status_code == 200 and again.json() == body and app.state.judge.stats.model_calls == calls


# -- score and criteria: distributions over a scale's levels, agreement within a tolerance ---------------------

@pytest.fixture
def knowscore() -> Iterator[MockBackend]:
    """mock/knowscore: sure of the level an answer names, the more so the higher its number's hash."""
    backend = MockBackend("knowscore", script=_knowing)
    register_mock("knowscore", backend)
    try:
        yield backend
    finally:
        register_mock("knowscore", None)


def _fitted(tmp_path: Path, mode: str, rows: list[dict[str, Any]], tolerance: float) -> Path:
    """A calibration of mock/knowscore fitted on hand-made labelled items, saved as `trustjudge calibrate` does."""
    with Judge(MockBackend("knowscore", script=_knowing), store=tmp_path / "fit.sqlite", scale=5) as judge:
        cal = judge.calibrate(load_items(write_jsonl(tmp_path / f"{mode}-cal.jsonl", rows)), mode, tolerance=tolerance)
    assert cal.mode == mode and cal.n == len(rows) and cal.tolerance == tolerance
    path = tmp_path / f"{mode}.json"
    cal.save(path)
    return path


def _within(block: dict[str, Any], tolerance: float) -> float:
    """By hand: the calibrated mass within the tolerance of the verdict level (the verdict's confidence)."""
    verdict = int(block["verdict"])
    return sum(p for level, p in block["probabilities"].items() if abs(int(level) - verdict) <= tolerance)


def test_score_takes_a_calibration_sent_or_named_and_keeps_the_distributions(tmp_path: Path,
                                                                             knowscore: MockBackend) -> None:
    cal_file = _fitted(tmp_path, "score", _score_rows(300), tolerance=1)  # 300, 40: the split
    app = create_app(knowscore, store_path=tmp_path / "srv.sqlite", calibrations={"sc": cal_file})
    new = _score_rows(40, prefix="n", start=500)
    with TestClient(app) as c:
        plain = c.post("/v1/score", json={"items": new, "scale": 5})
        assert plain.status_code == 200 and all("distribution" not in r for r in plain.json()["records"])
        assert app.state.judge.stats.model_calls == 40
        ask = {"items": new, "scale": 5, "calibration_name": "sc", "target_agreement": 0.9, "risk_delta": 0.1}
        named = c.post("/v1/score", json=ask)
        assert named.status_code == 200, named.text
        body = named.json()
        summary, records = body["calibration"], body["records"]
        g = summary["guarantee"]
        assert summary["calibration"]["name"] == "sc" and summary["calibration"]["tolerance"] == 1
        assert g["calibration_n"] == 150 and g["agreement_lower_bound"] >= 0.9 - 1e-9
        assert g["selection"] == {"fit_units": 150, "test_units": 150}
        for rec, raw in zip(records, plain.json()["records"]):
            assert set(rec["distribution"]) == {"1", "2", "3", "4", "5"}  # kept for the calibration
            assert rec["scores"] == raw["scores"]  # the raw fields stay
            block = rec["calibrated"]
            assert block["tolerance"] == 1 and block["confidence"] == pytest.approx(_within(block, 1))
            assert block["expected"] == pytest.approx(sum(int(k) * p for k, p in block["probabilities"].items()))
            assert (block["abstained"] is None) == (block["confidence"] >= g["threshold"])
        kept = [r for r in records if r["calibrated"]["abstained"] is None]
        assert 0 < summary["kept"] == len(kept) < 40 and summary["coverage"] == pytest.approx(len(kept) / 40)
        agreed = sum(abs(int(r["calibrated"]["verdict"]) - r["human_score"]) <= 1 for r in kept)
        assert summary["agreement_on_kept"] == pytest.approx(agreed / len(kept))
        assert app.state.judge.stats.model_calls == 40  # the distributions were in the store
        # the same file sent in the body, with its own tolerance: the same records
        inline = {**ask, "calibration_name": None, "calibration": json.loads(cal_file.read_text()), "tolerance": 1}
        sent = c.post("/v1/score", json=inline)
        assert sent.status_code == 200 and sent.json()["records"] == records
        assert "name" not in sent.json()["calibration"]["calibration"]
        # another tolerance than the file's: refused, naming the field, as the CLI refuses it
        wrong = _problem(c.post("/v1/score", json={**inline, "tolerance": 0}))
        assert wrong["loc"] == ["body", "tolerance"] and "fitted with tolerance 1, not 0" in wrong["msg"]
        by_name = _problem(c.post("/v1/score", json={**ask, "tolerance": 2}))
        assert by_name["loc"] == ["body", "tolerance"] and "calibration 'sc'" in by_name["msg"]
        alone = _problem(c.post("/v1/score", json={"items": new, "scale": 5, "tolerance": 1}))
        assert alone["loc"] == ["body", "tolerance"] and "needs a calibration" in alone["msg"]
        # another scale: the classes are named
        scale10 = _problem(c.post("/v1/score", json={"items": new, "calibration_name": "sc"}))
        assert scale10["loc"] == ["body", "calibration_name"] and "score classes 1, 2, 3, 4, 5" in scale10["msg"]
        pairs = [{"id": "p", "question": "q", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]}]
        assert c.post("/v1/compare", json={"items": pairs, "tolerance": 1}).status_code == 422  # no such field
        assert app.state.judge.stats.model_calls == 40


def test_criteria_takes_a_calibration_sent_or_named(tmp_path: Path, knowscore: MockBackend) -> None:
    cal_file = _fitted(tmp_path, "criteria", _criteria_rows(100), tolerance=0)
    app = create_app(knowscore, store_path=tmp_path / "srv.sqlite", calibrations={"cr": cal_file})
    new = _criteria_rows(20, prefix="m", start=700)
    with TestClient(app) as c:
        ask = {"items": new, "calibration_name": "cr", "target_agreement": 0.85, "risk_delta": 0.1}
        named = c.post("/v1/criteria", json=ask)
        assert named.status_code == 200, named.text
        body = named.json()
        g = body["calibration"]["guarantee"]
        crits = [crit for rec in body["records"] for crit in rec["criteria"]]
        assert len(crits) == 20 and all(set(crit["distribution"]) == {"1", "2", "3", "4", "5"} for crit in crits)
        blocks = [crit["calibrated"] for crit in crits]
        assert all(b["confidence"] == pytest.approx(max(b["probabilities"].values())) for b in blocks)  # tolerance 0
        assert all((b["abstained"] is None) == (b["confidence"] >= g["threshold"]) for b in blocks)
        kept = [crit for crit in crits if crit["calibrated"]["abstained"] is None]
        assert 0 < body["calibration"]["kept"] == len(kept) < 20
        agreed = sum(int(crit["calibrated"]["verdict"]) == crit["human"] for crit in kept)
        assert body["calibration"]["agreement_on_kept"] == pytest.approx(agreed / len(kept))
        calls = app.state.judge.stats.model_calls
        assert calls == 20
        sent = c.post("/v1/criteria", json={**ask, "calibration_name": None, "tolerance": 0,
                                            "calibration": json.loads(cal_file.read_text())})
        assert sent.status_code == 200 and sent.json()["records"] == body["records"]
        wrong = _problem(c.post("/v1/criteria", json={**ask, "tolerance": 1}))
        assert wrong["loc"] == ["body", "tolerance"] and "fitted with tolerance 0, not 1" in wrong["msg"]
        assert app.state.judge.stats.model_calls == calls


def test_a_served_calibrated_score_is_the_record_the_cli_writes(tmp_path: Path, knowscore: MockBackend) -> None:
    cal_file = _fitted(tmp_path, "score", _score_rows(300), tolerance=1)  # 300, 40: the split
    new = _score_rows(40, prefix="n", start=500)
    items = write_jsonl(tmp_path / "new.jsonl", new)
    done = CliRunner().invoke(cli, [str(a) for a in (
        "score", items, "--scale", "5", "-j", "mock/knowscore", "--store", tmp_path / "cli.sqlite", "--calibration",
        cal_file, "--target-agreement", "0.9", "--risk-delta", "0.1", "--tolerance", "1", "--out", tmp_path / "a.jsonl",
        "--summary", tmp_path / "a.json")])
    assert done.exit_code == 0, done.output
    written = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text(encoding="utf-8").splitlines()]
    summary = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    app = create_app("mock/knowscore", store_path=tmp_path / "srv.sqlite")  # its own store: judged afresh
    with TestClient(app) as c:
        got = c.post("/v1/score", json={"items": new, "scale": 5, "target_agreement": 0.9, "risk_delta": 0.1,
                                        "tolerance": 1, "calibration": json.loads(cal_file.read_text())})
    assert got.status_code == 200, got.text
    assert got.json()["records"] == written and len(written) == 40
    assert any(r["calibrated"]["abstained"] for r in written) and any(not r["calibrated"]["abstained"] for r in written)
    assert summary["calibration"].pop("file") == str(cal_file)  # the service never names a file
    summary.pop("per_system")  # the CLI's summary also ranks the systems
    assert got.json()["calibration"] == summary


@pytest.mark.model
def test_the_real_small_judge_serves_a_calibrated_score(tmp_path: Path) -> None:
    name = "llamacpp/smollm2-135m"
    store = tmp_path / "s.sqlite"
    with Judge(name, store=store, scale=5) as judge:
        cal = judge.calibrate(load_items(write_jsonl(tmp_path / "cal.jsonl", _real_rows(30, "c"))), "score",
                              tolerance=1)
    cal.save(tmp_path / "smol.json")
    app = create_app(name, store_path=store, calibrations={"smol": tmp_path / "smol.json"})
    ask = {"items": _real_rows(8, "n", start=100), "scale": 5, "calibration_name": "smol", "target_agreement": 0.6,
           "risk_delta": 0.3, "tolerance": 1}
    with TestClient(app) as c:
        first = c.post("/v1/score", json=ask)
        assert first.status_code == 200, first.text
        body = first.json()
        g = body["calibration"]["guarantee"]
        assert body["calibration"]["calibration"]["name"] == "smol" and g["calibration_n"] == 15  # part B of 30
        assert g["agreement_lower_bound"] >= 0.6 - 1e-9
        for rec in body["records"]:
            block = rec["calibrated"]
            assert rec["scores"]["expected"] is not None and set(rec["distribution"]) == {"1", "2", "3", "4", "5"}
            assert block["confidence"] == pytest.approx(_within(block, 1))
            assert (block["abstained"] is None) == (block["confidence"] >= g["threshold"])
        kept = [r for r in body["records"] if r["calibrated"]["abstained"] is None]
        assert body["calibration"]["kept"] == len(kept)
        if kept:
            agreed = sum(abs(int(r["calibrated"]["verdict"]) - r["human_score"]) <= 1 for r in kept)
            assert body["calibration"]["agreement_on_kept"] == pytest.approx(agreed / len(kept))
        calls = app.state.judge.stats.model_calls
        assert calls == 8
        again = c.post("/v1/score", json=ask)  # every judgment from the store
        assert again.status_code == 200 and again.json() == body and app.state.judge.stats.model_calls == calls
