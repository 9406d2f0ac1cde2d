"""Calibration maps, the position correction and selective verdicts, on numbers made by hand (no model)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trustjudge.audit._calibration import (
    brier,
    choose_cascade,
    choose_threshold,
    clopper_pearson_lower,
    ece,
    fit_binary,
    fit_vector,
    min_kept,
    position_bias,
    remove_position_bias,
    run_cascade,
)
from trustjudge.errors import ConfigError


def _overconfident(n: int, temperature: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A binary judge whose logits are ``temperature`` times too large: labels drawn from the true ones."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 3.0, n)
    p = 1 / (1 + np.exp(-z))
    y = (rng.random(n) < 1 / (1 + np.exp(-z / temperature))).astype(int)
    return p, y


def test_temperature_scaling_recovers_a_known_temperature() -> None:
    p, y = _overconfident(20000, 2.5, seed=1)
    cal = fit_binary(p, y, "temperature")
    assert cal.params["a"] == pytest.approx(1 / 2.5, rel=0.05)
    platt = fit_binary(p, y, "platt")
    assert platt.params["a"] == pytest.approx(1 / 2.5, rel=0.05)
    assert abs(platt.params["b"]) < 0.1
    raw = np.stack([1 - p, p], axis=1)
    assert ece(raw, y) > 0.08  # the planted miscalibration is visible ...
    assert ece(cal.apply(raw), y) < 0.02  # ... and removed
    assert brier(cal.apply(raw), y) < brier(raw, y)


def test_platt_recovers_a_planted_bias() -> None:
    rng = np.random.default_rng(2)
    z = rng.normal(0.0, 2.0, 20000)
    p = 1 / (1 + np.exp(-z))
    y = (rng.random(z.size) < 1 / (1 + np.exp(-(z - 1.5)))).astype(int)  # the judge says YES too often
    cal = fit_binary(p, y, "platt")
    assert cal.params["a"] == pytest.approx(1.0, rel=0.05)
    assert cal.params["b"] == pytest.approx(-1.5, abs=0.1)


def test_isotonic_maps_are_monotone_and_calibrated_in_sample() -> None:
    p, y = _overconfident(3000, 3.0, seed=3)
    p = np.round(p, 2)  # many ties
    cal = fit_binary(p, y, "isotonic")
    grid = np.linspace(0, 1, 501)
    q = cal.apply(np.stack([1 - grid, grid], axis=1))[:, 1]
    assert np.all(np.diff(q) >= -1e-12)
    assert np.all((q >= 0) & (q <= 1))
    assert ece(cal.apply(np.stack([1 - p, p], axis=1)), y) < 0.02


def test_vector_scaling_recovers_temperature_and_class_bias() -> None:
    rng = np.random.default_rng(4)
    n, k = 20000, 3
    logits = rng.normal(0.0, 2.0, (n, k))
    raw = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    true_bias = np.array([0.0, 0.8, -0.5])
    truth = np.exp(logits / 2.0 + true_bias)
    truth /= truth.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=row) for row in truth])
    cal = fit_vector(raw, y, ("first", "second", "tie"))
    assert cal.params["temperature"] == pytest.approx(2.0, rel=0.05)
    assert cal.params["bias"] == pytest.approx(true_bias.tolist(), abs=0.08)
    assert ece(cal.apply(raw), y) < ece(raw, y) / 3


def test_label_free_position_correction_removes_a_planted_first_slot_bias() -> None:
    rng = np.random.default_rng(5)
    pairs = 400
    strength = rng.normal(0.0, 1.5, pairs)  # log-odds that response A beats B
    planted = 1.2  # the judge adds this to the first-shown slot's log-odds

    def order(logodds: np.ndarray) -> np.ndarray:
        first = np.exp(logodds / 2)
        second = np.exp(-logodds / 2)
        tie = np.full_like(first, 0.3)
        out = np.stack([first, second, tie], axis=1)
        return out / out.sum(axis=1, keepdims=True)

    a_first = order(strength + planted)  # A shown first
    b_first = order(-strength + planted)  # B shown first
    both = np.stack([a_first, b_first], axis=1)
    bias = position_bias(both)
    assert bias == pytest.approx(planted, abs=1e-9)
    fixed_a = remove_position_bias(a_first, bias)
    fixed_b = remove_position_bias(b_first, bias)
    # with the bias out, each order's verdict on A agrees with the other order's
    assert np.allclose(fixed_a[:, 0], fixed_b[:, 1])
    assert np.allclose(fixed_a, order(strength))
    assert position_bias(np.stack([fixed_a, fixed_b], axis=1)) == pytest.approx(0.0, abs=1e-9)
    # and an unbiased judge is left as it was
    unbiased = np.stack([order(strength), order(-strength)], axis=1)
    assert position_bias(unbiased) == pytest.approx(0.0, abs=1e-9)


def _true_risk(threshold: float) -> float:
    """Disagreement of the synthetic judge below: confidence c ~ U(0.5, 1), P(agree | c) = c**2."""
    if not math.isfinite(threshold):
        return 0.0
    lo = max(threshold, 0.5)
    # E[1 - c^2 | c >= lo] for c uniform on [lo, 1]
    return 1 - (1 - lo**3) / (3 * (1 - lo))


def test_selective_guarantee_holds_over_a_thousand_random_calibration_sets() -> None:
    rng = np.random.default_rng(6)
    alpha, delta, n, splits = 0.15, 0.1, 300, 1000
    violations = 0
    kept = []
    for _ in range(splits):
        c = rng.uniform(0.5, 1.0, n)
        agree = rng.random(n) < c**2
        sel = choose_threshold(c, agree, alpha=alpha, delta=delta, strict=False)
        violations += _true_risk(sel.threshold) > alpha
        kept.append(np.mean(c >= sel.threshold))
    rate = violations / splits
    se = math.sqrt(delta * (1 - delta) / splits)
    assert rate <= delta + 3 * se
    # not vacuous: the threshold keeps a real share (the best possible is P(c >= 0.773) = 0.45)
    assert 0.08 < float(np.mean(kept)) < 0.46


def test_selection_bound_and_refusal_of_a_too_small_calibration_set() -> None:
    assert min_kept(0.2, 0.1) == 11  # 0.8**11 = 0.086 <= 0.1 < 0.8**10
    with pytest.raises(ConfigError, match=r"cannot support agreement >= 0.8"):
        choose_threshold(np.linspace(0.9, 1.0, 10), np.ones(10, bool), alpha=0.2, delta=0.1)
    sel = choose_threshold(np.linspace(0.9, 1.0, 11), np.ones(11, bool), alpha=0.2, delta=0.1)
    assert sel.kept == 11 and sel.agreement == 1.0
    assert sel.lower_bound == pytest.approx(0.1 ** (1 / 11))
    assert clopper_pearson_lower(0, 5, 0.1) == 0.0
    with pytest.raises(ConfigError, match="delta"):
        choose_threshold([0.9], [True], alpha=0.2, delta=0.0)
    with pytest.raises(ConfigError, match="target agreement"):
        choose_threshold([0.9], [True], alpha=1.5, delta=0.1)


def test_unscored_items_are_never_kept() -> None:
    c = np.r_[np.linspace(0.95, 1.0, 40), [np.nan] * 5]
    sel = choose_threshold(c, np.ones(c.size, bool), alpha=0.2, delta=0.1)
    assert sel.n == 40
    assert not sel.keep(c)[-5:].any()


def test_cascade_escalates_only_abstentions_and_keeps_the_guarantee() -> None:
    rng = np.random.default_rng(7)
    alpha, delta, n = 0.2, 0.1, 400
    violations, runs = 0, 300
    for _ in range(runs):
        c1 = rng.uniform(0.3, 1.0, n)  # a weak judge: P(agree | c) = c
        a1 = rng.random(n) < c1
        c2 = np.full(n, 1.0)  # a recorded judge of constant confidence, 85% agreement
        a2 = rng.random(n) < 0.85
        sels = choose_cascade([c1, c2], [a1, a2], alpha=alpha, delta=delta)
        # test set from the same distribution
        t1 = rng.uniform(0.3, 1.0, 20000)
        g1 = rng.random(t1.size) < t1
        g2 = rng.random(t1.size) < 0.85
        routed = run_cascade([t1, np.full(t1.size, 1.0)], sels)
        decided = routed.tier >= 0
        agree = np.where(routed.tier == 0, g1, g2)[decided]
        violations += bool(decided.any()) and float(np.mean(agree)) < 1 - alpha - 0.01
        # tier 2 is asked only about tier 1's abstentions
        assert not np.any((routed.tier == 1) & sels[0].keep(t1))
    assert violations / runs <= delta


def test_choose_cascade_needs_a_tier() -> None:
    with pytest.raises(ConfigError):
        choose_cascade([], [], alpha=0.2, delta=0.1)
