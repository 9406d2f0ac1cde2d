"""Scoring and aggregation methods against hand-computed values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustjudge.engine import _scoring as S

V5 = [1, 2, 3, 4, 5]


def test_discrete_is_the_argmax_label() -> None:
    assert S.discrete(V5, [0.1, 0.2, 0.4, 0.2, 0.1]) == 3.0
    assert S.discrete(V5, [0.0, 0.0, 0.0, 0.0, 1.0]) == 5.0


def test_geval_is_not_renormalised_but_expected_is() -> None:
    probs = [0.05, 0.1, 0.2, 0.1, 0.05]  # mass 0.5: half the probability fell off the labels
    # 1*.05 + 2*.1 + 3*.2 + 4*.1 + 5*.05 = 1.5
    assert S.geval(V5, probs) == pytest.approx(1.5)
    assert S.expected(V5, probs) == pytest.approx(3.0)


def test_trustjudge_two_label_hand_value() -> None:
    # p = (.75, .25): logits ln 3 and -ln 3, divided by T = .2: weights 3^5 : 3^-5.
    w1 = 3**5 / (3**5 + 3**-5)
    expected = 1 * w1 + 2 * (1 - w1)
    assert S.trustjudge([1, 2], [0.75, 0.25]) == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx(1 + 1 / 59050, rel=1e-9)


def test_trustjudge_renormalises_and_keeps_certainty() -> None:
    # The reference code drops p >= 1, so a certain score became 0; here it is the score itself.
    assert S.trustjudge(V5, [0, 0, 0, 1.0, 0]) == pytest.approx(4.0, abs=1e-6)
    # Renormalised: the same shape at half the mass gives the same score.
    a = S.trustjudge(V5, [0.1, 0.2, 0.4, 0.2, 0.1])
    b = S.trustjudge(V5, [0.05, 0.1, 0.2, 0.1, 0.05])
    assert a == pytest.approx(b) == pytest.approx(3.0)


def test_trustjudge_is_sharper_than_expectation() -> None:
    probs = [0.0, 0.1, 0.2, 0.7, 0.0]
    # expectation 3.6; the sharpened score moves towards the mode 4.
    assert S.expected(V5, probs) == pytest.approx(3.6)
    assert 3.6 < S.trustjudge(V5, probs) < 4.0


def test_entropy_bits() -> None:
    assert S.entropy_bits([0.25, 0.25, 0.25, 0.25]) == pytest.approx(2.0)
    assert S.entropy_bits([0.5, 0.5, 0, 0]) == pytest.approx(1.0)
    assert S.entropy_bits([0.1, 0.1]) == pytest.approx(1.0)  # renormalised over the labels


def _orders(p1: tuple[float, float, float],
            p2: tuple[float, float, float]) -> tuple[S.PairDistribution, S.PairDistribution]:
    return S.from_order(*p1, swapped=False), S.from_order(*p2, swapped=True)


def test_aggregations_hand_example() -> None:
    # Order 1 shows x first: A=.6 B=.3 C=.1. Order 2 shows y first: A=.5 (y wins) B=.4 (x wins) C=.1.
    o1, o2 = _orders((0.6, 0.3, 0.1), (0.5, 0.4, 0.1))
    assert (o2.first, o2.second, o2.tie) == (0.4, 0.5, 0.1)
    assert S.single(o1) == "first"
    assert S.two_pass(o1, o2) == "tie"  # order 1 says x, order 2 says y
    assert S.likelihood_probs(o1, o2) == pytest.approx((1.0, 0.8, 0.2))
    assert S.likelihood(o1, o2) == "first"
    # margin (1.0 - 0.8) / 2 = 0.1: a delta above it makes a tie
    assert S.likelihood(o1, o2, delta=0.11) == "tie"
    assert S.likelihood(o1, o2, delta=0.09) == "first"
    # direct-mode ppl: order 1's verdict has probability .6 > order 2's .5
    assert S.ppl(o1, o2) == "first"


def test_ppl_with_critique_perplexity() -> None:
    o1 = S.from_order(0.6, 0.3, 0.1, swapped=False, ppl=3.0)
    o2 = S.from_order(0.7, 0.2, 0.1, swapped=True, ppl=2.0)  # y wins, with the more fluent critique
    assert S.ppl(o1, o2) == "second"
    assert S.ppl(o1, o2, delta=1.5) == "tie"


def test_missing_labels_count_as_zero() -> None:
    o1, o2 = _orders((0.9, 0.0, 0.0), (0.0, 0.0, 0.0))
    assert S.likelihood(o1, o2) == "first"
    assert S.two_pass(o1, o2) == "tie"  # order 2 has no mass: an exact draw is a tie


def test_two_pass_agreement() -> None:
    o1, o2 = _orders((0.2, 0.7, 0.1), (0.8, 0.1, 0.1))
    assert S.two_pass(o1, o2) == "second"


prob = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(prob, prob, prob, prob, prob, prob)
def test_likelihood_is_order_invariant(a1: float, b1: float, c1: float, a2: float, b2: float, c2: float) -> None:
    mirror = {"first": "second", "second": "first", "tie": "tie"}
    o1, o2 = _orders((a1, b1, c1), (a2, b2, c2))
    # The same pair asked the other way round: its first order is our second order, and vice versa.
    r1, r2 = _orders((a2, b2, c2), (a1, b1, c1))
    assert S.likelihood(r1, r2) == mirror[S.likelihood(o1, o2)]
    f, s, t = S.likelihood_probs(o1, o2)
    rf, rs, rt = S.likelihood_probs(r1, r2)
    assert (rf, rs, rt) == pytest.approx((s, f, t))
    assert S.two_pass(r1, r2) == mirror[S.two_pass(o1, o2)]


def test_score_all_has_every_method() -> None:
    out = S.score_all(V5, [0.1, 0.2, 0.4, 0.2, 0.1])
    assert set(out) == set(S.SCORE_METHODS)
    assert all(math.isfinite(v) for v in out.values())


@given(st.lists(st.floats(min_value=0.0, max_value=1.0, allow_subnormal=False), min_size=5, max_size=5)
       .filter(lambda p: sum(p) > 1e-6))
def test_vectorised_scores_equal_the_definitions(probs: list[float]) -> None:
    m = S.score_matrix(V5, [probs, [0.1, 0.2, 0.4, 0.2, 0.1]])
    for name, value in S.score_all(V5, probs).items():
        assert m[name][0] == pytest.approx(value, rel=1e-9, abs=1e-9)
    assert m["entropy"][0] == pytest.approx(S.entropy_bits(probs), abs=1e-9)
    assert m["mass"][0] == pytest.approx(sum(probs))


def test_vectorised_scores_do_not_depend_on_how_many_rows() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    probs = rng.random((300, 100))
    values = list(range(1, 101))
    whole = S.score_matrix(values, probs)
    for n in (1, 7, 64):
        part = S.score_matrix(values, probs[:n])
        for name in ("geval", "expected", "trustjudge", "entropy"):
            assert part[name].tolist() == whole[name][:n].tolist(), name
