"""Pure maths over judge probabilities: distributions, expectations, calibration, matching.

Nothing here knows about judges or backends; inputs and outputs are plain floats and sequences.
Every function validates its inputs and raises :class:`ValueError` naming what is wrong.

None conventions (a caller must handle these):

* :func:`expected_f1_at_k` with no claims (``n = 0``): ``precision`` is ``None`` (0/0), recall and F1 are 0.
* :func:`auroc`: ``None`` when the labels hold only one class.
* :func:`cohen_kappa`: ``None`` when chance agreement is 1 (both raters used one and the same category throughout).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "Aggregate",
    "Bin",
    "F1Expectation",
    "assignment",
    "auroc",
    "brier",
    "cohen_kappa",
    "combine_orders",
    "distribution_moments",
    "ece",
    "expected_count",
    "expected_f1_at_k",
    "expected_margin",
    "greedy_order_matching",
    "kappa_of_confusion",
    "poisson_binomial",
    "prob_all",
    "reliability",
    "weighted_aggregate",
]

MARGIN_VALUES: tuple[float, ...] = (2.0, 1.0, 0.0, -1.0, -2.0)
"""Default margins of the 5-way verdict order ``A>>B, A>B, A=B, B>A, B>>A``."""


def _probs(ps: Sequence[float], what: str = "probability") -> list[float]:
    out = [float(p) for p in ps]
    for i, p in enumerate(out):
        if not 0.0 <= p <= 1.0:  # also rejects NaN
            raise ValueError(f"{what} #{i} is {p!r}; it must lie in [0, 1]")
    return out


def _nonneg(xs: Sequence[float], what: str) -> list[float]:
    out = [float(x) for x in xs]
    for i, x in enumerate(out):
        if not (math.isfinite(x) and x >= 0.0):
            raise ValueError(f"{what} #{i} is {x!r}; it must be finite and >= 0")
    return out


def _same_len(what: str, *seqs: Sequence[object]) -> int:
    n = len(seqs[0])
    if any(len(s) != n for s in seqs):
        raise ValueError(f"{what} must have equal lengths, got {[len(s) for s in seqs]}")
    if n == 0:
        raise ValueError(f"{what} must not be empty")
    return n


# --- 1. counts of independent successes --------------------------------------------------------------------------


def poisson_binomial(ps: Sequence[float]) -> list[float]:
    """Exact distribution of ``S = sum_i X_i`` with independent ``X_i ~ Bernoulli(p_i)``.

    Returns ``[P(S=0), ..., P(S=n)]`` (length ``n + 1``; ``[1.0]`` for no trials). Dynamic programming,
    O(n^2): after trial ``i``, ``P_i(s) = P_{i-1}(s) (1 - p_i) + P_{i-1}(s - 1) p_i``.
    Raises ValueError unless every ``0 <= p_i <= 1``.
    """
    dist = np.array([1.0])
    for p in _probs(ps):
        nxt = np.zeros(dist.size + 1)
        nxt[:-1] += dist * (1.0 - p)
        nxt[1:] += dist * p
        dist = nxt
    return [float(x) for x in dist]


def expected_count(ps: Sequence[float]) -> float:
    """``E[S] = sum_i p_i`` (linearity; holds without independence)."""
    return math.fsum(_probs(ps))


def prob_all(ps: Sequence[float]) -> float:
    """``P(S = n) = prod_i p_i`` under independence (1.0 for no trials)."""
    return math.prod(_probs(ps))


# --- 2. per-criterion aggregation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Aggregate:
    mean: float
    sd: float


def weighted_aggregate(means: Sequence[float], variances: Sequence[float], weights: Sequence[float]) -> Aggregate:
    """Weighted mean of per-criterion expected scores and its standard deviation.

    ``mean = sum_i w_i m_i / W`` and ``sd = sqrt(sum_i w_i^2 var_i) / W`` with ``W = sum_i w_i``.
    The sd ASSUMES the criteria scores are independent (no covariance terms); correlated criteria make it
    an underestimate. Weights must be >= 0 with a positive sum and variances >= 0, else ValueError.
    """
    _same_len("means, variances and weights", means, variances, weights)
    ws = _nonneg(weights, "weight")
    vs = _nonneg(variances, "variance")
    ms = [float(m) for m in means]
    if not all(math.isfinite(m) for m in ms):
        raise ValueError("means must be finite")
    total = math.fsum(ws)
    if total <= 0.0:
        raise ValueError("weights must have a positive sum")
    mean = math.fsum(w * m for w, m in zip(ws, ms)) / total
    sd = math.sqrt(math.fsum(w * w * v for w, v in zip(ws, vs))) / total
    return Aggregate(mean=mean, sd=sd)


def distribution_moments(values: Sequence[float], probs: Sequence[float]) -> tuple[float, float]:
    """Mean and variance of a label distribution, renormalised over the given labels.

    ``q_i = p_i / sum_j p_j`` (probabilities need not sum to 1, e.g. mass on other tokens is dropped);
    ``mean = sum_i q_i v_i``; ``variance = sum_i q_i (v_i - mean)^2``. A zero total is a ValueError.
    """
    _same_len("values and probs", values, probs)
    ps = _nonneg(probs, "probability")
    total = math.fsum(ps)
    if total <= 0.0:
        raise ValueError("probs sum to zero; nothing to renormalise")
    qs = [p / total for p in ps]
    vs = [float(v) for v in values]
    mean = math.fsum(q * v for q, v in zip(qs, vs))
    var = math.fsum(q * (v - mean) ** 2 for q, v in zip(qs, vs))
    return mean, var


# --- 3. 5-way pairwise verdicts -----------------------------------------------------------------------------------


def expected_margin(probs_5way: Sequence[float], values: Sequence[float] = MARGIN_VALUES) -> float:
    """Expected graded margin ``sum_i q_i v_i`` of a 5-way verdict (renormalised ``q``).

    Outcome order: ``A>>B, A>B, A=B, B>A, B>>A``; default values ``(2, 1, 0, -1, -2)`` (positive favours A).
    """
    if len(probs_5way) != 5 or len(values) != 5:
        raise ValueError("a 5-way verdict needs exactly 5 probabilities and 5 values")
    return distribution_moments(values, probs_5way)[0]


def combine_orders(p_ab: Sequence[float], p_ba: Sequence[float]) -> list[float]:
    """Combine a 5-way verdict judged in both presentation orders into one distribution over A vs B.

    ``p_ab`` is from the prompt showing A first: ``(A>>B, A>B, A=B, B>A, B>>A)``. ``p_ba`` is from the prompt
    showing B first, in that prompt's own order ``(first>>second, ..., second>>first)``, i.e.
    ``(B>>A, B>A, B=A, A>B, A>>B)``. Mirroring is therefore reversal: ``m_j = p_ba[4 - j]``.
    Each order is renormalised, then the orders are combined as TrustJudge's likelihood-aware aggregation
    combines 3-way verdicts: by summing the two orders' probabilities, ``c_j = (q_ab[j] + m_j) / 2``.
    Returns 5 probabilities in A-first order.
    """
    if len(p_ab) != 5 or len(p_ba) != 5:
        raise ValueError("each order needs exactly 5 probabilities")
    a = _nonneg(p_ab, "p_ab probability")
    b = _nonneg(p_ba, "p_ba probability")
    sa, sb = math.fsum(a), math.fsum(b)
    if sa <= 0.0 or sb <= 0.0:
        raise ValueError("each order's probabilities must have a positive sum")
    return [(x / sa + y / sb) / 2.0 for x, y in zip(a, reversed(b))]


# --- 4. expected claim-level F1 -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class F1Expectation:
    precision: float | None
    recall: float
    f1: float
    dist: list[float]


def expected_f1_at_k(ps: Sequence[float], k: int) -> F1Expectation:
    """Exact expectations of claim precision, recall@K and F1 when claim ``i`` is supported with ``p_i``.

    Claims are ASSUMED independent, so ``S ~ PoissonBinomial(ps)`` (``dist = [P(S=0), ..., P(S=n)]``).
    Per outcome: ``precision(s) = s / n``, ``recall(s) = min(s / K, 1)``, ``F1(s) = 2PR / (P + R)`` (0 at s=0).
    Each field is ``E[f(S)] = sum_s P(S=s) f(s)``; ``f1`` is NOT the F1 of the expected precision and recall.
    With ``n = 0``: ``precision`` is None (undefined), ``recall = f1 = 0``, ``dist = [1.0]``.
    Raises ValueError for ``k < 1`` or a probability outside [0, 1].
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    dist = poisson_binomial(ps)
    n = len(dist) - 1
    if n == 0:
        return F1Expectation(precision=None, recall=0.0, f1=0.0, dist=dist)
    e_p, e_r, e_f = [], [], []
    for s, w in enumerate(dist):
        p, r = s / n, min(s / k, 1.0)
        e_p.append(w * p)
        e_r.append(w * r)
        e_f.append(w * (2.0 * p * r / (p + r) if s > 0 else 0.0))
    return F1Expectation(precision=math.fsum(e_p), recall=math.fsum(e_r), f1=math.fsum(e_f), dist=dist)


# --- 5. calibration against binary human labels -------------------------------------------------------------------


@dataclass(frozen=True)
class Bin:
    lo: float
    hi: float
    count: int
    mean_prob: float
    frequency: float


def _binary(probs: Sequence[float], labels: Sequence[int | bool]) -> tuple[list[float], list[int]]:
    _same_len("probs and labels", probs, labels)
    ys: list[int] = []
    for i, y in enumerate(labels):
        if y not in (0, 1):
            raise ValueError(f"label #{i} is {y!r}; labels must be 0/1 or False/True")
        ys.append(int(y))
    return _probs(probs), ys


def _rows(probs: Any, labels: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``probs`` as rows of class probabilities (N, K) with ``labels`` as class indices, or ``None`` where
    ``probs`` is one probability per item (the binary form)."""
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2:
        return None
    lab = np.asarray(labels, dtype=np.int64).ravel()
    if lab.shape[0] != p.shape[0]:
        raise ValueError(f"probs and labels must have equal lengths, got {[p.shape[0], lab.shape[0]]}")
    if lab.size and (lab.min() < 0 or lab.max() >= p.shape[1]):
        raise ValueError(f"labels must be class indices 0..{p.shape[1] - 1}")
    return p, lab


def brier(probs: Sequence[float] | Any, labels: Sequence[int | bool] | Any) -> float:
    """Brier score (0 is perfect, lower is better): ``(1/N) sum_i (p_i - y_i)^2`` of P(positive) against 0/1
    labels (scikit-learn's ``brier_score_loss``); given rows of class probabilities (N, K) and class indices,
    ``(1/N) sum_i sum_k (p_ik - [y_i = k])^2`` (two classes: twice the binary score); no rows: nan."""
    rows = _rows(probs, labels)
    if rows is not None:
        p, lab = rows
        return float(np.mean(np.sum((p - np.eye(p.shape[1])[lab]) ** 2, axis=1))) if p.shape[0] else math.nan
    ps, ys = _binary(probs, labels)
    return math.fsum((p - y) ** 2 for p, y in zip(ps, ys)) / len(ps)


def reliability(probs: Sequence[float], labels: Sequence[int | bool], bins: int = 10) -> list[Bin]:
    """Reliability diagram over ``bins`` equal-width bins of [0, 1]; empty bins are omitted.

    Bin ``b`` is ``[b/B, (b+1)/B)``, except that the last bin also holds p = 1.0: index ``min(floor(p B), B - 1)``.
    ``mean_prob`` is the mean predicted probability in the bin, ``frequency`` the fraction of positive labels.
    """
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be an integer >= 1, got {bins!r}")
    ps, ys = _binary(probs, labels)
    members: dict[int, list[tuple[float, int]]] = {}
    for p, y in zip(ps, ys):
        members.setdefault(min(math.floor(p * bins), bins - 1), []).append((p, y))
    out = []
    for b in sorted(members):
        pts = members[b]
        mean_prob = math.fsum(p for p, _ in pts) / len(pts)
        frequency = sum(y for _, y in pts) / len(pts)
        out.append(Bin(lo=b / bins, hi=(b + 1) / bins, count=len(pts), mean_prob=mean_prob, frequency=frequency))
    return out


def ece(probs: Sequence[float] | Any, labels: Sequence[int | bool] | Any, bins: int = 10) -> float:
    """Expected calibration error ``sum_b (n_b / N) |mean_prob_b - frequency_b|`` over :func:`reliability` bins.

    One probability per item: P(positive) against the 0/1 labels. Rows of class probabilities (N, K) with
    class indices: the top class's confidence against whether it is the label (the top-class ECE; no rows: nan).
    """
    rows = _rows(probs, labels)
    if rows is not None:
        p, lab = rows
        if not p.shape[0]:
            return math.nan
        probs, labels = p.max(axis=1).tolist(), (p.argmax(axis=1) == lab).astype(int).tolist()
    cells = reliability(probs, labels, bins)
    n = sum(r.count for r in cells)
    return math.fsum(r.count / n * abs(r.mean_prob - r.frequency) for r in cells)


def auroc(probs: Sequence[float], labels: Sequence[int | bool]) -> float | None:
    """Area under the ROC curve = P(score of a random positive > score of a random negative), ties counting 1/2.

    Rank formula with average ranks: ``(R_+ - n_+ (n_+ + 1) / 2) / (n_+ n_-)``. None if only one class is present.
    """
    ps, ys = _binary(probs, labels)
    n_pos = sum(ys)
    n_neg = len(ys) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    from scipy.stats import rankdata  # type: ignore[import-untyped]  # lazy: scipy.stats is slow to import

    ranks = rankdata(ps)
    r_pos = math.fsum(float(r) for r, y in zip(ranks, ys) if y == 1)
    return (r_pos - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def kappa_of_confusion(conf: Any) -> Any:
    """Cohen's kappa ``(p_o - p_e) / (1 - p_e)`` of (..., K, K) confusion matrices (rater one by rater two), one
    per matrix: ``p_o`` the share on the diagonal, ``p_e = sum_c row_c col_c / N^2``; nan without data or where
    ``p_e == 1``. The one definition of kappa: :func:`cohen_kappa` and the audits' bootstraps use it."""
    conf = np.asarray(conf, dtype=np.float64)
    total = conf.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(conf, axis1=-2, axis2=-1) / total
        chance = (conf.sum(axis=-1) * conf.sum(axis=-2)).sum(axis=-1) / total**2
        kappa = (observed - chance) / (1.0 - chance)
    return np.where(chance < 1.0, kappa, math.nan)


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters over the same items (:func:`kappa_of_confusion` of their confusion matrix).

    ``p_o`` = fraction of items labelled alike; ``p_e = sum_c (n_a(c) / N) (n_b(c) / N)``. None if ``p_e == 1``.
    """
    _same_len("the two label sequences", a, b)
    classes = {c: i for i, c in enumerate(dict.fromkeys([*a, *b]))}
    conf = np.zeros((len(classes), len(classes)))
    for x, y in zip(a, b):
        conf[classes[x], classes[y]] += 1
    kappa = float(kappa_of_confusion(conf))
    return None if math.isnan(kappa) else kappa


# --- 6. matching gold claims to predicted claims ------------------------------------------------------------------


def _matrix(matrix: Sequence[Sequence[float]]) -> list[list[float]]:
    rows = [_probs(r, "P(match)") for r in matrix]
    if rows and any(len(r) != len(rows[0]) for r in rows):
        raise ValueError("matrix rows (gold claims) must all have the same length (number of predictions)")
    return rows


def assignment(matrix: Sequence[Sequence[float]]) -> list[tuple[int, int]]:
    """One-to-one matching of gold rows to predicted columns maximising the total P(match) (Hungarian).

    Returns ``(gold, pred)`` pairs sorted by gold index; ``min(rows, cols)`` pairs, INCLUDING low-probability ones
    (filter by ``matrix[g][p]`` if a threshold is wanted). Independent of the order of predictions up to ties.
    """
    rows = _matrix(matrix)
    if not rows or not rows[0]:
        return []
    from scipy.optimize import linear_sum_assignment  # type: ignore[import-untyped]

    r, c = linear_sum_assignment(np.array(rows), maximize=True)
    return sorted((int(g), int(p)) for g, p in zip(r, c))


def greedy_order_matching(matrix: Sequence[Sequence[float]], threshold: float = 0.5) -> list[tuple[int, int]]:
    """Order-dependent rule: each prediction, in order, takes the first unmatched gold with P(match) >= threshold.

    Mimics LiveDRBench-style matching, to measure how much that rule moves scores against :func:`assignment`.
    Returns ``(gold, pred)`` pairs in prediction order.
    """
    rows = _matrix(matrix)
    taken: set[int] = set()
    out: list[tuple[int, int]] = []
    for p in range(len(rows[0]) if rows else 0):
        for g, row in enumerate(rows):
            if g not in taken and row[p] >= threshold:
                taken.add(g)
                out.append((g, p))
                break
    return out
