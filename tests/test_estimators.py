"""The features confidence estimator and the shift warning (issue 34), in simulation and through the file.

The simulated judge: each pair has a hidden difficulty d. Its verdict is right with probability 0.98 - 0.5 d, and
the sharpness of its aggregated probabilities is drawn apart from d, so the calibrated top probability ranks
agreement only a little; the two presentation orders disagree more the harder the pair (the second order leans
towards the other response by d), which the features estimator reads.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from trustjudge.audit import _estimators as E
from trustjudge.audit import _shift
from trustjudge.audit._calibration import CalibrationMap
from trustjudge.audit._trust import PAIR_CLASSES, Calibration, annotate, fit, summary
from trustjudge.cli._calibrated import describe
from trustjudge.errors import ConfigError

_WHO = {"judge": "mock/x", "fingerprint": "mock:x", "template": "t", "protocol": "direct"}


def _population(rng: np.random.Generator, n: int, start: int = 0, shift: float = 0.0) -> list[dict[str, Any]]:
    """Simulated pair records (see the module docstring); ``shift`` makes the judge flatter (less sure)."""
    d = rng.uniform(0.0, 1.0, n)
    human = rng.integers(0, 2, n)
    right = rng.uniform(size=n) < 0.98 - 0.5 * d
    verdict = np.where(right, human, 1 - human)
    s = rng.uniform(0.5, 0.9, n) - shift
    out = []
    for i in range(n):
        f1 = np.zeros(3)
        f1[verdict[i]], f1[1 - verdict[i]], f1[2] = s[i], (1 - s[i]) * 0.8, (1 - s[i]) * 0.2
        f2 = (1 - d[i]) * f1 + d[i] * f1[[1, 0, 2]]
        agg = (f1 + f2) / (f1 + f2).sum()
        out.append({"item_id": f"q{start + i}", "first_id": "a", "second_id": "b",
                    "probabilities": dict(zip(PAIR_CLASSES, map(float, agg))),
                    "orders": [{"A": f1[0], "B": f1[1], "C": f1[2], "mass": 0.9},
                               {"A": f2[1], "B": f2[0], "C": f2[2], "mass": 0.9}],
                    "human": PAIR_CLASSES[int(human[i])]})
    return out


def _arrays(recs: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, list[list[float | None]], list[list[str]]]:
    probs = np.array([[r["probabilities"][c] for c in PAIR_CLASSES] for r in recs])
    human = np.array([PAIR_CLASSES.index(r["human"]) for r in recs])
    return probs, human, [E.pair_features(r) for r in recs], [[r["item_id"], "a", "b"] for r in recs]


def _calibration(probs: np.ndarray, human: np.ndarray, feats: list[list[float | None]], keys: list[list[str]],
                 confidence: str) -> Calibration:
    """A calibration file of these units (its own map the identity: a selection fits its map on part A)."""
    identity = CalibrationMap("vector", PAIR_CLASSES, {"temperature": 1.0, "bias": [0.0, 0.0, 0.0]})
    cal = Calibration("compare", _WHO["judge"], _WHO["fingerprint"], "t", "direct", identity, probs.tolist(),
                      human.tolist(), keys=keys)
    return Calibration(**{**cal.__dict__, **E.attach(cal, confidence, feats)})


def test_the_features_estimator_keeps_more_and_its_guarantee_holds_through_the_split_fit_selection() -> None:
    """100 calibration sets of 400 pairs from one population of 5,000: each selection (map and model fitted on
    part A, thresholds tested on part B) applied to the population, whose realised agreement on the kept pairs
    must fall below the target in at most delta + 3 standard errors of the sets; the features estimator keeps
    more than the calibrated top probability at the same target."""
    rng = np.random.default_rng(7)
    pop = _population(rng, 5_000)
    pop_probs, pop_human, pop_feats, _ = _arrays(pop)
    target, delta, sets = 0.8, 0.1, 100
    coverage: dict[str, list[float]] = {E.CALIBRATED: [], E.FEATURES: []}
    violated: dict[str, int] = {E.CALIBRATED: 0, E.FEATURES: 0}
    for k in range(sets):
        idx = rng.choice(len(pop), 400, replace=False)
        probs, human, feats, keys = _arrays([pop[i] for i in idx])
        keys = [[f"s{k}-{i}", "a", "b"] for i in range(len(idx))]
        for estimator, kept_shares in coverage.items():
            cal = _calibration(probs, human, feats, keys, estimator)
            try:
                sel = cal.selection(target, delta)
            except ConfigError:  # the target unsupported on this set: nothing kept, nothing violated
                kept_shares.append(0.0)
                continue
            verdict, conf, _ = E.confidences(cal, sel.map, sel.model, pop_probs,
                                             pop_feats if estimator == E.FEATURES else None)
            kept = sel.keep(conf)
            kept_shares.append(float(kept.mean()))
            violated[estimator] += bool(kept.any() and np.mean(verdict[kept] == pop_human[kept]) < target)
    bound = delta + 3 * np.sqrt(delta * (1 - delta) / sets)
    assert violated[E.FEATURES] / sets <= bound, violated
    assert violated[E.CALIBRATED] / sets <= bound, violated
    assert np.mean(coverage[E.FEATURES]) > np.mean(coverage[E.CALIBRATED]) + 0.05, \
        {k: np.mean(v) for k, v in coverage.items()}


def test_a_features_calibration_is_recorded_in_the_file_and_in_every_calibrated_block(tmp_path: Any) -> None:
    recs = _population(np.random.default_rng(1), 400)
    cal = fit("compare", recs, **_WHO, confidence="features")
    path = tmp_path / "cal.json"
    cal.save(path)
    data = json.loads(path.read_text())
    assert data["confidence"] == "features"
    assert data["confidence_model"]["features"][:4] == list(E.PROB_FEATURES)
    assert len(data["calibration_set"]["features"]) == cal.n
    loaded = Calibration.load(path)
    assert loaded.model == cal.model
    sel = loaded.selection(0.7, 0.1)
    out = annotate("compare", recs[:50], loaded, sel)
    block = out[0]["calibrated"]
    assert block["confidence_estimator"] == "features"
    assert set(block["features"]) == set(sel.model.names)
    x = E.feature_rows(loaded, sel.map, [list(recs[0]["probabilities"].values())], [E.pair_features(recs[0])])[2]
    assert block["confidence"] == pytest.approx(float(sel.model.predict(x)[0]))
    assert summary("compare", out, loaded, sel)["guarantee"]["confidence"] == "features"
    plain = fit("compare", recs, **_WHO)
    assert "confidence" not in plain.to_dict() and "features" not in plain.to_dict()["calibration_set"]
    assert "confidence_estimator" not in annotate("compare", recs[:1], plain, None)[0]["calibrated"]


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["confidence_model"]["coef"].__setitem__(0, float("nan")), "confidence_model'.coef"),
    (lambda d: d["confidence_model"].__setitem__("intercept", float("inf")), "confidence_model'.intercept"),
    (lambda d: d["confidence_model"]["scale"].__setitem__(1, 0.0), "confidence_model'.scale"),
    (lambda d: d["confidence_model"]["features"].append("length"), "confidence_model'.features"),
    (lambda d: d.__setitem__("confidence", "vibes"), "field 'confidence'"),
    (lambda d: d["calibration_set"]["features"][3].__setitem__(0, "x"), "calibration_set.features[3]"),
    (lambda d: d["calibration_set"].pop("features"), "calibration_set.features"),
])
def test_a_features_file_with_bad_coefficients_or_features_is_refused_naming_the_field(edit: Any, field: str) -> None:
    d = fit("compare", _population(np.random.default_rng(2), 60), **_WHO, confidence="features").to_dict()
    edit(d)
    with pytest.raises(ConfigError, match=field.replace(".", r"\.").replace("[", r"\[")):
        Calibration.from_dict(json.loads(json.dumps(d)), "cal.json")


def test_the_data_hash_covers_the_features() -> None:
    d = fit("compare", _population(np.random.default_rng(3), 60), **_WHO, confidence="features").to_dict()
    d["calibration_set"]["features"][0][0] = 0.123
    with pytest.raises(ConfigError, match="data_hash' does not match"):
        Calibration.from_dict(d, "cal.json")


# -- the shift warning ----------------------------------------------------------------------------------------

def _run_rows(cal: Calibration, sel: Any, recs: list[dict[str, Any]]) -> np.ndarray:
    probs, _, feats, _ = _arrays(recs)
    _, conf, x = E.confidences(cal, sel.map, sel.model, probs, feats if cal.features is not None else None)
    return np.c_[conf, x]


@pytest.mark.parametrize("confidence", ["calibrated", "features"])
def test_the_shift_warning_fires_on_shifted_runs_and_almost_never_on_exchangeable_ones(confidence: str) -> None:
    """One calibration set of 400 pairs; 200 runs of 300 pairs from the same population (the warning may fire in
    at most its level + 3 standard errors of them) and 50 runs from a flatter judge (it must fire in 90%)."""
    rng = np.random.default_rng(11)
    cal = fit("compare", _population(rng, 400), **_WHO, confidence=confidence)
    sel = cal.selection(0.7, 0.1)
    ref = _shift.reference(cal, sel)
    names = _shift.tested(cal)
    same = [bool(_shift.compare(ref, _run_rows(cal, sel, _population(rng, 300, 1000)), names)["warning"])
            for _ in range(200)]
    moved = [bool(_shift.compare(ref, _run_rows(cal, sel, _population(rng, 300, 1000, shift=0.12)), names)["warning"])
             for _ in range(50)]
    assert np.mean(same) <= _shift.SHIFT_LEVEL + 3 * np.sqrt(0.01 * 0.99 / 200), np.mean(same)
    assert np.mean(moved) >= 0.9, np.mean(moved)


def test_the_shift_warning_is_in_the_summary_and_on_the_guarantee_line() -> None:
    rng = np.random.default_rng(5)
    cal = fit("compare", _population(rng, 400), **_WHO)
    sel = cal.selection(0.7, 0.1)
    same = summary("compare", annotate("compare", _population(rng, 200, 1000), cal, sel), cal, sel)
    moved = summary("compare", annotate("compare", _population(rng, 200, 1000, shift=0.2), cal, sel), cal, sel)
    assert same["shift"]["warning"] is None and same["shift"]["calibration_verdicts"] == sel.n
    assert moved["shift"]["shifted"] and "confidence" in moved["shift"]["features"]
    assert "trustjudge sample" in moved["shift"]["warning"]
    assert "WARNING: shift:" in describe(moved) and "WARNING" not in describe(same)
    few = summary("compare", annotate("compare", _population(rng, 5, 1000, shift=0.2), cal, sel), cal, sel)
    assert few["shift"]["warning"] is None and "fewer than" in few["shift"]["skipped"]


def test_holm_adjusts_step_down() -> None:
    assert _shift.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_the_service_applies_a_features_calibration_sent_with_a_request(tmp_path: Any) -> None:
    from fastapi.testclient import TestClient

    from tests.conftest import write_jsonl
    from tests.test_serve_calibration import check_rows, sure_but_for_some
    from trustjudge import Judge, MockBackend, load_items
    from trustjudge.serve import create_app

    backend = MockBackend("sure", sure_but_for_some)
    with Judge(backend, store=tmp_path / "fit.sqlite") as judge:
        cal = judge.calibrate(load_items(write_jsonl(tmp_path / "cal.jsonl", check_rows(range(1000, 1300)))),
                              "checklist", confidence="features")
    assert cal.confidence == "features" and cal.model is not None
    app = create_app(MockBackend("sure", sure_but_for_some), store_path=tmp_path / "srv.sqlite")
    with TestClient(app) as c:
        ok = c.post("/v1/checklist", json={"items": check_rows(range(40), labelled=False),
                                           "calibration": cal.to_dict(), "target_agreement": 0.9})
        assert ok.status_code == 200, ok.text
        body = ok.json()
    assert body["calibration"]["guarantee"]["confidence"] == "features"
    assert "shift" in body["calibration"]
    blocks = [r["checks"][0]["calibrated"] for r in body["records"]]
    assert {b["confidence_estimator"] for b in blocks} == {"features"}
    assert sorted(i for i, b in enumerate(blocks) if b["abstained"] is not None) == list(range(0, 40, 5))


def test_the_cli_fits_a_features_calibration_verifies_it_and_a_cascade_refuses_it(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from trustjudge._cascade import thresholds
    from trustjudge.cli import cli

    items = tmp_path / "pairs.jsonl"
    items.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Which is right, {i}?", "responses": [
        {"id": "a", "text": f"Answer {i} one"}, {"id": "b", "text": f"Answer {i} two"}],
        "pairs": [{"first": "a", "second": "b", "human": ("first", "second", "tie")[i % 3]}]}) + "\n"
        for i in range(40)))
    store, out = tmp_path / "s.sqlite", tmp_path / "cal.json"
    run = CliRunner().invoke(cli, ["calibrate", str(items), "-j", "mock/hash", "--store", str(store), "--out", str(out),
                                   "--confidence", "features"], catch_exceptions=False)
    assert run.exit_code == 0, run.output
    assert "confidence features" in run.output
    cal = Calibration.load(out)
    assert cal.confidence == "features" and cal.model is not None and cal.features is not None
    assert all(row[0] is not None for row in cal.features)  # mock/hash judges both orders: pair features
    verified = CliRunner().invoke(cli, ["calibrate", str(items), "-j", "mock/hash", "--store", str(store), "--verify",
                                        str(out)], catch_exceptions=False)
    assert verified.exit_code == 0 and "verified" in verified.output, verified.output
    with pytest.raises(ConfigError, match="ranks its verdicts by `--confidence features`"):
        thresholds([cal], 0.6, 0.1)
    data = json.loads(out.read_text())
    data["confidence_model"]["coef"][0] += 1.0  # in the data hash (version 2): refused on load
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"forged.json: field 'data_hash' does not match its calibration set and "
                                          r"confidence estimator .*'confidence_model'"):
        Calibration.load(forged)
    coef = (cal.model.coef[0] + 1.0, *cal.model.coef[1:])
    data["data_hash"] = replace(cal, model=replace(cal.model, coef=coef)).data_hash  # as a forger would: the refit
    forged.write_text(json.dumps(data))  # catches it
    refused = CliRunner().invoke(cli, ["calibrate", str(items), "-j", "mock/hash", "--store", str(store), "--verify",
                                       str(forged)])
    assert refused.exit_code != 0 and "confidence model's coefficients" in str(refused.exception), refused.output
