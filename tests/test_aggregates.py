"""Tests of trustjudge.engine._aggregates: hand-computed values (arithmetic in comments) plus brute-force properties."""

from __future__ import annotations

import itertools
import math
from dataclasses import astuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustjudge.engine._aggregates import (
    Aggregate,
    Bin,
    assignment,
    auroc,
    brier,
    cohen_kappa,
    combine_orders,
    distribution_moments,
    ece,
    expected_count,
    expected_f1_at_k,
    expected_margin,
    greedy_order_matching,
    poisson_binomial,
    prob_all,
    reliability,
    weighted_aggregate,
)

approx = pytest.approx
prob = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


# --- 1. Poisson-binomial ------------------------------------------------------------------------------------------


def test_poisson_binomial_hand() -> None:
    # ps=(0.5, 0.2): P(0)=0.5*0.8=0.4, P(1)=0.5*0.8+0.5*0.2=0.5, P(2)=0.5*0.2=0.1
    assert poisson_binomial([0.5, 0.2]) == approx([0.4, 0.5, 0.1])
    # three fair coins: binomial(3, 1/2) = 1/8, 3/8, 3/8, 1/8
    assert poisson_binomial([0.5, 0.5, 0.5]) == approx([1 / 8, 3 / 8, 3 / 8, 1 / 8])
    # certain outcomes: (1, 0) -> exactly one success
    assert poisson_binomial([1.0, 0.0]) == approx([0.0, 1.0, 0.0])
    assert poisson_binomial([]) == [1.0]
    # E[S] = 0.5 + 0.2 = 0.7 ; P(all) = 0.5 * 0.2 = 0.1
    assert expected_count([0.5, 0.2]) == approx(0.7)
    assert prob_all([0.5, 0.2]) == approx(0.1)
    assert prob_all([]) == 1.0


@pytest.mark.parametrize("bad", [1.1, -0.1, math.nan, math.inf])
def test_poisson_binomial_rejects(bad: float) -> None:
    for fn in (poisson_binomial, expected_count, prob_all):
        with pytest.raises(ValueError, match="probability #1"):
            fn([0.5, bad])


@given(st.lists(prob, max_size=10))
def test_poisson_binomial_brute_force(ps: list[float]) -> None:
    dist = poisson_binomial(ps)
    assert len(dist) == len(ps) + 1
    assert math.fsum(dist) == approx(1.0)
    assert all(x >= 0.0 for x in dist)
    brute = [0.0] * (len(ps) + 1)
    for outcome in itertools.product((0, 1), repeat=len(ps)):
        brute[sum(outcome)] += math.prod(p if x else 1 - p for p, x in zip(ps, outcome))
    assert dist == approx(brute, abs=1e-12)
    assert math.fsum(s * w for s, w in enumerate(dist)) == approx(expected_count(ps), abs=1e-12)
    assert dist[-1] == approx(prob_all(ps), abs=1e-12)


# --- 2. aggregation -----------------------------------------------------------------------------------------------


def test_weighted_aggregate_hand() -> None:
    # mean = (1*4 + 3*2) / (1+3) = 10/4 = 2.5 ; sd = sqrt(1^2*1 + 3^2*4) / 4 = sqrt(37) / 4
    agg = weighted_aggregate([4.0, 2.0], [1.0, 4.0], [1.0, 3.0])
    assert isinstance(agg, Aggregate)
    assert [agg.mean, agg.sd] == approx([2.5, math.sqrt(37) / 4])
    # a zero weight drops a criterion: mean 4, sd sqrt(1)/1 = 1
    assert astuple(weighted_aggregate([4.0, 2.0], [1.0, 4.0], [1.0, 0.0])) == approx((4.0, 1.0))


@pytest.mark.parametrize(
    ("means", "variances", "weights", "msg"),
    [
        ([1.0], [0.0], [0.0], "positive sum"),
        ([1.0, 2.0], [0.0, 0.0], [1.0, -1.0], "weight #1"),
        ([1.0], [-1.0], [1.0], "variance #0"),
        ([1.0, 2.0], [0.0], [1.0, 1.0], "equal lengths"),
        ([], [], [], "empty"),
    ],
)
def test_weighted_aggregate_rejects(means: list[float], variances: list[float], weights: list[float], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        weighted_aggregate(means, variances, weights)


def test_distribution_moments_hand() -> None:
    # probs (0.2, 0.2, 0.4) total 0.8 -> q = (0.25, 0.25, 0.5) over values (1, 2, 3)
    # mean = 0.25 + 0.5 + 1.5 = 2.25 ; var = 0.25*1.25^2 + 0.25*0.25^2 + 0.5*0.75^2 = 0.390625 + 0.015625 + 0.28125
    mean, var = distribution_moments([1, 2, 3], [0.2, 0.2, 0.4])
    assert [mean, var] == approx([2.25, 0.6875])
    with pytest.raises(ValueError, match="sum to zero"):
        distribution_moments([1, 2], [0.0, 0.0])
    with pytest.raises(ValueError, match="equal lengths"):
        distribution_moments([1, 2], [1.0])


# --- 3. 5-way verdicts --------------------------------------------------------------------------------------------


def test_expected_margin_hand() -> None:
    # symmetric -> 0
    assert expected_margin([0.1, 0.2, 0.4, 0.2, 0.1]) == approx(0.0)
    # total 0.9: (2*0.4 + 1*0.2 + 0 - 1*0.1 - 0) / 0.9 = 0.9 / 0.9 = 1
    assert expected_margin([0.4, 0.2, 0.2, 0.1, 0.0]) == approx(1.0)
    # custom values (1, 0.5, 0, -0.5, -1): all mass on A>B -> 0.5
    assert expected_margin([0, 1, 0, 0, 0], values=(1, 0.5, 0, -0.5, -1)) == approx(0.5)
    with pytest.raises(ValueError, match="5 probabilities"):
        expected_margin([0.5, 0.5])


def test_combine_orders_hand() -> None:
    # B shown first: (B>>A, B>A, B=A, A>B, A>>B) = (0, .1, .2, .3, .4) -> mirrored to A-first (.4, .3, .2, .1, 0)
    # summed with (.5, .3, .2, 0, 0) and halved: (.45, .3, .2, .05, 0)
    got = combine_orders([0.5, 0.3, 0.2, 0.0, 0.0], [0.0, 0.1, 0.2, 0.3, 0.4])
    assert got == approx([0.45, 0.3, 0.2, 0.05, 0.0])
    # consistent judge: A>>B when A first, and "second>>first" (= A>>B) when B first
    assert combine_orders([1, 0, 0, 0, 0], [0, 0, 0, 0, 1]) == approx([1, 0, 0, 0, 0])
    # fully position-biased judge (always "first>>second"): mirrored (0,0,0,0,1) -> half each way
    assert combine_orders([1, 0, 0, 0, 0], [1, 0, 0, 0, 0]) == approx([0.5, 0, 0, 0, 0.5])
    # unnormalised inputs give the same result
    assert combine_orders([5, 3, 2, 0, 0], [0, 1, 2, 3, 4]) == approx(got)
    with pytest.raises(ValueError, match="positive sum"):
        combine_orders([0, 0, 0, 0, 0], [1, 0, 0, 0, 0])


@given(st.lists(prob, min_size=5, max_size=5), st.lists(prob, min_size=5, max_size=5))
def test_combine_orders_swap_symmetry(p: list[float], q: list[float]) -> None:
    if sum(p) == 0 or sum(q) == 0:
        return
    c = combine_orders(p, q)
    assert math.fsum(c) == approx(1.0)
    # swapping the roles of A and B mirrors the combined verdict
    assert combine_orders(q, p) == approx(c[::-1], abs=1e-12)


# --- 4. expected F1 -----------------------------------------------------------------------------------------------


def test_expected_f1_hand() -> None:
    # ps=(0.5, 0.2): P(S)=(0.4, 0.5, 0.1), n=2, K=1
    # s=1: P=1/2, R=min(1/1,1)=1, F1=2*(1/2)/(3/2)=2/3 ; s=2: P=1, R=1, F1=1
    # E[P] = .5*.5 + .1*1 = .35 ; E[R] = .5 + .1 = .6 ; E[F1] = .5*2/3 + .1 = 13/30
    e = expected_f1_at_k([0.5, 0.2], 1)
    assert [e.precision, e.recall, e.f1] == approx([0.35, 0.6, 13 / 30])
    assert e.dist == approx([0.4, 0.5, 0.1])
    # not the F1 of the expectations: 2*.35*.6/.95 = .4421...
    assert e.f1 != approx(2 * 0.35 * 0.6 / 0.95)
    # K=4: s=1: P=.5, R=.25, F1=2*.125/.75=1/3 ; s=2: P=1, R=.5, F1=1/1.5=2/3
    # E[R] = .5*.25 + .1*.5 = .175 ; E[F1] = .5/3 + .1*2/3 = 7/30
    e4 = expected_f1_at_k([0.5, 0.2], 4)
    assert [e4.precision, e4.recall, e4.f1] == approx([0.35, 0.175, 7 / 30])


def test_expected_f1_edges() -> None:
    e = expected_f1_at_k([], 3)
    assert (e.precision, e.recall, e.f1, e.dist) == (None, 0.0, 0.0, [1.0])
    with pytest.raises(ValueError, match="k must be"):
        expected_f1_at_k([0.5], 0)
    with pytest.raises(ValueError, match="probability"):
        expected_f1_at_k([2.0], 1)


@settings(max_examples=60)
@given(st.lists(prob, max_size=8), st.integers(min_value=1, max_value=10))
def test_expected_f1_brute_force(ps: list[float], k: int) -> None:
    n = len(ps)
    e = expected_f1_at_k(ps, k)
    if n == 0:
        return
    bp = br = bf = 0.0
    for outcome in itertools.product((0, 1), repeat=n):
        w = math.prod(p if x else 1 - p for p, x in zip(ps, outcome))
        s = sum(outcome)
        prec, rec = s / n, min(s / k, 1.0)
        bp += w * prec
        br += w * rec
        bf += w * (2 * prec * rec / (prec + rec) if s else 0.0)
    assert [e.precision, e.recall, e.f1] == approx([bp, br, bf], abs=1e-12)


# --- 5. calibration -----------------------------------------------------------------------------------------------


def test_brier_hand() -> None:
    # ((0.9-1)^2 + (0.2-0)^2) / 2 = (0.01 + 0.04) / 2 = 0.025
    assert brier([0.9, 0.2], [1, 0]) == approx(0.025)
    assert brier([0.9, 0.2], [True, False]) == approx(0.025)


def test_reliability_and_ece_hand() -> None:
    probs = [0.05, 0.15, 0.12, 1.0, 0.95]
    labels = [0, 1, 0, 1, 0]
    # bins of width .1: 0.05 -> bin 0 ; 0.15, 0.12 -> bin 1 ; 1.0 (last bin) and 0.95 -> bin 9 ; others empty
    rows = reliability(probs, labels)
    assert all(isinstance(r, Bin) for r in rows)
    # (lo, hi, count, mean_prob, frequency)
    assert [astuple(r) for r in rows] == [
        approx((0.0, 0.1, 1, 0.05, 0.0)),
        approx((0.1, 0.2, 2, 0.135, 0.5)),
        approx((0.9, 1.0, 2, 0.975, 0.5)),
    ]
    # ECE = 1/5*|.05-0| + 2/5*|.135-.5| + 2/5*|.975-.5| = .01 + .146 + .19 = .346
    assert ece(probs, labels) == approx(0.346)
    # one bin: mean (.05+.15+.12+1+.95)/5 = 2.27/5 = .454, freq 2/5 = .4 -> .054
    assert ece(probs, labels, bins=1) == approx(0.054)


def test_calibration_rejects() -> None:
    with pytest.raises(ValueError, match="equal lengths"):
        brier([0.5], [1, 0])
    with pytest.raises(ValueError, match="empty"):
        ece([], [])
    with pytest.raises(ValueError, match="label #1"):
        auroc([0.5, 0.5], [1, 2])
    with pytest.raises(ValueError, match="probability #0"):
        brier([1.5], [1])
    with pytest.raises(ValueError, match="bins"):
        reliability([0.5], [1], bins=0)


def test_auroc_hand() -> None:
    # positives {.9, .8}, negatives {.8, .1}: pairs (.9>.8)=1, (.9>.1)=1, (.8=.8)=1/2, (.8>.1)=1 -> 3.5/4
    assert auroc([0.9, 0.8, 0.8, 0.1], [1, 1, 0, 0]) == approx(0.875)
    assert auroc([0.1, 0.9], [1, 0]) == approx(0.0)
    assert auroc([0.1, 0.9], [1, 1]) is None
    assert auroc([0.1, 0.9], [0, 0]) is None


@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), st.booleans()), min_size=1, max_size=20))
def test_auroc_brute_force_and_ece_range(data: list[tuple[float, bool]]) -> None:
    probs = [p for p, _ in data]
    labels = [y for _, y in data]
    pos = [p for p, y in data if y]
    neg = [p for p, y in data if not y]
    got = auroc(probs, labels)
    if not pos or not neg:
        assert got is None
    else:
        pairs = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in pos for b in neg)
        assert got == approx(pairs / (len(pos) * len(neg)))
    assert 0.0 <= ece(probs, labels) <= 1.0
    assert sum(r.count for r in reliability(probs, labels, bins=4)) == len(data)


def test_cohen_kappa_hand() -> None:
    # p_o = 3/4 ; a: y2 n2, b: y1 n3 -> p_e = (2*1 + 2*3)/16 = 1/2 ; kappa = (3/4 - 1/2) / (1/2) = 1/2
    assert cohen_kappa(["y", "y", "n", "n"], ["y", "n", "n", "n"]) == approx(0.5)
    assert cohen_kappa([1, 2, 1], [1, 2, 1]) == approx(1.0)
    # p_o = 0 ; p_e = (1*1 + 1*1)/4 = 1/2 ; kappa = -1
    assert cohen_kappa(["a", "b"], ["b", "a"]) == approx(-1.0)
    assert cohen_kappa(["x", "x"], ["x", "x"]) is None
    with pytest.raises(ValueError, match="empty"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match="equal lengths"):
        cohen_kappa([1], [1, 2])


# --- 6. matching --------------------------------------------------------------------------------------------------


def test_assignment_vs_greedy_hand() -> None:
    # rows = gold, columns = predictions
    m = [[0.9, 0.6], [0.8, 0.0]]
    # assignment: diagonal .9 + 0 = .9 vs anti-diagonal .6 + .8 = 1.4 -> gold0-pred1, gold1-pred0
    assert assignment(m) == [(0, 1), (1, 0)]
    # greedy: pred0 takes gold0 (.9); pred1 finds gold0 taken, gold1 .0 < .5 -> one match
    assert greedy_order_matching(m) == [(0, 0)]
    # swap the predictions' order
    swapped = [[row[1], row[0]] for row in m]
    # assignment gives the same pairs once mapped back (new pred j = old pred 1-j)
    assert sorted((g, 1 - p) for g, p in assignment(swapped)) == [(0, 1), (1, 0)]
    # greedy: new pred0 (old 1) takes gold0 (.6); new pred1 (old 0) takes gold1 (.8) -> two matches now
    assert greedy_order_matching(swapped) == [(0, 0), (1, 1)]


def test_matching_edges() -> None:
    assert assignment([]) == []
    assert greedy_order_matching([]) == []
    assert assignment([[], []]) == []
    # 2 gold x 3 predictions: best is gold0-pred2 (.7) + gold1-pred0 (.9) = 1.6
    assert assignment([[0.1, 0.2, 0.7], [0.9, 0.3, 0.0]]) == [(0, 2), (1, 0)]
    # threshold: .4 < .5 so no match; at .4 it matches
    assert greedy_order_matching([[0.4]]) == []
    assert greedy_order_matching([[0.4]], threshold=0.4) == [(0, 0)]
    with pytest.raises(ValueError, match="same length"):
        assignment([[0.1, 0.2], [0.3]])
    with pytest.raises(ValueError, match="P\\(match\\)"):
        greedy_order_matching([[1.2]])


@settings(max_examples=50)
@given(st.integers(1, 4), st.integers(1, 4), st.data())
def test_assignment_optimal_and_permutation_invariant(rows: int, cols: int, data: st.DataObject) -> None:
    m = [[data.draw(prob) for _ in range(cols)] for _ in range(rows)]
    got = assignment(m)
    assert len(got) == min(rows, cols)
    total = math.fsum(m[g][p] for g, p in got)
    # brute force over all one-to-one matchings of size min(rows, cols)
    if rows <= cols:
        best = max(math.fsum(m[g][p] for g, p in enumerate(perm)) for perm in itertools.permutations(range(cols), rows))
    else:
        best = max(math.fsum(m[g][p] for p, g in enumerate(perm)) for perm in itertools.permutations(range(rows), cols))
    assert total == approx(best, abs=1e-9)
    perm = data.draw(st.permutations(range(cols)))
    permuted = [[row[perm[j]] for j in range(cols)] for row in m]
    assert math.fsum(permuted[g][p] for g, p in assignment(permuted)) == approx(total, abs=1e-9)
    # greedy never matches more pairs than there are gold or predictions, nor below the threshold
    for g, p in greedy_order_matching(m):
        assert m[g][p] >= 0.5
