"""Calibrated probabilities and selective verdicts with a human-agreement guarantee (model-free maths).

Three pieces, each a pure function of stored probabilities and human labels (no model call):

- **Calibration maps** fitted by likelihood on a labelled set: for two classes, Platt scaling
  ``q = sigmoid(a * logit(p) + b)`` (``temperature`` fixes ``b = 0``) or isotonic regression; for several
  classes, vector scaling ``q = softmax(log(p) / T + b)`` (one temperature, a bias per class, the first
  class's bias fixed at 0).
- **A label-free position correction** for pairwise judging: the judge's mean log-odds for the
  first-shown slot over both presentation orders of a batch (an unbiased judge's two orders cancel),
  removed from each order before aggregation.
- **Selective verdicts** in the manner of *Trust or Escalate* (Jung, Brahman, Choi; ICLR 2025): keep a
  verdict when its confidence is at least a threshold chosen on a labelled calibration set by
  fixed-sequence testing with exact binomial tests, so that the disagreement rate with humans on kept
  verdicts is at most ``alpha`` with probability at least ``1 - delta``. Cascades apply this tier by tier,
  each tier calibrated on the calibration items the earlier tiers abstained on, ``delta`` split evenly
  over the model tiers (a union bound: every tier meets its bound at once with probability >= 1 - delta,
  and a mixture of kept sets each with risk <= alpha has risk <= alpha).

The threshold grid is the calibration set's own confidence values from the highest down, starting at the
first value that keeps enough items for a zero-error set to pass (``min_kept``); the grid depends on the
confidences only, never on agreement, and the tests stop at the first threshold that fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ..engine._aggregates import brier as brier
from ..engine._aggregates import ece as ece
from ..errors import ConfigError

Floats = npt.NDArray[np.float64]
BinaryMethod = Literal["platt", "temperature", "isotonic"]
METHODS = ("platt", "temperature", "isotonic", "vector")
_EPS = 1e-12


def _logit(p: Floats) -> Floats:
    q = np.clip(p, _EPS, 1 - _EPS)
    return np.asarray(np.log(q) - np.log1p(-q), dtype=np.float64)


def _sigmoid(z: Floats) -> Floats:
    return np.asarray(0.5 * (1 + np.tanh(0.5 * z)), dtype=np.float64)


def _softmax(z: Floats) -> Floats:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return np.asarray(e / e.sum(axis=1, keepdims=True), dtype=np.float64)


def _check_fit_data(p: Floats, y: npt.NDArray[np.int64], classes: int) -> None:
    if p.shape[0] != y.shape[0]:
        raise ConfigError(f"calibration needs one label per probability, got {p.shape[0]} and {y.shape[0]}")
    if p.shape[0] < 2:
        raise ConfigError(f"calibration needs at least 2 labelled judgments, got {p.shape[0]}")
    if not np.all(np.isfinite(p)):
        raise ConfigError("calibration probabilities must be finite numbers")
    if y.size and (y.min() < 0 or y.max() >= classes):
        raise ConfigError(f"calibration labels must be class indices 0..{classes - 1}")


@dataclass(frozen=True)
class CalibrationMap:
    """A fitted map from raw to calibrated probabilities over ``classes`` (binary: index 1 is positive)."""

    method: str
    classes: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)

    def apply(self, probs: npt.ArrayLike) -> Floats:
        """Calibrated probabilities, rows summing to 1, for raw rows of ``len(classes)`` probabilities."""
        p = np.atleast_2d(np.asarray(probs, dtype=np.float64))
        if p.shape[1] != len(self.classes):
            raise ConfigError(f"calibration for {len(self.classes)} classes {list(self.classes)} applied to "
                              f"{p.shape[1]} probabilities")
        p = p / np.clip(p.sum(axis=1, keepdims=True), _EPS, None)
        if self.method == "vector" or "temperature" in self.params:  # several classes (temperature: no bias)
            z = np.log(np.clip(p, _EPS, None)) / float(self.params["temperature"])
            return _softmax(z + np.asarray(self.params.get("bias", 0.0), dtype=np.float64))
        pos = p[:, 1]
        if self.method in ("platt", "temperature"):
            q = _sigmoid(float(self.params["a"]) * _logit(pos) + float(self.params.get("b", 0.0)))
        elif self.method == "isotonic":
            q = np.interp(pos, np.asarray(self.params["x"]), np.asarray(self.params["y"]))
        else:
            raise ConfigError(f"unknown calibration method {self.method!r}: use one of {', '.join(METHODS)}")
        return np.stack([1 - q, q], axis=1)


def fit_binary(p: npt.ArrayLike, y: npt.ArrayLike, method: BinaryMethod = "platt",
               classes: tuple[str, str] = ("NO", "YES")) -> CalibrationMap:
    """Fit a two-class map on ``p`` (P(positive)) and ``y`` (1 = positive, 0 = negative)."""
    from scipy.optimize import isotonic_regression, minimize  # type: ignore[import-untyped, unused-ignore]

    pos = np.asarray(p, dtype=np.float64).ravel()
    lab = np.asarray(y, dtype=np.int64).ravel()
    _check_fit_data(pos, lab, 2)
    if method == "isotonic":
        ux, inverse, counts = np.unique(pos, return_inverse=True, return_counts=True)  # ties pooled
        means = np.bincount(inverse, weights=lab.astype(np.float64)) / counts
        uy = isotonic_regression(means, weights=counts.astype(np.float64), increasing=True).x
        return CalibrationMap("isotonic", classes, {"x": ux.tolist(), "y": np.asarray(uy).tolist()})
    if method not in ("platt", "temperature"):
        raise ConfigError(f"unknown binary calibration method {method!r}: use platt, temperature or isotonic")
    z = _logit(pos)
    t = lab.astype(np.float64)

    def nll(theta: Floats) -> tuple[float, Floats]:
        a, b = (theta[0], theta[1]) if method == "platt" else (theta[0], 0.0)
        s = a * z + b
        # log(1 + e^s) - t*s, stable
        loss = float(np.sum(np.logaddexp(0.0, s) - t * s))
        r = _sigmoid(s) - t
        grad = np.array([np.sum(r * z), np.sum(r)]) if method == "platt" else np.array([np.sum(r * z)])
        return loss, grad

    x0 = np.array([1.0, 0.0]) if method == "platt" else np.array([1.0])
    res = minimize(nll, x0, jac=True, method="L-BFGS-B")
    params = {"a": float(res.x[0]), "b": float(res.x[1]) if method == "platt" else 0.0}
    return CalibrationMap(method, classes, params)


def _class_logs(probs: npt.ArrayLike, y: npt.ArrayLike, classes: Sequence[str]) -> tuple[Floats, npt.NDArray[np.int64]]:
    """The checked fitting data of a several-class map: log of each row's normalised probabilities, and labels."""
    p = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    lab = np.asarray(y, dtype=np.int64).ravel()
    k = len(classes)
    if p.shape[1] != k:
        raise ConfigError(f"{k} classes but {p.shape[1]} probabilities per row")
    _check_fit_data(p, lab, k)
    return np.log(np.clip(p / np.clip(p.sum(axis=1, keepdims=True), _EPS, None), _EPS, None)), lab


def fit_vector(probs: npt.ArrayLike, y: npt.ArrayLike, classes: Sequence[str]) -> CalibrationMap:
    """Vector scaling on several classes: one temperature and a bias per class, fitted by likelihood."""
    from scipy.optimize import minimize  # type: ignore[import-untyped, unused-ignore]

    logp, lab = _class_logs(probs, y, classes)
    k = len(classes)
    onehot = np.eye(k)[lab]

    def nll(theta: Floats) -> tuple[float, Floats]:
        inv_t = math.exp(theta[0])
        bias = np.concatenate([[0.0], theta[1:]])
        z = logp * inv_t + bias
        q = _softmax(z)
        loss = -float(np.sum(np.log(np.clip(np.sum(q * onehot, axis=1), 1e-300, None))))
        r = q - onehot  # d loss / d z
        g_t = float(np.sum(r * logp)) * inv_t
        g_b = r.sum(axis=0)[1:]
        return loss + 1e-6 * float(theta @ theta), np.concatenate([[g_t], g_b]) + 2e-6 * theta

    res = minimize(nll, np.zeros(k), jac=True, method="L-BFGS-B")
    return CalibrationMap("vector", tuple(classes), {"temperature": float(math.exp(-res.x[0])),
                                                     "bias": [0.0, *map(float, res.x[1:])]})


def fit_temperature(probs: npt.ArrayLike, y: npt.ArrayLike, classes: Sequence[str]) -> CalibrationMap:
    """Temperature scaling on several classes, ``softmax(log(p) / T)``: one parameter, fitted by likelihood (for
    many classes, such as a 100-point scale's levels, most of which no human label reaches)."""
    from scipy.optimize import minimize_scalar  # type: ignore[import-untyped, unused-ignore]

    logp, lab = _class_logs(probs, y, classes)
    rows = np.arange(lab.size)

    def nll(log_inv_t: float) -> float:
        q = _softmax(logp * math.exp(log_inv_t))
        return -float(np.sum(np.log(np.clip(q[rows, lab], 1e-300, None))))

    res = minimize_scalar(nll, bounds=(-5.0, 5.0), method="bounded")
    return CalibrationMap("temperature", tuple(classes), {"temperature": float(math.exp(-res.x))})


# -- position prior (pairwise, label-free) --------------------------------------------------------------

def position_bias(orders: npt.ArrayLike) -> float:
    """The judge's mean log-odds for the first-shown slot, from pairs judged in both orders.

    ``orders`` has shape (pairs, 2, 3): for each pair, each presentation order's probabilities of
    (first-shown wins, second-shown wins, tie). For an unbiased judge the two orders' log-odds of the
    first-shown slot cancel pair by pair (the winner changes slot); their mean is the bias.
    """
    o = np.asarray(orders, dtype=np.float64)
    if o.ndim != 3 or o.shape[1:] != (2, 3):
        raise ConfigError(f"position bias needs (pairs, 2 orders, 3 probabilities), got shape {o.shape}")
    if o.shape[0] == 0:
        raise ConfigError("position bias needs at least one pair judged in both orders")
    logodds = np.log(np.clip(o[:, :, 0], _EPS, None)) - np.log(np.clip(o[:, :, 1], _EPS, None))
    return float(np.mean(logodds))


def remove_position_bias(order: npt.ArrayLike, bias: float) -> Floats:
    """One order's (first-shown, second-shown, tie) probabilities with the slot bias taken out."""
    o = np.atleast_2d(np.asarray(order, dtype=np.float64)).copy()
    o[:, 0] *= math.exp(-bias / 2)
    o[:, 1] *= math.exp(bias / 2)
    return np.asarray(o / np.clip(o.sum(axis=1, keepdims=True), _EPS, None), dtype=np.float64)


# -- metrics -------------------------------------------------------------------------------------------

# ``ece`` and ``brier`` over rows of class probabilities are the engine's (one definition each):
# :func:`trustjudge.engine._aggregates.ece` (top-class ECE) and :func:`~trustjudge.engine._aggregates.brier`.


# -- selective verdicts ------------------------------------------------------------------------------

def min_kept(alpha: float, delta: float) -> int:
    """The fewest kept calibration verdicts for which even zero disagreements pass the binomial test."""
    _check_levels(alpha, delta)
    return math.ceil(math.log(delta) / math.log1p(-alpha))


def _check_levels(alpha: float, delta: float) -> None:
    if not (math.isfinite(alpha) and 0 < alpha < 1):
        raise ConfigError(f"the target agreement must be between 0 and 1 (exclusive), got {1 - alpha!r}")
    if not (math.isfinite(delta) and 0 < delta < 1):
        raise ConfigError(f"delta must be between 0 and 1 (exclusive), got {delta!r}")


def clopper_pearson_lower(successes: int, n: int, delta: float) -> float:
    """One-sided exact (Clopper-Pearson) lower bound of a binomial proportion at level 1 - delta."""
    from scipy.stats import beta  # type: ignore[import-untyped, unused-ignore]

    if n == 0 or successes == 0:
        return 0.0
    return float(beta.ppf(delta, successes, n - successes + 1))  # type: ignore[arg-type, unused-ignore]


def _grid(confidence: Floats, need: int, steps: int = 50) -> list[int]:
    """Kept counts to test, in order, for confidences sorted from the highest down.

    The first test keeps ``3 * need`` verdicts (fewer when the set is smaller, never under ``need``): a test
    that only zero disagreements can pass stops the sequence on the first unlucky error, which in
    simulation cost a quarter of the coverage. Then steps of ``n / steps``. Each count is moved up to the end
    of its run of equal confidences (a threshold keeps every tie). The grid depends on the confidences
    and on n only, never on agreement.
    """
    n = confidence.size
    if n < need:
        return []
    ends = np.flatnonzero(np.r_[confidence[1:] != confidence[:-1], True]) + 1  # kept counts at each distinct value
    out: list[int] = []
    for k in range(min(n, 3 * need), n + 1, max(1, math.ceil(n / steps))):
        k = int(ends[np.searchsorted(ends, k)])
        if not out or k > out[-1]:
            out.append(k)
    if out and out[-1] != n:
        out.append(n)
    return out


@dataclass(frozen=True)
class Selection:
    """A confidence threshold chosen on a calibration set, and what it guarantees."""

    threshold: float
    """Keep a verdict whose confidence is >= this; ``inf`` keeps none (the target could not be supported)."""
    alpha: float
    delta: float
    n: int
    """Calibration verdicts the choice rests on."""
    kept: int
    """Calibration verdicts at or above the threshold."""
    agreement: float | None
    """Agreement with humans on the kept calibration verdicts."""
    lower_bound: float | None
    """Clopper-Pearson lower bound (level 1 - delta) of the agreement on kept verdicts."""
    map: CalibrationMap | None = field(default=None, hash=False)
    """The selection map: fitted on the calibration units the threshold was NOT tested on (part A of the split),
    so that the kept verdicts' agreement is measured on units the map never saw; ``None`` for a threshold
    chosen on confidences given as they are (:func:`choose_threshold` alone). The verdicts and confidences a
    selection keeps or abstains on come from this map."""
    fit_units: int | None = None
    """Calibration units the selection map was fitted on (part A); ``n`` counts those the threshold was tested
    on (part B)."""
    model: Any = field(default=None, hash=False)
    """A features calibration's confidence model (:class:`~trustjudge.audit._estimators.ConfidenceModel`), fitted
    on part A under :attr:`map`; ``None`` where the confidence is the calibrated top probability."""

    @property
    def target(self) -> float:
        return 1 - self.alpha

    @property
    def supported(self) -> bool:
        return math.isfinite(self.threshold)

    def keep(self, confidence: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        c = np.asarray(confidence, dtype=np.float64)
        return np.asarray(np.nan_to_num(c, nan=-np.inf) >= self.threshold)

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold if self.supported else None, "target_agreement": self.target,
                "alpha": self.alpha, "delta": self.delta, "calibration_n": self.n, "calibration_kept": self.kept,
                "calibration_agreement": self.agreement, "agreement_lower_bound": self.lower_bound,
                **({"selection": {"fit_units": self.fit_units, "test_units": self.n}}
                   if self.fit_units is not None else {}),
                **({"confidence": "features", "confidence_model": self.model.to_dict()} if self.model is not None
                   else {})}


def choose_threshold(confidence: npt.ArrayLike, agree: npt.ArrayLike, *, alpha: float, delta: float,
                     strict: bool = True) -> Selection:
    """The lowest confidence threshold whose kept set passes fixed-sequence testing at level ``delta``.

    Each threshold lambda on a grid from the highest calibration confidence down (:func:`_grid`) tests
    H0: P(disagree | conf >= lambda) > alpha with the exact binomial p-value
    P(Bin(n_lambda, alpha) <= errors_lambda); the sequence stops at the first p-value above
    ``delta``. Unscored items (NaN confidence) are never kept.

    Raises:
        ConfigError: with ``strict``, when no threshold passes (the calibration set is too small or the
            judge too weak for the target); without it, a selection that keeps nothing.
    """
    from scipy.stats import binom  # type: ignore[import-untyped, unused-ignore]

    _check_levels(alpha, delta)
    c = np.asarray(confidence, dtype=np.float64).ravel()
    a = np.asarray(agree, dtype=bool).ravel()
    if c.shape != a.shape:
        raise ConfigError(f"one agreement per confidence needed, got {c.size} and {a.size}")
    ok = np.isfinite(c)
    c, a = c[ok], a[ok]
    order = np.argsort(-c, kind="stable")
    c, a = c[order], a[order]
    need = min_kept(alpha, delta)
    best: tuple[float, int, int] | None = None
    for k in _grid(c, need):
        errors = int(np.count_nonzero(~a[:k]))
        if binom.cdf(errors, k, alpha) > delta:
            break
        best = (float(c[k - 1]), k, k - errors)
    if best is None:
        if strict:
            raise ConfigError(
                f"the calibration set ({c.size} scored verdicts) cannot support agreement >= {1 - alpha:g} at "
                f"delta {delta:g}: even the most confident verdicts fail the test (at least {need} kept "
                f"verdicts with no disagreement are needed); label more items, or lower the target")
        return Selection(math.inf, alpha, delta, int(c.size), 0, None, None)
    threshold, n_kept, agreed = best
    return Selection(threshold, alpha, delta, int(c.size), n_kept, agreed / n_kept,
                     clopper_pearson_lower(agreed, n_kept, delta))


@dataclass(frozen=True)
class CascadeResult:
    """Which tier decided each item (``-1``: none, left for a person) and each tier's selection."""

    tier: npt.NDArray[np.int64]
    selections: list[Selection]


def choose_cascade(confidences: Sequence[npt.ArrayLike], agrees: Sequence[npt.ArrayLike], *, alpha: float,
                   delta: float) -> list[Selection]:
    """Thresholds for a cascade of judges on one calibration set.

    ``confidences[t][i]`` is tier t's confidence on calibration item i (NaN where it has no verdict) and
    ``agrees[t][i]`` whether its verdict agrees with the human label. Tier t is calibrated on the items
    every earlier tier abstained on, at level ``delta / tiers``; a tier that cannot support the target
    keeps nothing and passes everything on.
    """
    _check_levels(alpha, delta)
    tiers = len(confidences)
    if tiers == 0:
        raise ConfigError("a cascade needs at least one judge")
    remaining = np.ones(np.asarray(confidences[0]).size, dtype=bool)
    out: list[Selection] = []
    for conf, agree in zip(confidences, agrees):
        c = np.asarray(conf, dtype=np.float64).ravel()
        a = np.asarray(agree, dtype=bool).ravel()
        sel = choose_threshold(c[remaining], a[remaining], alpha=alpha, delta=delta / tiers, strict=False)
        out.append(sel)
        remaining &= ~sel.keep(c)
    return out


def run_cascade(confidences: Sequence[npt.ArrayLike], selections: Sequence[Selection]) -> CascadeResult:
    """Route each item to the first tier that keeps it (``-1`` when every tier abstains)."""
    n = np.asarray(confidences[0]).size
    tier = np.full(n, -1, dtype=np.int64)
    for t, (conf, sel) in enumerate(zip(confidences, selections)):
        take = (tier == -1) & sel.keep(conf)
        tier[take] = t
    return CascadeResult(tier, list(selections))
