"""The prompt-ensemble confidence estimator (issue 34): the combination, the split-fit selection on it, the file,
and `calibrate` / `select --confidence ensemble` end to end through the CLI on the hash judge."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from trustjudge._cascade import thresholds
from trustjudge.audit import _ensemble as EN
from trustjudge.audit._trust import PAIR_CLASSES, Calibration, annotate, fit
from trustjudge.errors import ConfigError

_WHO = {"judge": "mock/x", "fingerprint": "mock:x", "template": "t", "protocol": "direct"}


def _rec(i: int, p: np.ndarray, human: str | None, mass: float = 0.9) -> dict[str, Any]:
    return {"item_id": f"q{i}", "first_id": "a", "second_id": "b",
            "probabilities": dict(zip(PAIR_CLASSES, map(float, p))),
            "orders": [{"A": mass * p[0], "B": mass * p[1], "C": mass * p[2], "mass": mass},
                       {"A": mass * p[1], "B": mass * p[0], "C": mass * p[2], "mass": mass}],
            "verdicts": {"likelihood": PAIR_CLASSES[int(np.argmax(p))]}, "human": human}


def test_the_ensemble_is_the_mean_log_probability_renormalised() -> None:
    own = _rec(0, np.array([0.6, 0.3, 0.1]), "first")
    other = _rec(0, np.array([0.2, 0.7, 0.1]), "first", mass=0.5)
    (out,) = EN.combine([own], [[other]])
    g = np.sqrt(np.array([0.6, 0.3, 0.1]) * np.array([0.2, 0.7, 0.1]))
    assert [out["probabilities"][c] for c in PAIR_CLASSES] == pytest.approx(list(g / g.sum()))
    assert out["verdicts"]["likelihood"] == "second"  # sqrt(.21) > sqrt(.12): the combined verdict changes
    o = out["orders"][0]
    assert o["mass"] == pytest.approx(0.7)  # the mean of the two templates' label mass
    assert o["A"] / o["B"] == pytest.approx(math.sqrt(0.9 * 0.6 * 0.5 * 0.2) / math.sqrt(0.9 * 0.3 * 0.5 * 0.7))
    assert out["ensemble"]["templates"] == ["own", "pairwise_steps"]
    assert out["ensemble"]["probabilities"][1] == other["probabilities"]
    assert own["probabilities"]["first"] == 0.6  # the input is not changed
    (missing,) = EN.combine([own], [[]])  # a template that did not judge the pair leaves it unscored
    assert missing["probabilities"] is None and "ensemble" in missing["unscored"]


def test_three_templates_combine_by_the_geometric_mean_and_are_named() -> None:
    rows = [np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.7, 0.1]), np.array([0.5, 0.1, 0.4])]
    own, *others = (_rec(0, p, "first") for p in rows)
    (out,) = EN.combine([own], [[o] for o in others], ["pairwise_steps", "pairwise_rubric"])
    g = np.cbrt(rows[0] * rows[1] * rows[2])
    assert [out["probabilities"][c] for c in PAIR_CLASSES] == pytest.approx(list(g / g.sum()))
    assert out["ensemble"]["templates"] == ["own", "pairwise_steps", "pairwise_rubric"]
    with pytest.raises(ValueError, match="2 lists of records for 1 template names"):
        EN.combine([own], [[o] for o in others], ["pairwise_steps"])


def _population(rng: np.random.Generator, n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two templates' records of n pairs: each template alone is right with probability 0.7 and equally sure when
    wrong as when right (its top probability ranks nothing); the second template errs on other pairs, so where
    the two agree the verdict is more often right and the combination is sure."""
    human = rng.integers(0, 2, n)
    own, other = [], []
    for i in range(n):
        for out in (own, other):
            v = human[i] if rng.uniform() < 0.7 else 1 - human[i]
            p = np.full(3, 0.1)
            p[v], p[1 - v] = 0.6, 0.3
            out.append(_rec(i, p, PAIR_CLASSES[int(human[i])]))
    return own, other


def _auroc(conf: np.ndarray, agree: np.ndarray) -> float:
    pos, neg = conf[agree], conf[~agree]
    return float(np.mean([(p > q) + 0.5 * (p == q) for p in pos for q in neg]))


def test_the_ensemble_is_calibrated_and_selected_split_fit_and_ranks_what_one_template_cannot() -> None:
    own, other = _population(np.random.default_rng(3), 400)
    one = fit("compare", own, **_WHO)
    ens = fit("compare", EN.combine(own, [other]), **_WHO, confidence="ensemble")
    assert ens.confidence == "ensemble" and ens.model is None and one.confidence == "calibrated"
    for cal, better in ((one, False), (ens, True)):
        q = cal.map.apply(np.asarray(cal.probs))
        verdict, conf = cal.verdicts(q)
        area = _auroc(conf, cal.agrees(verdict, np.asarray(cal.human)))
        assert (area > 0.7) if better else (abs(area - 0.5) < 0.05), (cal.confidence, area)
    sel = ens.selection(0.75, 0.1)  # split-fit on the combined probabilities
    assert math.isfinite(sel.threshold) and sel.kept / sel.n > 0.3, sel
    with pytest.raises(ConfigError, match=r"cannot support agreement >= 0\.75"):
        one.selection(0.75, 0.1)  # one template alone: every verdict equally sure, 0.7 right
    back = Calibration.from_dict(json.loads(json.dumps(ens.to_dict())))
    assert back.confidence == "ensemble" and back.probs == ens.probs
    assert back.to_dict()["ensemble_templates"] == EN.template_ids()
    with pytest.raises(ConfigError, match="item 'q0': an ensemble calibration applies to pairs judged under each"):
        annotate("compare", own, ens)  # one template's records under the ensemble's map: refused
    assert annotate("compare", EN.combine(own, [other])[:1], ens)[0]["calibrated"]["confidence_estimator"] == "ensemble"
    with pytest.raises(ConfigError, match="ranks its verdicts by `--confidence ensemble`"):
        thresholds([ens], 0.7, 0.1)  # a cascade judges its tiers under one template
    d = ens.to_dict()
    d["ensemble_templates"] = [{"name": "pairwise_steps", "hash": "0" * 16}]
    with pytest.raises(ConfigError, match=r"ensemble_templates.*refit"):
        Calibration.from_dict(d, "cal.json")


def test_the_cli_calibrates_and_selects_with_the_ensemble_and_every_record_says_so(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from trustjudge.cli import cli
    from trustjudge.engine._store import Store

    items = tmp_path / "pairs.jsonl"
    items.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Which is right, {i}?", "responses": [
        {"id": "a", "text": f"Answer {i} one"}, {"id": "b", "text": f"Answer {i} two"}],
        "pairs": [{"first": "a", "second": "b", "human": ("first", "second", "tie")[i % 3]}]}) + "\n"
        for i in range(30)))
    store, out, recs = tmp_path / "s.sqlite", tmp_path / "cal.json", tmp_path / "out.jsonl"
    base = ["-j", "mock/hash", "--store", str(store)]
    run = CliRunner().invoke(cli, ["calibrate", str(items), *base, "--out", str(out), "--confidence", "ensemble"],
                             catch_exceptions=False)
    assert run.exit_code == 0, run.output
    assert "confidence ensemble" in run.output and "model calls 120" in run.output  # 30 pairs x 2 orders x 2
    assert Store(store).count() == 120
    cal = Calibration.load(out)
    assert cal.confidence == "ensemble" and json.loads(out.read_text())["ensemble_templates"] == EN.template_ids()
    again = CliRunner().invoke(cli, ["calibrate", str(items), *base, "--verify", str(out)], catch_exceptions=False)
    assert again.exit_code == 0 and "verified" in again.output, again.output
    sel = CliRunner().invoke(cli, ["select", str(items), *base, "--calibration", str(out), "--out", str(recs)],
                             catch_exceptions=False)
    assert sel.exit_code == 0 and "model calls 0" in sel.output, sel.output  # zero-call: both templates stored
    rows = [json.loads(line) for line in recs.read_text().splitlines()]
    assert len(rows) == 30
    assert {r["calibrated"]["confidence_estimator"] for r in rows} == {"ensemble"}
    assert all(len(r["ensemble"]["probabilities"]) == 2 for r in rows)
    one = CliRunner().invoke(cli, ["calibrate", str(items), *base, "--out", str(tmp_path / "one.json")],
                             catch_exceptions=False)
    assert one.exit_code == 0
    assert Calibration.load(tmp_path / "one.json").probs != cal.probs  # the ensemble's are other probabilities


def test_the_ensemble_judges_only_a_mode_that_judges_under_the_pairwise_template(tmp_path: Any) -> None:
    from trustjudge import Judge, items_from_dicts

    items = items_from_dicts([{"id": "q", "question": "2+2?",
                               "responses": [{"id": "a", "text": "4", "human_score": 5},
                                             {"id": "b", "text": "5", "human_score": 1}]}])
    with Judge("mock/hash", store=tmp_path / "s.sqlite") as judge, pytest.raises(
            ConfigError, match=r"judges pairs under the pairwise template \(the modes compare\), not score verdicts"):
        judge.calibrate(items, "score", confidence="ensemble")


def test_an_ensemble_file_whose_estimator_was_renamed_is_refused() -> None:
    """An ensemble calibration edited to say `calibrated` kept its data hash and was applied to one-template
    records (a map fitted on combined probabilities): refused, naming the fields."""
    recs = [{"item_id": f"q{i}", "first_id": "a", "second_id": "b", "human": ("first", "second")[i % 2],
             "probabilities": {"first": 0.6, "second": 0.3, "tie": 0.1}} for i in range(8)]
    d = fit("compare", recs, judge="mock/x", fingerprint="f", template="t", protocol="direct").to_dict()
    d["ensemble_templates"] = EN.template_ids()
    with pytest.raises(ConfigError, match="field 'ensemble_templates' belongs to an ensemble calibration"):
        Calibration.from_dict(d, "cal.json")
