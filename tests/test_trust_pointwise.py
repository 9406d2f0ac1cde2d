"""Pointwise (score mode) calibration and selective verdicts: agreement within a tolerance, its confidence,
the guarantee in simulation, the CLI and library, and the real small judge end to end."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from tests.conftest import write_jsonl
from trustjudge import ConfigError, Judge, MockBackend, load_items, register_mock
from trustjudge.audit._calibration import CalibrationMap, Selection, choose_threshold
from trustjudge.audit._evaluation import evaluation
from trustjudge.audit._trust import (
    Calibration,
    Tally,
    abstained_items,
    annotate,
    fit,
    nearest_level,
    score_agrees,
    score_verdicts,
)
from trustjudge.backends import LabelRequest
from trustjudge.cli import cli

LEVELS = ("1", "2", "3", "4", "5")


def _identity(probs: list[list[float]], human: list[int], tolerance: float) -> Calibration:
    """A score calibration whose map changes nothing (temperature 1, no bias) over the levels 1..5."""
    cmap = CalibrationMap("vector", LEVELS, {"temperature": 1.0, "bias": [0.0] * 5})
    return Calibration("score", "mock/x", "mock:x", "t", "direct", cmap, probs, human,
                       levels=[1.0, 2.0, 3.0, 4.0, 5.0], tolerance=tolerance)


def _record(item: str, dist: list[float] | None, human: float | None) -> dict[str, Any]:
    scored = dist is not None
    return {"item_id": item, "response_id": "r", "scores": {"expected": 3.0 if scored else None},
            "unscored": None if scored else "no_label_mass", "human_score": human,
            **({"distribution": dict(zip(LEVELS, dist))} if dist is not None else {})}


# -- the maths, on hand-made numbers --------------------------------------------------------------------------

def test_the_verdict_is_the_level_with_most_mass_within_the_tolerance() -> None:
    q = [[0.1, 0.2, 0.3, 0.25, 0.15], [0.4, 0.0, 0.3, 0.3, 0.0]]
    v0, c0 = score_verdicts(q, [1, 2, 3, 4, 5], 0)
    assert v0.tolist() == [2, 0] and c0.tolist() == pytest.approx([0.3, 0.4])  # the argmax and its probability
    v1, c1 = score_verdicts(q, [1, 2, 3, 4, 5], 1)
    # row 1, windows of levels 1..5: .3 .6 .75 .7 .4 -> level 3 (.2 + .3 + .25)
    # row 2: .4 .7 .6 .6 .3 -> level 2 (.4 + 0 + .3), not the argmax level 1
    assert v1.tolist() == [2, 1] and c1.tolist() == pytest.approx([0.75, 0.7])
    v2, c2 = score_verdicts(q, [1, 2, 3, 4, 5], 2)
    # row 1: 1..5 all within 2 of level 3; row 2: levels 1..4 within 2 of level 2 already hold it all (a tie
    # with level 3 goes to the lower level)
    assert v2.tolist() == [2, 1] and c2.tolist() == pytest.approx([1.0, 1.0])
    # a labelled scale's own values: levels 0, 2, 4 are 2 apart, so tolerance 1 is exact agreement
    v3, c3 = score_verdicts([[0.3, 0.45, 0.25]], [0, 2, 4], 1)
    assert v3.tolist() == [1] and c3.tolist() == pytest.approx([0.45])


def test_agreement_within_the_tolerance_and_the_nearest_level() -> None:
    levels = [1, 2, 3, 4, 5]
    assert score_agrees([2, 2, 2, 0], [2, 3, 4, 4], levels, 0).tolist() == [True, False, False, False]
    assert score_agrees([2, 2, 2, 0], [2, 3, 4, 4], levels, 1).tolist() == [True, True, False, False]
    assert score_agrees([2, 2, 2, 0], [2, 3, 4, 4], levels, 0.5).tolist() == [True, False, False, False]
    assert score_agrees([2, 2, 2, 0], [2, 3, 4, 4], levels, 3).tolist() == [True, True, True, False]
    assert score_agrees([2, 2, 2, 0], [2, 3, 4, 4], levels, 4).tolist() == [True, True, True, True]
    assert [nearest_level(x, levels) for x in (3.4, 3.5, 3.6, 0.6, 5.5, 4.0)] == [2, 2, 3, 0, 4, 3]
    assert nearest_level(0.4, levels) is None and nearest_level(7, levels) is None  # another scale


def test_annotated_records_and_the_summary_by_hand() -> None:
    dists = [[0.1, 0.2, 0.3, 0.25, 0.15], [0.4, 0.0, 0.3, 0.3, 0.0], [0.0, 0.0, 0.1, 0.1, 0.8], None]
    humans = [4, 1, 2, None]
    records = [_record(f"i{k}", d, h) for k, (d, h) in enumerate(zip(dists, humans))]
    cal = _identity([[0.2] * 5, [0.2] * 5], [0, 1], tolerance=1)
    # confidences (mass within 1 of the verdict): .75 (level 3), .7 (level 2), 1.0 (level 4: .1 + .1 + .8)
    cut = Selection(0.72, 0.5, 0.5, 3, 2, 1.0, 0.5)  # keep confidence >= 0.72 (hand-made)
    out = annotate("score", records, cal, cut)
    blocks = [r["calibrated"] for r in out]
    assert [b["verdict"] for b in blocks] == ["3", "2", "4", None]
    assert [b["confidence"] for b in blocks[:3]] == pytest.approx([0.75, 0.7, 1.0])
    assert blocks[0]["expected"] == pytest.approx(0.1 + 0.4 + 0.9 + 1.0 + 0.75)
    assert blocks[2]["expected"] == pytest.approx(0.3 + 0.4 + 4.0)
    assert [b["abstained"] for b in blocks] == [None, "below_threshold", None, "unscored"]
    assert all(b["tolerance"] == 1 for b in blocks)
    assert out[0]["distribution"] == records[0]["distribution"]  # the raw distribution stays
    tally = Tally("score", cal, cut)
    for rec in out:
        tally.add(rec)
    result = tally.result()
    # kept: record 0 (verdict 3, human 4: within 1, agrees) and record 2 (verdict 4, human 2: 2 away, disagrees)
    assert (result["verdicts"], result["kept"], result["labelled_kept"]) == (4, 2, 2)
    assert result["agreement_on_kept"] == pytest.approx(1 / 2)
    assert result["abstained"] == {"below_threshold": 1, "unscored": 1}
    assert result["calibration"]["tolerance"] == 1
    # with tolerance 0 the same records: verdicts are the argmax levels, none kept agrees
    exact = annotate("score", records, _identity([[0.2] * 5, [0.2] * 5], [0, 1], tolerance=0))
    assert [r["calibrated"]["verdict"] for r in exact[:3]] == ["3", "1", "5"]
    assert [r["calibrated"]["confidence"] for r in exact[:3]] == pytest.approx([0.3, 0.4, 0.8])
    # abstained items: the responses behind abstained verdicts
    items = {f"i{k}": {"id": f"i{k}", "question": "q", "responses": [{"id": "r", "text": "t"}]} for k in range(4)}
    assert [it["id"] for it in abstained_items("score", out, items)] == ["i1", "i3"]


def test_the_selection_is_the_threshold_test_on_tolerance_agreement() -> None:
    rng = np.random.default_rng(3)
    probs = rng.dirichlet([0.5] * 5, size=300)
    human = [int(rng.choice(5, p=p)) for p in probs]
    cal = _identity(probs.tolist(), human, tolerance=1)

    def by_hand(rows: np.ndarray, labels: list[int]) -> tuple[list[float], list[bool]]:
        # the mass within 1 of the best level, and whether the human is within 1 of it
        conf, agree = [], []
        for p, h in zip(rows, labels):
            windows = [sum(p[j] for j in range(5) if abs(j - k) <= 1) for k in range(5)]
            k = int(np.argmax(windows))
            conf.append(windows[k])
            agree.append(abs(k - h) <= 1)
        return conf, agree

    _conf, agree = by_hand(probs, human)
    sel = cal.selection(0.8, 0.1)
    # the thresholds are tested on part B of the split, under the map fitted on part A (changed by the split)
    part_a = cal.split()
    assert sel.map is not None and sel.fit_units == part_a.sum() == 150
    test_conf, test_agree = by_hand(sel.map.apply(probs[~part_a]), [h for h, a in zip(human, part_a) if not a])
    hand = choose_threshold(test_conf, test_agree, alpha=1 - 0.8, delta=0.1)
    assert (sel.kept, sel.n, sel.agreement, sel.lower_bound) == (hand.kept, hand.n, hand.agreement, hand.lower_bound)
    assert sel.n == 150 and sel.threshold == pytest.approx(hand.threshold)
    # the report's numbers read the same agreement (within 1): accuracy and the selective-risk curve's end
    report = evaluation("score", [], cal, sel)
    assert report["source"] == "calibration set" and report["after"]["accuracy"] == pytest.approx(np.mean(agree))
    assert report["risk_curve"][-1]["agreement"] == pytest.approx(np.mean(agree))
    every_conf, _ = by_hand(sel.map.apply(probs), human)  # the selection keeps by the selection map's confidence
    assert report["selection"]["coverage"] == pytest.approx(np.mean(np.asarray(every_conf) >= sel.threshold))
    assert sel.supported and sel.lower_bound is not None and sel.lower_bound >= 0.8 - 1e-9
    # tolerance 0: the top level and its probability, agreement on the level itself
    exact = _identity(probs.tolist(), human, tolerance=0).selection(0.5, 0.1)
    assert exact.map is not None
    q = exact.map.apply(probs[~part_a])  # the same split: it depends on the file's content, not the tolerance
    top = q.argmax(axis=1)
    hand_exact = choose_threshold(q.max(axis=1), top == np.asarray(human)[~part_a], alpha=0.5, delta=0.1)
    assert (exact.kept, exact.agreement) == (hand_exact.kept, hand_exact.agreement)


def test_the_file_keeps_the_tolerance_and_refuses_a_mismatch_or_a_bad_field(tmp_path: Path) -> None:
    records = [_record(f"i{k}", d, h) for k, (d, h) in enumerate([
        ([0.1, 0.2, 0.3, 0.25, 0.15], 3), ([0.6, 0.2, 0.1, 0.05, 0.05], 1), ([0.0, 0.1, 0.1, 0.3, 0.5], 5),
        ([0.2, 0.5, 0.2, 0.05, 0.05], 2.4), ([0.05, 0.05, 0.2, 0.5, 0.2], 4)])]
    cal = fit("score", records, judge="mock/x", fingerprint="mock:x", template="t", protocol="direct", tolerance=1)
    assert cal.map.method == "vector" and cal.tolerance == 1 and cal.levels == [1, 2, 3, 4, 5]
    assert cal.human == [2, 0, 4, 1, 3]  # 2.4 -> level 2
    path = tmp_path / "cal.json"
    cal.save(path)
    again = Calibration.load(path)
    assert again.to_dict() == cal.to_dict() and again.tolerance == 1
    again.check_tolerance(None)
    again.check_tolerance(1.0)
    with pytest.raises(ConfigError, match=r"fitted with tolerance 1, not 0: refit it with `trustjudge calibrate "
                                          r"--mode score --tolerance 0`"):
        again.check_tolerance(0)
    data = json.loads(path.read_text())
    for field, value, message in [("tolerance", -1, "tolerance must be a finite number >= 0"),
                                  ("tolerance", "1", "tolerance must be a finite number >= 0"),
                                  ("levels", [1, 2], "field 'levels' needs one finite level value per class")]:
        bad = tmp_path / f"bad_{field}.json"
        bad.write_text(json.dumps({**data, field: value}))
        with pytest.raises(ConfigError, match=message):
            Calibration.load(bad)
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({k: v for k, v in data.items() if k != "tolerance"}))
    with pytest.raises(ConfigError, match="missing field 'tolerance'"):
        Calibration.load(missing)
    # the other modes take no tolerance
    with pytest.raises(ConfigError, match="a tolerance applies to score and criteria calibrations, not to compare"):
        fit("compare", [], judge="j", fingerprint="f", template="t", protocol="direct", tolerance=1)
    # temperature alone when asked (and by default above 11 levels): no bias
    temp = fit("score", records, judge="mock/x", fingerprint="mock:x", template="t", protocol="direct",
               method="temperature")
    assert temp.map.method == "temperature" and set(temp.map.params) == {"temperature"}
    assert Calibration.from_dict(temp.to_dict()).to_dict() == temp.to_dict()


def test_long_scales_get_a_temperature_alone_and_it_is_recovered() -> None:
    # a 0-100 scale's 101 levels: a temperature (one parameter), not 101 biases
    rng = np.random.default_rng(7)
    labels = [str(v) for v in range(101)]
    true_t = 2.0
    rows, raw = [], []
    for k in range(400):
        logits = -np.abs(np.arange(101) - rng.uniform(0, 100)) / rng.uniform(2, 10)
        q = np.exp(logits - logits.max())
        q /= q.sum()
        p = q ** true_t / np.sum(q ** true_t)  # the judge: overconfident by exactly the temperature
        raw.append(p)
        rows.append({"item_id": f"i{k}", "response_id": "r", "scores": {"expected": 1.0}, "unscored": None,
                     "human_score": int(rng.choice(101, p=q)), "distribution": dict(zip(labels, p.tolist()))})
    cal = fit("score", rows, judge="j", fingerprint="f", template="t", protocol="direct")
    assert cal.map.method == "temperature" and cal.levels == list(range(101))
    assert cal.map.params["temperature"] == pytest.approx(true_t, rel=0.15), cal.map.params
    # 11 levels or fewer: vector scaling (a bias per level)
    short = [{**r, "distribution": dict(zip(LEVELS, [0.2] * 5)), "human_score": 1 + k % 5} for k, r in
             enumerate(rows[:20])]
    assert fit("score", short, judge="j", fingerprint="f", template="t", protocol="direct").map.method == "vector"


def test_bad_score_records_are_refused_clearly() -> None:
    base = [_record("i0", [0.1, 0.2, 0.3, 0.25, 0.15], 3), _record("i1", [0.6, 0.2, 0.1, 0.05, 0.05], 1)]
    args = dict(judge="mock/x", fingerprint="mock:x", template="t", protocol="direct")
    off_scale = [*base, _record("i2", [0.2] * 5, 9)]
    with pytest.raises(ConfigError, match=r"item 'i2', response 'r': human_score 9 lies outside the judging "
                                          r"scale 1..5"):
        fit("score", off_scale, **args)  # type: ignore[arg-type]
    no_dist = [*base, {**_record("i3", None, 2), "unscored": None, "scores": {"expected": 2.0}}]
    with pytest.raises(ConfigError, match=r"record 3 \(item 'i3', response 'r'\): a score record without its "
                                          r"distribution.*--distribution"):
        fit("score", no_dist, **args)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no score or criterion carries its distribution"):
        fit("score", [_record("i4", None, 2)], **args)  # type: ignore[arg-type]


# -- the guarantee in simulation ------------------------------------------------------------------------------

def _population(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A judge of known calibration on levels 1..5: each response's true distribution ``q`` (a random centre
    and sharpness), and the judge's raw probabilities, overconfident: ``q**2`` renormalised (so a vector map
    of temperature 2 and no bias gives ``q`` back exactly)."""
    centre = rng.uniform(1, 5, size=n)
    sharp = rng.uniform(0.05, 2.0, size=n)
    logits = -sharp[:, None] * np.abs(np.arange(1, 6)[None, :] - centre[:, None]) + rng.normal(0, 0.5, (n, 5))
    q = np.exp(logits - logits.max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    raw = q ** 2
    return q, raw / raw.sum(axis=1, keepdims=True)


def test_the_guarantee_holds_in_simulation_and_a_naive_threshold_breaks_it() -> None:
    rng = np.random.default_rng(2026)
    target, delta, tolerance, n_cal, trials = 0.9, 0.1, 1, 300, 1000
    q_pop, raw_pop = _population(rng, 40_000)
    cmap = CalibrationMap("vector", LEVELS, {"temperature": 2.0, "bias": [0.0] * 5})
    levels = [1, 2, 3, 4, 5]
    # in the population, the calibrated confidence is the exact probability of agreement (within 1) of a unit
    _, conf_pop = score_verdicts(cmap.apply(raw_pop), levels, tolerance)
    assert np.allclose(cmap.apply(raw_pop), q_pop)
    order = np.argsort(-conf_pop)
    true_curve = np.cumsum(conf_pop[order]) / np.arange(1, conf_pop.size + 1)

    def true_agreement(threshold: float) -> float:
        kept = int(np.count_nonzero(conf_pop >= threshold))
        return float(true_curve[kept - 1]) if kept else 1.0

    window = (np.abs(np.subtract.outer(levels, levels)) <= tolerance).astype(float)
    agree_pop = q_pop @ window  # agree_pop[i, v]: the true probability that a human agrees within 1 with level v

    def true_selected(selection: Selection) -> tuple[float, float]:
        # the selection keeps and decides by its own map (fitted on part A of the split): its true agreement
        assert selection.map is not None
        verdict, conf = score_verdicts(selection.map.apply(raw_pop), levels, tolerance)
        kept = conf >= selection.threshold
        if not kept.any():
            return 1.0, 0.0
        return float(agree_pop[np.flatnonzero(kept), verdict[kept]].mean()), float(kept.mean())

    violations = naive_violations = 0
    coverage = []
    for _ in range(trials):
        idx = rng.choice(conf_pop.size, size=n_cal, replace=False)
        human = [int(rng.choice(5, p=q_pop[i])) for i in idx]
        cal = Calibration("score", "sim", "sim", "t", "direct", cmap, raw_pop[idx].tolist(), human,
                          levels=[float(v) for v in levels], tolerance=tolerance)
        try:
            agreement, covered = true_selected(cal.selection(target, delta))
        except ConfigError:  # this set supports no threshold: nothing is kept, nothing can be wrong
            agreement, covered = 1.0, 0.0
        violations += agreement < target
        coverage.append(covered)
        # naive: the lowest threshold whose kept calibration verdicts agree >= target, no test
        verdict, conf = cal.verdicts(cal.calibrated(cal.probs))
        agree = cal.agrees(verdict, human)
        o = np.argsort(-conf)
        running = np.cumsum(agree[o]) / np.arange(1, n_cal + 1)
        ok = np.flatnonzero(running >= target)
        naive = float(conf[o][ok[-1]]) if ok.size else math.inf
        naive_violations += true_agreement(naive) < target
    bound = delta + 3 * math.sqrt(delta * (1 - delta) / trials)
    rate, naive_rate = violations / trials, naive_violations / trials
    print(f"violation rate {rate:.3f} (naive {naive_rate:.3f}, bound {bound:.3f}), coverage {np.mean(coverage):.3f}")
    assert rate <= bound, (rate, bound)
    assert naive_rate > bound, (naive_rate, bound)  # the test can fail: without the binomial test it does
    assert 0.1 < float(np.mean(coverage)) < 0.9, np.mean(coverage)  # a real trade-off, not all or nothing


# -- the library and the CLI on a scripted judge --------------------------------------------------------------

_TEXT = re.compile(r"Answer worth (\d) \((\d+)\)")


def _knowing(request: LabelRequest) -> list[float]:
    """Puts most mass on the level the text names, the sharper the higher its number's hash."""
    found = _TEXT.search(request.prompt)
    values = [int(re.match(r"\d+", label).group()) for label in request.labels]  # type: ignore[union-attr]
    if found is None:
        return [1 / len(values)] * len(values)
    level, i = int(found.group(1)), int(found.group(2))
    sharp = 0.5 + 2.5 * ((i * 37) % 100) / 100
    w = [math.exp(-sharp * abs(v - level)) for v in values]
    return [x / sum(w) for x in w]


@pytest.fixture
def knowing() -> Iterator[MockBackend]:
    backend = MockBackend("knowscore", script=_knowing)
    register_mock("knowscore", backend)
    try:
        yield backend
    finally:
        register_mock("knowscore", None)


def _score_rows(n: int, prefix: str = "s", start: int = 0) -> list[dict[str, Any]]:
    """One response per item naming a level 1..5; the human agrees with it, except on half the items the judge
    is least sure of (:func:`_knowing`'s lowest quarter of sharpness), where the human is two levels away."""
    rows = []
    for i in range(start, start + n):
        level = 1 + (i * 7) % 5
        unsure = (i * 37) % 100 < 25 and i % 2 == 0
        human = level if not unsure else level + 2 if level <= 3 else level - 2
        rows.append({"id": f"{prefix}{i}", "question": "Rate it.",
                     "responses": [{"id": "r", "text": f"Answer worth {level} ({i})", "human_score": human}]})
    return rows


def _invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_library_calibrate_score_and_select(tmp_path: Path, knowing: MockBackend) -> None:
    items = load_items(write_jsonl(tmp_path / "items.jsonl", _score_rows(200)))  # 200: the split tests on 100
    with Judge("mock/knowscore", store=tmp_path / "s.sqlite", scale=5) as judge:
        cal = judge.calibrate(items, mode="score", tolerance=1)
        assert cal.mode == "score" and cal.n == 200 and cal.tolerance == 1 and cal.map.method == "vector"
        assert cal.levels == [1, 2, 3, 4, 5] and cal.map.classes == LEVELS
        calls = judge.stats.model_calls
        records, summary = judge.select(items, cal, target=0.9, delta=0.1)
        assert judge.stats.model_calls == calls  # every judgment from the store
        g = summary["guarantee"]
        assert g["agreement_lower_bound"] >= 0.9 - 1e-9 and summary["kept"] > 0
        for rec in records:
            block = rec["calibrated"]
            mass = {int(k): v for k, v in block["probabilities"].items()}
            verdict = int(block["verdict"])
            assert block["confidence"] == pytest.approx(sum(p for v, p in mass.items() if abs(v - verdict) <= 1))
            assert (block["abstained"] is None) == (block["confidence"] >= g["threshold"])
        # by hand: agreement within 1 on the kept verdicts
        kept = [r for r in records if r["calibrated"]["abstained"] is None]
        agreed = sum(abs(int(r["calibrated"]["verdict"]) - round(r["human_score"])) <= 1 for r in kept)
        assert summary["agreement_on_kept"] == pytest.approx(agreed / len(kept))
    # another scale does not fit
    with Judge("mock/knowscore", store=tmp_path / "s.sqlite", scale=10) as other, \
            pytest.raises(ConfigError, match="the calibration covers the score classes 1, 2, 3, 4, 5"):
        other.check_calibration(cal)


def test_cli_calibrate_score_apply_and_refuse_a_tolerance_mismatch(tmp_path: Path, knowing: MockBackend) -> None:
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _score_rows(300))  # 300 (was 100): the split tests on 150
    new_items = write_jsonl(tmp_path / "new.jsonl", _score_rows(40, prefix="n", start=500))
    store = tmp_path / "s.sqlite"
    fitted = _invoke("calibrate", cal_items, "--mode", "score", "--scale", "5", "--tolerance", "1",
                     "-j", "mock/knowscore", "--store", store, "--out", tmp_path / "cal.json")
    assert fitted.exit_code == 0, fitted.output
    assert "model calls 300" in fitted.stderr
    args = ["score", new_items, "--scale", "5", "-j", "mock/knowscore", "--store", store, "--calibration",
            tmp_path / "cal.json", "--target-agreement", "0.9", "--risk-delta", "0.1"]
    first = _invoke(*args, "--out", tmp_path / "a.jsonl", "--summary", tmp_path / "a.json")
    assert first.exit_code == 0, first.output
    assert "tolerance 1" in first.stderr and "guaranteed agreement >= 0.9" in first.stderr
    records = _lines(tmp_path / "a.jsonl")
    summary = json.loads((tmp_path / "a.json").read_text())
    g = summary["guarantee"]
    assert summary["calibration"]["tolerance"] == 1 and g["calibration_n"] == 150
    assert g["selection"] == {"fit_units": 150, "test_units": 150}
    assert all(r["calibrated"]["selection"] == g["selection"] for r in records)
    for rec in records:
        assert set(rec["distribution"]) == set(LEVELS)  # kept for the calibration without --distribution
        assert (rec["calibrated"]["abstained"] is None) == (rec["calibrated"]["confidence"] >= g["threshold"])
    assert summary["kept"] == sum(r["calibrated"]["abstained"] is None for r in records)
    again = _invoke(*args, "--tolerance", "1", "--out", tmp_path / "b.jsonl")
    assert again.exit_code == 0 and "model calls: 0" in again.stderr, again.stderr
    assert _lines(tmp_path / "b.jsonl") == records
    # a tolerance the file was not fitted with: refused before any judging
    other = tmp_path / "other.sqlite"
    wrong = CliRunner().invoke(cli, [str(a) for a in [*args[:7], other, *args[8:], "--tolerance", "0"]])
    assert wrong.exit_code == 1 and "fitted with tolerance 1, not 0" in str(wrong.exception)
    assert not other.exists()
    # another scale: refused, naming the classes
    scale10 = CliRunner().invoke(cli, [str(a) for a in ["score", new_items, "-j", "mock/knowscore", "--store", store,
                                                         "--calibration", tmp_path / "cal.json"]])
    assert scale10.exit_code == 1 and "the calibration covers the score classes 1, 2, 3, 4, 5" in str(scale10.exception)
    # --tolerance belongs to score calibrations
    misplaced = CliRunner().invoke(cli, ["calibrate", str(cal_items), "--mode", "checklist", "--tolerance", "1",
                                         "-j", "mock/knowscore", "--out", str(tmp_path / "x.json")])
    assert misplaced.exit_code == 2 and "--tolerance applies to --mode score" in misplaced.output
    # select: the same verdicts, and the abstained responses written for labelling
    sel = _invoke("select", new_items, "--scale", "5", "-j", "mock/knowscore", "--store", store, "--calibration",
                  tmp_path / "cal.json", "--target-agreement", "0.9", "--risk-delta", "0.1", "-o", tmp_path / "s.jsonl",
                  "--abstained-out", tmp_path / "todo.jsonl")
    assert sel.exit_code == 0, sel.output
    assert "model calls 0" in sel.stderr
    assert [r["calibrated"] for r in _lines(tmp_path / "s.jsonl")] == [r["calibrated"] for r in records]
    todo = [it.id for it in load_items(tmp_path / "todo.jsonl")]
    assert todo and todo == [r["item_id"] for r in records if r["calibrated"]["abstained"] is not None]


# -- criteria: one unit per criterion ------------------------------------------------------------------------

def _criteria_record(item: str, parts: list[tuple[str, list[float] | None, float | None]],
                     labels: dict[str, int] | None = None) -> dict[str, Any]:
    crits = []
    for name, dist, human in parts:
        names = list(labels) if labels else list(LEVELS)
        crits.append({"name": name, "scores": {"expected": 1.0 if dist else None},
                      "unscored": None if dist else "no_label_mass", "human": human,
                      **({"distribution": dict(zip(names, dist))} if dist else {}),
                      **({"labels": labels} if labels else {})})
    return {"item_id": item, "response_id": "r", "criteria": crits}


def test_criteria_units_are_each_criterion_on_the_shared_levels(tmp_path: Path) -> None:
    records = [_criteria_record("i0", [("acc", [0.1, 0.2, 0.3, 0.25, 0.15], 4), ("style", [0.6, 0.2, 0.1, 0.05, 0.05],
                                                                                       1)]),
               _criteria_record("i1", [("acc", [0.0, 0.1, 0.1, 0.3, 0.5], 5), ("style", None, 2)]),
               _criteria_record("i2", [("acc", [0.2, 0.5, 0.2, 0.05, 0.05], 2.4)])]
    args = dict(judge="mock/x", fingerprint="mock:x", template="t", protocol="direct")
    cal = fit("criteria", records, tolerance=1, **args)  # type: ignore[arg-type]
    assert cal.mode == "criteria" and cal.n == 4 and cal.human == [3, 0, 4, 1] and cal.levels == [1, 2, 3, 4, 5]
    assert [k[2:] for k in cal.keys or []] == [["criteria", 0], ["criteria", 1], ["criteria", 0], ["criteria", 0]]
    ident = Calibration("criteria", "mock/x", "mock:x", "t", "direct",
                        CalibrationMap("vector", LEVELS, {"temperature": 1.0, "bias": [0.0] * 5}), cal.probs,
                        cal.human, levels=[1.0, 2.0, 3.0, 4.0, 5.0], tolerance=1)
    out = annotate("criteria", records, ident, Selection(0.72, 0.5, 0.5, 4, 2, 1.0, 0.5))
    blocks = [c["calibrated"] for rec in out for c in rec["criteria"]]
    # within 1: .75 at level 3; .9 at level 2 (.6 + .2 + .1, not level 1's .8); .9 at 4; .9 at 2
    assert [b["verdict"] for b in blocks] == ["3", "2", "4", None, "2"]
    assert [b["confidence"] for b in blocks if b["confidence"] is not None] == pytest.approx([0.75, 0.9, 0.9, 0.9])
    assert [b["abstained"] for b in blocks] == [None, None, None, "unscored", None]
    tally = Tally("criteria", ident, None)
    for rec in out:
        tally.add(rec)
    # agreement within 1: 3 vs 4 yes, 2 vs 1 yes, 4 vs 5 yes, 2 vs 2 (2.4 -> 2) yes
    assert (tally.result()["kept"], tally.result()["agreement_on_kept"]) == (4, 1.0)
    items = {f"i{k}": {"id": f"i{k}", "question": "q", "responses": [{"id": "r", "text": "t"}]} for k in range(3)}
    assert [it["id"] for it in abstained_items("criteria", out, items)] == ["i1"]
    # a labelled scale: the levels are its values; another scale among the criteria is refused
    named = {"poor": 0, "fair": 2, "good": 4}
    labelled = [_criteria_record(f"n{k}", [("acc", [0.2, 0.3, 0.5], h)], named) for k, h in enumerate([0, 2.9, 4])]
    lab = fit("criteria", labelled, **args)  # type: ignore[arg-type]
    assert lab.levels == [0, 2, 4] and lab.human == [0, 1, 2] and lab.map.classes == ("poor", "fair", "good")
    mixed = [*records, _criteria_record("i9", [("acc", [0.5, 0.5, 0.0], 1)], {"1": 1, "2": 2, "3": 3})]
    with pytest.raises(ConfigError, match=r"criterion 'acc'\): its levels \['1', '2', '3'\] are not the "
                                          r"calibration's"):
        fit("criteria", mixed, **args)  # type: ignore[arg-type]
    off = [*records, _criteria_record("i8", [("acc", [0.2] * 5, 8)])]
    with pytest.raises(ConfigError, match=r"item 'i8', response 'r', criterion 'acc': human_criteria 8 lies outside"):
        fit("criteria", off, **args)  # type: ignore[arg-type]


def _criteria_rows(n: int, prefix: str = "k", start: int = 0) -> list[dict[str, Any]]:
    rows = _score_rows(n, prefix, start)
    for row in rows:
        row["criteria"] = [{"name": "worth", "description": "How much is the answer worth?"}]
        response = row["responses"][0]
        response["human_criteria"] = {"worth": response.pop("human_score")}
    return rows


def test_cli_calibrates_criteria_and_applies_it(tmp_path: Path, knowing: MockBackend) -> None:
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _criteria_rows(100))
    new_items = write_jsonl(tmp_path / "new.jsonl", _criteria_rows(20, prefix="m", start=700))
    store = tmp_path / "s.sqlite"
    fitted = _invoke("calibrate", cal_items, "--mode", "criteria", "-j", "mock/knowscore",
                     "--store", store, "--out", tmp_path / "cal.json")
    assert fitted.exit_code == 0, fitted.output
    cal = Calibration.load(tmp_path / "cal.json")
    assert cal.mode == "criteria" and cal.n == 100 and cal.tolerance == 0  # the default: the same level
    args = ["criteria", new_items, "-j", "mock/knowscore", "--store", store, "--calibration", tmp_path / "cal.json",
            "--target-agreement", "0.85", "--risk-delta", "0.1"]
    first = _invoke(*args, "--out", tmp_path / "a.jsonl", "--summary", tmp_path / "a.json")
    assert first.exit_code == 0, first.output
    summary = json.loads((tmp_path / "a.json").read_text())
    records = _lines(tmp_path / "a.jsonl")
    g = summary["guarantee"]
    blocks = [c["calibrated"] for r in records for c in r["criteria"]]
    assert len(blocks) == 20 and summary["kept"] == sum(b["abstained"] is None for b in blocks)
    assert 0 < summary["kept"] < 20 and g["agreement_lower_bound"] >= 0.85 - 1e-9
    assert all((b["abstained"] is None) == (b["confidence"] >= g["threshold"]) for b in blocks)
    again = _invoke(*args, "--out", tmp_path / "b.jsonl")
    assert again.exit_code == 0 and "model calls 0, from store 20" in again.stderr, again.stderr
    assert _lines(tmp_path / "b.jsonl") == records
    wrong = CliRunner().invoke(cli, [str(a) for a in [*args, "--tolerance", "1"]])
    assert wrong.exit_code == 1 and "fitted with tolerance 0, not 1" in str(wrong.exception)


# -- the real small judge, end to end -------------------------------------------------------------------------

def _real_rows(n: int, prefix: str, start: int = 0) -> list[dict[str, Any]]:
    """Arithmetic answers, right four times in five; the human gives a right one 4 or 5, a wrong one 1 or 2."""
    rows = []
    for i in range(start, start + n):
        a, b = 2 + i, 1 + (i * 3) % 5  # every item its own sum: the new items share no prompt with the others
        right = i % 5 != 0
        answer = a + b if right else a + b + 3
        human = (5 if i % 2 else 4) if right else (1 if i % 2 else 2)
        rows.append({"id": f"{prefix}{i}", "question": f"What is {a} + {b}?",
                     "responses": [{"id": "r", "text": f"{a} + {b} = {answer}.", "human_score": human}]})
    return rows


@pytest.mark.model
def test_selective_scores_on_the_real_small_judge_and_a_rerun_makes_zero_calls(tmp_path: Path) -> None:
    judge = "llamacpp/smollm2-135m"
    cal_items = write_jsonl(tmp_path / "cal.jsonl", _real_rows(30, "c"))
    new_items = write_jsonl(tmp_path / "new.jsonl", _real_rows(8, "n", start=100))
    store = tmp_path / "s.sqlite"
    fitted = _invoke("calibrate", cal_items, "--mode", "score", "--scale", "5", "--tolerance", "1", "-j", judge,
                     "--store", store, "--out", tmp_path / "cal.json")
    assert fitted.exit_code == 0, fitted.output
    assert "model calls 30" in fitted.stderr, fitted.stderr
    cal = Calibration.load(tmp_path / "cal.json")
    assert cal.mode == "score" and cal.n == 30 and cal.tolerance == 1 and cal.map.method == "vector"
    args = ["score", new_items, "--scale", "5", "-j", judge, "--store", store, "--calibration", tmp_path / "cal.json",
            "--target-agreement", "0.6", "--risk-delta", "0.3"]
    first = _invoke(*args, "--out", tmp_path / "a.jsonl", "--summary", tmp_path / "a.json")
    assert first.exit_code == 0, first.output
    assert "model calls: 8" in first.stderr, first.stderr
    summary = json.loads((tmp_path / "a.json").read_text())
    g = summary["guarantee"]
    assert g["calibration_n"] == 15 and g["agreement_lower_bound"] >= 0.6 - 1e-9  # part B of the 30
    records = _lines(tmp_path / "a.jsonl")
    for rec in records:
        block = rec["calibrated"]
        assert rec["scores"]["expected"] is not None and set(rec["distribution"]) == set(LEVELS)  # raw ones stay
        mass = {int(k): v for k, v in block["probabilities"].items()}
        verdict = int(block["verdict"])
        assert block["confidence"] == pytest.approx(sum(p for v, p in mass.items() if abs(v - verdict) <= 1))
        assert block["expected"] == pytest.approx(sum(v * p for v, p in mass.items()))
        assert (block["abstained"] is None) == (block["confidence"] >= g["threshold"])
    kept = [r for r in records if r["calibrated"]["abstained"] is None]
    assert summary["kept"] == len(kept)
    if kept:
        agreed = sum(abs(int(r["calibrated"]["verdict"]) - r["human_score"]) <= 1 for r in kept)
        assert summary["agreement_on_kept"] == pytest.approx(agreed / len(kept))
    again = _invoke(*args, "--out", tmp_path / "b.jsonl")
    assert again.exit_code == 0, again.output
    assert "model calls: 0" in again.stderr, again.stderr
    assert _lines(tmp_path / "b.jsonl") == records


@pytest.mark.model
def test_selective_criteria_on_the_real_small_judge_and_a_rerun_makes_zero_calls(tmp_path: Path) -> None:
    judge = "llamacpp/smollm2-135m"

    def rows(n: int, prefix: str, start: int) -> list[dict[str, Any]]:
        out = _real_rows(n, prefix, start)
        for row in out:
            row["criteria"] = [{"name": "correct", "description": "Is the sum right?"}]
            response = row["responses"][0]
            response["human_criteria"] = {"correct": response.pop("human_score")}
        return out

    cal_items = write_jsonl(tmp_path / "cal.jsonl", rows(60, "c", 0))  # 60 (was 30): the split tests on 30
    new_items = write_jsonl(tmp_path / "new.jsonl", rows(6, "n", 200))
    store = tmp_path / "s.sqlite"
    fitted = _invoke("calibrate", cal_items, "--mode", "criteria", "--tolerance", "1", "-j", judge, "--store", store,
                     "--out", tmp_path / "cal.json")
    assert fitted.exit_code == 0, fitted.output
    assert "model calls 60" in fitted.stderr, fitted.stderr
    args = ["criteria", new_items, "-j", judge, "--store", store, "--calibration", tmp_path / "cal.json",
            "--target-agreement", "0.6", "--risk-delta", "0.3"]
    first = _invoke(*args, "--out", tmp_path / "a.jsonl", "--summary", tmp_path / "a.json")
    assert first.exit_code == 0, first.output
    assert "model calls 6" in first.stderr, first.stderr
    summary = json.loads((tmp_path / "a.json").read_text())
    g = summary["guarantee"]
    assert g["calibration_n"] == 30 and g["agreement_lower_bound"] >= 0.6 - 1e-9
    records = _lines(tmp_path / "a.jsonl")
    for rec in records:
        crit = rec["criteria"][0]
        block = crit["calibrated"]
        mass = {int(k): v for k, v in block["probabilities"].items()}
        verdict = int(block["verdict"])
        assert block["confidence"] == pytest.approx(sum(p for v, p in mass.items() if abs(v - verdict) <= 1))
        assert (block["abstained"] is None) == (block["confidence"] >= g["threshold"])
    again = _invoke(*args, "--out", tmp_path / "b.jsonl")
    assert again.exit_code == 0, again.output
    assert "model calls 0, from store 6" in again.stderr, again.stderr
    assert _lines(tmp_path / "b.jsonl") == records
