"""Bradley-Terry with ties (Davidson or Rao-Kupper): the fit and its bootstrap over items.

Log-strengths theta normalised to sum to zero (the optimiser moves K-1 of them, the last is minus their
sum), fitted by L-BFGS-B with an analytic gradient under a Gaussian prior ``prior / 2 * sum(theta ** 2)``;
the tie parameter is fitted on a log scale within [1e-8, 1e8]. Intervals are percentile bootstraps over
items from ``numpy.random.default_rng(seed)``, each refit warm-started from the full-data fit (see
:mod:`trustjudge.audit._ranking`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, sparse, stats  # type: ignore[import-untyped, unused-ignore]
from scipy.sparse import csgraph  # type: ignore[import-untyped, unused-ignore]

from ._outcomes import (
    _ETA_BOUNDS,
    DEFAULT_PRIOR,
    TIE_MODELS,
    Floats,
    Ints,
    Outcome,
    TieModel,
    Weights,
)


@dataclass(frozen=True)
class _Design:
    """Outcomes indexed for fitting: unique system pairs (i < j); weights columns: i wins, j wins, tie."""

    n_systems: int
    pair_i: Ints
    pair_j: Ints
    obs_pair: Ints
    obs_item: Ints
    obs_w: Floats
    n_items: int

    def totals(self, multiplicity: Floats | None = None) -> Floats:
        w = self.obs_w if multiplicity is None else self.obs_w * multiplicity[:, None]
        return np.stack([np.bincount(self.obs_pair, w[:, c], len(self.pair_i)) for c in range(3)], axis=1)


def _design(outcomes: Sequence[Outcome], systems: Sequence[str], soft: bool) -> _Design:
    index = {s: i for i, s in enumerate(systems)}
    pairs: dict[tuple[int, int], int] = {}
    items: dict[str, int] = {}
    obs: list[tuple[int, int, Weights]] = []
    for o in outcomes:
        w = o.weights(soft)
        if w is None:
            continue
        if o.first not in index or o.second not in index:
            raise ValueError(f"outcome between {o.first!r} and {o.second!r} names a system not in systems")
        a, b = index[o.first], index[o.second]
        if a > b:
            a, b, w = b, a, (w[1], w[0], w[2])
        if a != b:
            obs.append((pairs.setdefault((a, b), len(pairs)), items.setdefault(o.item_id, len(items)), w))
    if not obs:
        raise ValueError("no scored pairs: no outcome between two systems has "
                         + ("probabilities" if soft else "a verdict"))
    keys = np.array(list(pairs), dtype=np.intp)
    return _Design(len(systems), keys[:, 0], keys[:, 1], np.array([o[0] for o in obs], dtype=np.intp),
                   np.array([o[1] for o in obs], dtype=np.intp), np.array([o[2] for o in obs]), len(items))


def _nll(x: Floats, d: _Design, w: Floats, ties: TieModel, prior: float) -> tuple[float, Floats]:
    """Negative log-posterior and gradient; ``x`` = K-1 free log-strengths, then the log tie parameter."""
    theta = np.append(x[:-1], -x[:-1].sum())
    eta = x[-1]
    ti, tj = theta[d.pair_i], theta[d.pair_j]
    w1, w2, wt = w[:, 0], w[:, 1], w[:, 2]
    if ties == "davidson":
        # log D = log(pi_i + pi_j + nu sqrt(pi_i pi_j)); pa and pt are the model's P(i wins), P(tie).
        lt = eta + (ti + tj) / 2
        log_d = np.logaddexp(np.logaddexp(ti, tj), lt)
        total = w1 + w2 + wt
        pa, pt = np.exp(ti - log_d), np.exp(lt - log_d)
        ll = np.sum(w1 * ti + w2 * tj + wt * lt - total * log_d)
        gi = w1 + wt / 2 - total * (pa + pt / 2)
        g_eta = np.sum(wt - total * pt)
    else:
        # Rao-Kupper, theta = 1 + e^eta: LL = u ti + v tj + wt log(theta^2 - 1) - u log D1 - v log D2.
        log_theta = np.logaddexp(0.0, eta)
        log_d1, log_d2 = np.logaddexp(ti, log_theta + tj), np.logaddexp(tj, log_theta + ti)
        u, v = w1 + wt, w2 + wt
        r1, r2 = 1 - np.exp(ti - log_d1), 1 - np.exp(tj - log_d2)
        ll = np.sum(u * ti + v * tj + wt * (eta + np.logaddexp(math.log(2.0), eta)) - u * log_d1 - v * log_d2)
        gi = u * r1 - v * r2
        big = math.exp(log_theta)
        g_eta = np.sum(wt * 2 * big / (big + 1) - (big - 1) / big * (u * r1 + v * r2))
    # In both models d LL / d theta_j = -gi: the likelihood only sees differences of log-strengths.
    grad = prior * theta - np.bincount(d.pair_i, gi, d.n_systems) + np.bincount(d.pair_j, gi, d.n_systems)
    return prior / 2 * float(theta @ theta) - float(ll), np.append(grad[:-1] - grad[-1], -g_eta)


def _optimise(d: _Design, w: Floats, ties: TieModel, prior: float, x0: Floats) -> tuple[Floats, float, bool]:
    res = optimize.minimize(_nll, x0, args=(d, w, ties, prior), jac=True, method="L-BFGS-B",
                            bounds=[(None, None)] * (d.n_systems - 1) + [_ETA_BOUNDS],
                            options={"maxiter": 5000, "ftol": 1e-13, "gtol": 1e-9})
    x = np.asarray(res.x, dtype=np.float64)
    tie = math.exp(x[-1]) + (0.0 if ties == "davidson" else 1.0)
    return np.append(x[:-1], -x[:-1].sum()), tie, bool(res.success)


@dataclass(frozen=True)
class BTFit:
    """A Bradley-Terry fit: log-``strengths`` (sum zero, higher is better) in ``systems`` order.

    ``tie`` is Davidson's nu or Rao-Kupper's theta (per ``ties``); ``outcomes`` pairs from ``items``
    questions were fitted. With ``components`` > 1 the comparison graph is disconnected and only the
    prior relates strengths across components.
    """

    systems: tuple[str, ...]
    strengths: tuple[float, ...]
    tie: float
    ties: TieModel
    prior: float
    soft: bool
    outcomes: int
    items: int
    components: int
    converged: bool

    def strength(self, system: str) -> float:
        """Return the log-strength of ``system``."""
        return self.strengths[self.systems.index(system)]

    def probabilities(self, a: str, b: str) -> Weights:
        """Return the model's ``(a wins, b wins, tie)`` probabilities for ``a`` against ``b``."""
        pa, pb = math.exp(self.strength(a)), math.exp(self.strength(b))
        if self.ties == "davidson":
            total = pa + pb + self.tie * math.sqrt(pa * pb)
            return pa / total, pb / total, 1 - (pa + pb) / total
        win_a, win_b = pa / (pa + self.tie * pb), pb / (pb + self.tie * pa)
        return win_a, win_b, 1 - win_a - win_b


def _fit(outcomes: Sequence[Outcome], systems: Sequence[str] | None, ties: TieModel, soft: bool,
         prior: float) -> tuple[BTFit, _Design]:
    if ties not in TIE_MODELS:
        raise ValueError(f"unknown tie model {ties!r}; choose one of {', '.join(TIE_MODELS)}")
    if not prior >= 0:
        raise ValueError(f"prior must be >= 0, got {prior}")
    if systems is None:
        systems = sorted({s for o in outcomes if o.weights(soft) is not None for s in (o.first, o.second)})
        if not systems:
            raise ValueError(f"no scored pairs: no outcome has {'probabilities' if soft else 'a verdict'}")
    if len(set(systems)) < 2:
        raise ValueError(f"ranking needs at least 2 systems, got {len(set(systems))}: {sorted(set(systems))}")
    d = _design(outcomes, systems, soft)
    theta, tie, ok = _optimise(d, d.totals(), ties, prior, np.zeros(d.n_systems))
    graph = sparse.coo_matrix((np.ones(len(d.pair_i)), (d.pair_i, d.pair_j)), shape=(d.n_systems,) * 2)
    parts = int(csgraph.connected_components(graph, directed=False)[0])
    fit = BTFit(tuple(systems), tuple(theta.tolist()), tie, ties, prior, soft, len(d.obs_pair), d.n_items, parts, ok)
    return fit, d


def bradley_terry(outcomes: Iterable[Outcome], systems: Sequence[str] | None = None, *,
                  ties: TieModel = "davidson", soft: bool = True, prior: float = DEFAULT_PRIOR) -> BTFit:
    """Fit Bradley-Terry log-strengths with ties by penalised maximum likelihood.

    Each outcome adds ``w_first log P(first) + w_second log P(second) + w_tie log P(tie)`` (fractional
    weights when ``soft``); the prior term ``prior / 2 * sum(theta ** 2)`` keeps a system that never
    loses finite. Log-strengths are normalised to sum to zero.

    Args:
        outcomes: Judged pairs (see ``pair_outcomes``).
        systems: Systems to fit, in order; default: every system with a usable outcome, sorted.
        ties: ``"davidson"`` (default) or ``"rao-kupper"``.
        soft: Fit the soft probabilities (True) or the one-hot verdicts (False).
        prior: Precision of the Gaussian prior on each log-strength (0: plain maximum likelihood).

    Raises:
        ValueError: Fewer than 2 systems, no usable pair, an unknown tie model or a negative prior.
    """
    return _fit(list(outcomes), systems, ties, soft, prior)[0]


@dataclass(frozen=True)
class BTBootstrap:
    """Percentile intervals over ``samples`` item resamples around the full-data ``fit``.

    ``strength_ci`` and ``rank_ci`` (best, worst) follow ``fit.systems``; ``unconverged`` counts
    replicates whose optimiser did not report success (they are still used).
    """

    fit: BTFit
    samples: int
    seed: int
    level: float
    strength_ci: tuple[tuple[float, float], ...]
    rank_ci: tuple[tuple[int, int], ...]
    tie_ci: tuple[float, float]
    unconverged: int


def bootstrap_bt(outcomes: Iterable[Outcome], systems: Sequence[str] | None = None, *,
                 ties: TieModel = "davidson", soft: bool = True, prior: float = DEFAULT_PRIOR,
                 samples: int = 200, seed: int = 0, level: float = 0.95) -> BTBootstrap:
    """Fit Bradley-Terry and bootstrap it over questions.

    Each replicate draws as many item ids as there are, with replacement, from
    ``numpy.random.default_rng(seed)`` and refits, warm-started from the full-data solution. Ranks
    are 1 for the strongest; intervals are percentiles at ``(1 - level) / 2`` and ``(1 + level) / 2``.

    Args:
        outcomes: Judged pairs.
        systems: Systems to fit; ``ties``, ``soft``, ``prior``: as for ``bradley_terry``.
        samples: Number of replicates (>= 1).
        seed: Seed of the resampling.
        level: Interval coverage, in (0, 1).

    Raises:
        ValueError: As ``bradley_terry``, or for ``samples < 1`` or a level outside (0, 1).
    """
    if samples < 1 or not 0 < level < 1:
        raise ValueError(f"need samples >= 1 and 0 < level < 1, got samples={samples}, level={level}")
    fit, d = _fit(list(outcomes), systems, ties, soft, prior)
    rng = np.random.default_rng(seed)
    x0 = np.append(fit.strengths[:-1], math.log(max(fit.tie - (ties != "davidson"), 1e-300)))
    thetas, tie_values, ranks, unconverged = [], [], [], 0
    for _ in range(samples):
        counts = np.bincount(rng.integers(0, d.n_items, d.n_items), minlength=d.n_items).astype(np.float64)
        theta, tie, ok = _optimise(d, d.totals(counts[d.obs_item]), ties, prior, x0)
        unconverged += not ok
        thetas.append(theta)
        tie_values.append(tie)
        ranks.append(stats.rankdata(-theta, method="min"))
    lo, hi = (1 - level) / 2, (1 + level) / 2
    s_lo, s_hi = np.quantile(thetas, [lo, hi], axis=0)
    r_lo, r_hi = np.quantile(ranks, lo, axis=0, method="lower"), np.quantile(ranks, hi, axis=0, method="higher")
    tie_lo, tie_hi = np.quantile(tie_values, [lo, hi])
    return BTBootstrap(fit, samples, seed, level, tuple(zip(s_lo.tolist(), s_hi.tolist())),
                       tuple(zip(r_lo.astype(int).tolist(), r_hi.astype(int).tolist())),
                       (float(tie_lo), float(tie_hi)), unconverged)
