"""Ranking of systems: Bradley-Terry with ties, bootstrap over items, Elo, win rates, mean scores."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from scipy import optimize  # type: ignore[import-untyped, unused-ignore]

from trustjudge.audit._ranking import (
    Outcome,
    Ranking,
    _design,
    _nll,
    bootstrap_bt,
    bradley_terry,
    elo,
    mean_scores,
    pair_outcomes,
    rank,
    win_rates,
)

TRUE_THETA = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])  # already sums to zero, like the fitted strengths
TRUE_NU = 0.3
SYSTEMS = ["s0", "s1", "s2", "s3", "s4"]


def davidson(theta_a: float, theta_b: float, nu: float) -> tuple[float, float, float]:
    pa, pb = math.exp(theta_a), math.exp(theta_b)
    tie = nu * math.sqrt(pa * pb)
    total = pa + pb + tie
    return pa / total, pb / total, tie / total


def compare(item: str, a: str, b: str, verdict: str | None = None, probs: tuple[float, float, float] | None = None,
            *, first_id: str | None = None, second_id: str | None = None, unscored: str | None = None,
            sys_a: str | None = "same", sys_b: str | None = "same") -> dict[str, Any]:
    """A compare record between systems a and b (response ids default to the system names)."""
    return {
        "item_id": item, "first_id": first_id or a, "second_id": second_id or b,
        "first_system": a if sys_a == "same" else sys_a, "second_system": b if sys_b == "same" else sys_b,
        "verdicts": {"single": None, "two_pass": None, "likelihood": verdict, "ppl": None},
        "probabilities": None if probs is None else dict(zip(("first", "second", "tie"), probs)),
        "unscored": unscored,
    }


def simulate(seed: int = 7, questions: int = 200, pairs: int = 4, soft_oracle: bool = False) -> list[dict[str, Any]]:
    """Each question compares `pairs` random system pairs; verdicts drawn from the Davidson model.

    With ``soft_oracle`` the probabilities are the true model probabilities (a perfectly calibrated judge).
    """
    rng = np.random.default_rng(seed)
    records = []
    for q in range(questions):
        for k in range(pairs):
            a, b = rng.choice(5, 2, replace=False)
            probs = davidson(TRUE_THETA[a], TRUE_THETA[b], TRUE_NU)
            verdict = str(rng.choice(["first", "second", "tie"], p=probs))
            records.append(compare(f"q{q}", SYSTEMS[a], SYSTEMS[b], verdict, probs if soft_oracle else None,
                                   first_id=f"r{k}a", second_id=f"r{k}b"))
    return records


# --- the likelihood itself -------------------------------------------------------------------------------------

@pytest.mark.parametrize("ties", ["davidson", "rao-kupper"])
@pytest.mark.parametrize("prior", [0.0, 0.5])
def test_analytic_gradient_matches_finite_differences(ties: Any, prior: float) -> None:
    rng = np.random.default_rng(3)
    outcomes = []
    for i in range(30):
        a, b = (str(s) for s in rng.choice(list("ABCD"), 2, replace=False))
        p = rng.dirichlet([1.0, 1.0, 1.0])
        outcomes.append(Outcome(f"q{i}", a, b, (float(p[0]), float(p[1]), float(p[2]))))
    d = _design(outcomes, list("ABCD"), True)
    w = d.totals()
    for _ in range(3):
        x = rng.normal(size=4)
        err = optimize.check_grad(lambda v: _nll(v, d, w, ties, prior)[0], lambda v: _nll(v, d, w, ties, prior)[1], x)
        assert err < 1e-4


# --- recovery from simulated data ----------------------------------------------------------------------------

def test_simulated_davidson_recovers_order_strengths_and_nu() -> None:
    outcomes, skipped = pair_outcomes(simulate(), method="likelihood")
    assert len(outcomes) == 800 and sum(skipped.values()) == 0
    boot = bootstrap_bt(outcomes, SYSTEMS, soft=False, samples=100, seed=1)
    fit = boot.fit
    assert fit.converged and fit.items == 200
    assert np.argsort(fit.strengths).tolist() == [0, 1, 2, 3, 4]
    # Both true and fitted log-strengths sum to zero, so they are directly comparable. Each 95% interval misses its
    # true value 5% of the time, so all five cover only ~77% of the time even for a correct method: allow one miss.
    outside = [s for s, (lo, hi), t in zip(SYSTEMS, boot.strength_ci, TRUE_THETA) if not lo <= t <= hi]
    assert len(outside) <= 1, outside
    assert all(hi - lo < 0.8 for lo, hi in boot.strength_ci)
    assert 0.15 < fit.tie < 0.5
    assert boot.tie_ci[0] < TRUE_NU < boot.tie_ci[1]
    assert boot.rank_ci[4][0] == 1 and boot.rank_ci[0][1] == 5


def test_soft_fit_with_true_probabilities_recovers_strengths_exactly() -> None:
    # A calibrated judge's probabilities are expected counts: the soft MLE lands on the truth (up to the tiny prior).
    outcomes, _ = pair_outcomes(simulate(soft_oracle=True))
    fit = bradley_terry(outcomes, SYSTEMS, soft=True)
    assert np.allclose(fit.strengths, TRUE_THETA, atol=0.01)
    assert fit.tie == pytest.approx(TRUE_NU, abs=0.01)
    hard = bradley_terry(outcomes, SYSTEMS, soft=False)
    assert not np.allclose(hard.strengths, TRUE_THETA, atol=0.01)  # sampled verdicts are noisier


# --- soft outcomes, ties, separation ---------------------------------------------------------------------------

def test_soft_weights_match_the_two_system_closed_form() -> None:
    # A shown first: (0.7, 0.2, 0.1); B shown first: (0.4, 0.5, 0.1) -> A wins 0.7 + 0.5, B wins 0.2 + 0.4, ties 0.2.
    # Two systems saturate Davidson: the MLE reproduces the observed proportions, so pi_A / pi_B = w_A / w_B and
    # nu = w_tie / sqrt(w_A w_B).
    records = [compare("q1", "A", "B", "first", (0.7, 0.2, 0.1)), compare("q2", "B", "A", "second", (0.4, 0.5, 0.1))]
    outcomes, _ = pair_outcomes(records)
    fit = bradley_terry(outcomes, prior=0.0)
    assert fit.strength("A") - fit.strength("B") == pytest.approx(math.log(1.2 / 0.6), abs=1e-5)
    assert fit.strength("A") + fit.strength("B") == pytest.approx(0.0, abs=1e-9)
    assert fit.tie == pytest.approx(0.2 / math.sqrt(1.2 * 0.6), rel=1e-4)
    single = bradley_terry(outcomes[:1], prior=0.0)
    assert single.strength("A") - single.strength("B") == pytest.approx(math.log(0.7 / 0.2), abs=1e-5)
    assert single.tie == pytest.approx(0.1 / math.sqrt(0.7 * 0.2), rel=1e-4)


def test_rao_kupper_two_systems_reproduces_observed_proportions() -> None:
    outcomes = [Outcome("q1", "A", "B", (0.7, 0.2, 0.1)), Outcome("q2", "B", "A", (0.4, 0.5, 0.1))]
    fit = bradley_terry(outcomes, ties="rao-kupper", prior=0.0)
    assert fit.tie >= 1
    assert fit.probabilities("A", "B") == pytest.approx((0.6, 0.3, 0.1), abs=1e-5)


def test_all_ties_give_equal_strengths_and_large_nu() -> None:
    pairs = [("A", "B"), ("B", "C"), ("A", "C")]
    outcomes = [Outcome(f"q{i}", a, b, verdict="tie") for i in range(10) for a, b in pairs]
    fit = bradley_terry(outcomes, soft=False)
    assert fit.converged
    assert np.allclose(fit.strengths, 0.0, atol=1e-6)
    assert fit.tie > 100
    assert fit.probabilities("A", "C")[2] > 0.98
    assert bradley_terry(outcomes, soft=False, ties="rao-kupper").tie > 100


def test_a_system_that_never_loses_stays_finite_and_ranks_first() -> None:
    outcomes = [Outcome(f"q{i}", "champ", other, verdict="first") for i in range(20) for other in ("B", "C")]
    outcomes += [Outcome(f"q{i}", "B", "C", verdict="first" if i % 3 else "second") for i in range(20)]
    fit = bradley_terry(outcomes, soft=False)
    assert fit.converged and all(math.isfinite(s) for s in fit.strengths)
    assert max(fit.systems, key=fit.strength) == "champ"
    # Stationarity of the penalised likelihood (ties are absent, so nu sits at its lower bound and plain BT applies):
    # prior * theta_champ = sum over champ's games of P(champ loses). Unpenalised, theta_champ would run off.
    champ = fit.strength("champ")
    losses = sum(20 / (1 + math.exp(champ - fit.strength(o))) for o in ("B", "C"))
    assert fit.tie < 1e-6 and 0.01 * champ == pytest.approx(losses, rel=1e-3)
    assert 2 < champ < 10
    assert bradley_terry(outcomes, soft=False, prior=1.0).strength("champ") < fit.strength("champ")
    result = rank([compare(o.item_id, o.first, o.second, o.verdict, first_id=f"{o.first}{o.item_id}")
                   for o in outcomes], bootstrap=30)
    assert result.systems[0].system == "champ" and result.systems[0].rank_best == 1
    assert math.isfinite(result.systems[0].ci_high)


# --- bootstrap ------------------------------------------------------------------------------------------------

def test_bootstrap_resamples_questions_not_pairs() -> None:
    # Copying every pair ten times inside its question adds no independent evidence: an item bootstrap gives the same
    # interval widths; a pair bootstrap would shrink them by about sqrt(10).
    base, _ = pair_outcomes(simulate(seed=11, questions=60, pairs=2))
    copies = [o for o in base for _ in range(10)]
    once = bootstrap_bt(base, SYSTEMS, soft=False, samples=60, seed=5)
    tenfold = bootstrap_bt(copies, SYSTEMS, soft=False, samples=60, seed=5)
    ratio = [(b[1] - b[0]) / (a[1] - a[0]) for a, b in zip(once.strength_ci, tenfold.strength_ci)]
    assert all(0.85 < r < 1.15 for r in ratio), ratio


def test_same_seed_same_numbers_and_different_seed_different_intervals() -> None:
    outcomes, _ = pair_outcomes(simulate(seed=2, questions=50))
    a = bootstrap_bt(outcomes, soft=False, samples=40, seed=123)
    b = bootstrap_bt(outcomes, soft=False, samples=40, seed=123)
    c = bootstrap_bt(outcomes, soft=False, samples=40, seed=124)
    assert a == b
    assert a.strength_ci != c.strength_ci
    assert elo(outcomes, seed=9, rounds=20) == elo(outcomes, seed=9, rounds=20)
    assert elo(outcomes, seed=9, rounds=20) != elo(outcomes, seed=10, rounds=20)
    records = simulate(seed=2, questions=50)
    assert rank(records, bootstrap=20, seed=4).to_dict() == rank(records, bootstrap=20, seed=4).to_dict()


# --- Elo and win rates ------------------------------------------------------------------------------------------

def test_elo_by_hand_and_on_simulated_data() -> None:
    assert elo([Outcome("q", "A", "B", verdict="first")], rounds=3) == {"A": 1002.0, "B": 998.0}
    assert elo([Outcome("q", "A", "B", verdict="tie")]) == {"A": 1000.0, "B": 1000.0}
    assert elo([Outcome("q", "A", "B", verdict="second")], k=32, base=1500) == {"A": 1484.0, "B": 1516.0}
    # Soft: score 0.7 + 0.1 / 2 = 0.75 against an expected 0.5.
    assert elo([Outcome("q", "A", "B", (0.7, 0.2, 0.1))], soft=True) == pytest.approx({"A": 1001.0, "B": 999.0})
    outcomes, _ = pair_outcomes(simulate())
    ratings = elo(outcomes)
    assert sorted(ratings, key=ratings.__getitem__) == SYSTEMS


def test_win_rates_count_ties_as_half() -> None:
    outcomes = [Outcome("q1", "A", "B", verdict="first"), Outcome("q2", "B", "A", verdict="tie"),
                Outcome("q3", "C", "A", verdict="first"), Outcome("q4", "C", "A", (0.2, 0.6, 0.2))]
    rates = win_rates(outcomes)
    assert (rates["A"].wins, rates["A"].losses, rates["A"].ties, rates["A"].games) == (1, 1, 1, 3)
    assert rates["A"].rate == pytest.approx(0.5)
    assert rates["C"].rate == 1.0 and rates["C"].games == 1  # q4 has no verdict
    soft = win_rates(outcomes[3:], soft=True)
    assert soft["A"].rate == pytest.approx(0.6 + 0.1) and soft["C"].rate == pytest.approx(0.2 + 0.1)


# --- records: skipping, errors ------------------------------------------------------------------------------------

def test_records_without_system_and_unscored_records_are_skipped_and_counted() -> None:
    good = [compare("q1", "A", "B", "first", (0.6, 0.3, 0.1)), compare("q2", "B", "C", "tie", (0.3, 0.3, 0.4)),
            compare("q3", "C", "A", "second", (0.1, 0.8, 0.1))]
    bad = [compare("q4", "A", "B", "second", (0.0, 1.0, 0.0), sys_a=None, first_id="x1"),
           compare("q5", "C", "B", "first", (1.0, 0.0, 0.0), sys_b=None, second_id="x2"),
           compare("q6", "C", "A", "first", (0.9, 0.05, 0.05), unscored="parse_error"),
           compare("q7", "A", "A", "first", (0.9, 0.05, 0.05), first_id="a1", second_id="a2"),
           compare("q8", "B", "C", None, None)]
    clean = rank(good, bootstrap=10)
    messy = rank(good + bad, bootstrap=10)
    assert messy.skipped == {"unscored": 1, "no_system": 2, "same_system": 1, "no_outcome": 1}
    assert clean.skipped == {"unscored": 0, "no_system": 0, "same_system": 0, "no_outcome": 0}
    assert messy.systems == clean.systems and messy.pairs_soft == 3 and messy.items == 3
    # A repeated (item, pair) keeps the newest record, whichever order the pair was shown in.
    redone = rank([*good, compare("q1", "B", "A", "first", (0.9, 0.05, 0.05))], bootstrap=0)
    assert redone.pairs_soft == 3 and redone.systems[0].system != clean.systems[0].system


def test_clear_errors() -> None:
    with pytest.raises(ValueError, match="at least 2 systems"):
        rank([compare("q1", "A", "A", "first", first_id="a1", second_id="a2")])
    with pytest.raises(ValueError, match="at least 2 systems"):
        rank([compare("q1", "A", "B", "first", sys_b=None)])
    with pytest.raises(ValueError, match="no scored pairs"):
        rank([compare("q1", "A", "B", "first", unscored="timeout"), compare("q2", "A", "B", None)])
    with pytest.raises(ValueError, match="no scored pairs"):
        bradley_terry([Outcome("q1", "A", "B", verdict="first")], soft=True)
    with pytest.raises(ValueError, match="at least 2 systems"):
        bradley_terry([], ["A"])
    with pytest.raises(ValueError, match="unknown verdict method"):
        rank([compare("q1", "A", "B", "first")], method="majority")
    with pytest.raises(ValueError, match="unknown tie model"):
        bradley_terry([Outcome("q1", "A", "B", verdict="first")], soft=False, ties="glenn")  # type: ignore[arg-type]


# --- the full ranking ---------------------------------------------------------------------------------------------

def score(item: str, response: str, system: str | None, value: float | None, scale: int = 100,
          unscored: str | None = None) -> dict[str, Any]:
    return {"item_id": item, "response_id": response, "system": system, "scale": scale,
            "scores": {"discrete": None, "geval": None, "expected": None, "trustjudge": value}, "unscored": unscored}


def hand_made() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """X beats Y beats Z in every comparison; on the items all three share, mean scores put Y above X."""
    pairs = [compare(q, a, b, "first", (0.8, 0.1, 0.1))
             for q in ("i1", "i2") for a, b in [("X", "Y"), ("Y", "Z"), ("X", "Z")]]
    pairs.append(compare("i3", "Z", "X", "tie", (0.2, 0.3, 0.5)))
    scores = [score("i1", "x1", "X", 60), score("i1", "x2", "X", 70), score("i2", "x3", "X", 50),  # X: (65 + 50) / 2
              score("i1", "y1", "Y", 80), score("i2", "y2", "Y", 60),  # Y: 70
              score("i1", "z1", "Z", 10), score("i2", "z2", "Z", 20),  # Z: 15
              score("i3", "x4", "X", 100), score("i3", "y3", "Y", 0),  # i3 lacks Z: left out (would put X above Y)
              score("i1", "z3", "Z", 100, unscored="parse_error"), score("i2", "n1", None, 100),
              score("i1", "x1", "X", 1, scale=5), score("i1", "y1", "Y", 5, scale=5),
              score("i1", "z1", "Z", 3, scale=5)]
    return pairs, scores


def test_mean_scores_average_items_then_systems_over_common_items() -> None:
    _, scores = hand_made()
    means = mean_scores(scores)
    assert means.scale == 100 and means.common and means.items == 2
    assert means.means == pytest.approx({"X": 57.5, "Y": 70.0, "Z": 15.0})
    assert means.skipped == {"unscored": 1, "no_system": 1, "no_score": 0}
    assert mean_scores(scores, scale=5).means == {"X": 1.0, "Y": 5.0, "Z": 3.0}
    assert mean_scores(scores, systems=["X", "Y"]).means == pytest.approx({"X": 215 / 3, "Y": 140 / 3})
    with_unscored = mean_scores(scores, systems=["X", "Y", "Z", "W"]).means  # W has no score: nan, common items kept
    assert math.isnan(with_unscored.pop("W")) and with_unscored == pytest.approx({"X": 57.5, "Y": 70.0, "Z": 15.0})


def test_rank_combines_rankings_and_kendall_tau_between_them() -> None:
    pairs, scores = hand_made()
    result = rank(pairs, scores, bootstrap=50, seed=3)
    assert [s.system for s in result.systems] == ["X", "Y", "Z"] and [s.rank for s in result.systems] == [1, 2, 3]
    assert result.primary == "soft" and result.pairs_soft == 7 and result.pairs_hard == 7
    assert result.score_scale == 100 and result.systems[1].mean_score == pytest.approx(70.0)
    assert all(s.ci_low - 1e-6 <= s.bt_soft <= s.ci_high + 1e-6 for s in result.systems)  # Y sits at 0 by symmetry
    tau = {(a.first, a.second): a.tau for a in result.agreements}
    assert len(tau) == 10
    assert tau[("bt_soft", "bt_hard")] == pytest.approx(1.0)
    assert tau[("bt_soft", "win_rate")] == pytest.approx(1.0)
    assert tau[("bt_soft", "mean_score")] == pytest.approx(1 / 3)  # X-Y discordant, X-Z and Y-Z concordant
    assert tau[("elo", "mean_score")] == pytest.approx(1 / 3)
    assert result.systems[0].games == 5 and result.systems[0].win_rate == pytest.approx(4.5 / 5)
    assert math.isfinite(result.nu) and math.isfinite(result.nu_hard) and result.converged


def test_to_dict_is_json_and_rows_follow_soft_strength() -> None:
    pairs, _ = hand_made()
    result = rank([*pairs, compare("i9", "W", "X", "first")], bootstrap=0)  # W only has a verdict: bt_soft is nan
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    w = next(s for s in data["systems"] if s["system"] == "W")
    assert w["bt_soft"] is None and w["ci_low"] is None and w["mean_score"] is None and w["bt_hard"] is not None
    rows = result.rows()
    assert all(len(row) == len(Ranking.COLUMNS) for row in rows)
    assert [row[1] for row in rows] == ["X", "Y", "Z", "W"]  # by bt_soft, descending; no soft strength last
    soft = [row[2] for row in rows[:3]]
    assert soft == sorted(soft, reverse=True)
    assert isinstance(data["nu"], float) and data["ties"] == "davidson"


def test_rao_kupper_ranking_runs_end_to_end() -> None:
    result = rank(simulate(seed=5, questions=80), bootstrap=20, ties="rao-kupper")
    assert result.ties == "rao-kupper" and result.nu_hard >= 1
    assert [s.system for s in result.systems] == SYSTEMS[::-1]
