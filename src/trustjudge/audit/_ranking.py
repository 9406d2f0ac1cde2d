"""Rank systems from stored judgments: Bradley-Terry with ties, Elo, win rates and mean scores.

Pure maths over the compare and score records the CLI writes (plain dicts). What is ranked is the
*system* behind each response; records without one, and unscored records, are skipped and counted.
A record whose ``(item_id, pair)`` repeats replaces the earlier one (the newest line wins).

Bradley-Terry: log-strengths theta normalised to sum to zero (the optimiser moves K-1 of them, the
last is minus their sum), fitted by L-BFGS-B with an analytic gradient. A Gaussian prior
``prior / 2 * sum(theta ** 2)`` (default 0.01, i.e. N(0, 10^2) per log-strength) keeps a system that
never loses finite and is negligible next to hundreds of comparisons. Ties follow Davidson (default:
``P(i>j) = pi_i / (pi_i + pi_j + nu sqrt(pi_i pi_j))``) or Rao-Kupper (``P(i>j) = pi_i / (pi_i +
theta pi_j)``, theta >= 1); the tie parameter is fitted on a log scale within [1e-8, 1e8] (``nu``, or
``theta - 1``), so data with no ties or only ties stays finite. Soft outcomes weight a pair by its
likelihood probabilities (p_first, p_second, p_tie); hard outcomes are one-hot verdicts.
Intervals are percentile bootstraps over items (questions drawn with replacement, their pairs moving
together) from ``numpy.random.default_rng(seed)``, each refit warm-started from the full-data fit.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, sparse, stats  # type: ignore[import-untyped, unused-ignore]
from scipy.sparse import csgraph  # type: ignore[import-untyped, unused-ignore]

from ..engine._scoring import AGGREGATIONS, SCORE_METHODS

Record = Mapping[str, Any]
Floats = NDArray[np.float64]
Ints = NDArray[np.intp]
TieModel = Literal["davidson", "rao-kupper"]
Verdict = Literal["first", "second", "tie"]
Weights = tuple[float, float, float]
Row = tuple[int, str, float, float, float, float, float, float, int, float]

NAN = float("nan")
DEFAULT_PRIOR = 0.01
TIE_MODELS: tuple[TieModel, ...] = ("davidson", "rao-kupper")
RANKINGS = ("bt_soft", "bt_hard", "elo", "win_rate", "mean_score")
_ETA_BOUNDS = (math.log(1e-8), math.log(1e8))
_ONE_HOT: dict[str, Weights] = {"first": (1.0, 0.0, 0.0), "second": (0.0, 1.0, 0.0), "tie": (0.0, 0.0, 1.0)}


@dataclass(frozen=True)
class Outcome:
    """One judged pair between the systems ``first`` (shown first) and ``second`` on ``item_id``.

    ``probabilities`` are the soft ``(first, second, tie)`` probabilities (summing to 1) and
    ``verdict`` the hard verdict of one aggregation method; either may be None.
    """

    item_id: str
    first: str
    second: str
    probabilities: Weights | None = None
    verdict: Verdict | None = None

    def weights(self, soft: bool) -> Weights | None:
        """Return the ``(first, second, tie)`` weights: the probabilities, or the one-hot verdict."""
        return self.probabilities if soft else None if self.verdict is None else _ONE_HOT[self.verdict]


def _probabilities(raw: Any) -> Weights | None:
    if not isinstance(raw, Mapping) or any(raw.get(k) is None for k in ("first", "second", "tie")):
        return None
    p = np.array([float(raw["first"]), float(raw["second"]), float(raw["tie"])])
    if not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
        return None
    p /= p.sum()
    return float(p[0]), float(p[1]), float(p[2])


def pair_outcomes(compare_records: Iterable[Record], *,
                  method: str = "likelihood") -> tuple[list[Outcome], dict[str, int]]:
    """Turn compare records into outcomes between systems.

    Args:
        compare_records: Compare records; a repeated ``(item_id, pair)`` keeps the newest.
        method: Aggregation whose verdict becomes ``Outcome.verdict``.

    Returns:
        The outcomes, and skipped records counted by reason: ``unscored``, ``no_system``,
        ``same_system`` (says nothing about strengths) and ``no_outcome`` (nothing to count).

    Raises:
        ValueError: If ``method`` is not an aggregation method.
    """
    if method not in AGGREGATIONS:
        raise ValueError(f"unknown verdict method {method!r}; choose one of {', '.join(AGGREGATIONS)}")
    latest = {(str(r["item_id"]), *sorted((str(r["first_id"]), str(r["second_id"])))): r for r in compare_records}
    skipped = {"unscored": 0, "no_system": 0, "same_system": 0, "no_outcome": 0}
    outcomes: list[Outcome] = []
    for r in latest.values():
        first, second = r.get("first_system"), r.get("second_system")
        verdict = (r.get("verdicts") or {}).get(method)
        verdict = verdict if verdict in _ONE_HOT else None
        probabilities = _probabilities(r.get("probabilities"))
        reason = ("unscored" if r.get("unscored") else "no_system" if first is None or second is None
                  else "same_system" if str(first) == str(second)
                  else "no_outcome" if probabilities is None and verdict is None else None)
        if reason:
            skipped[reason] += 1
        else:
            outcomes.append(Outcome(str(r["item_id"]), str(first), str(second), probabilities, verdict))
    return outcomes, skipped


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


def _games(outcomes: Iterable[Outcome], soft: bool) -> list[tuple[str, str, Weights]]:
    return [(o.first, o.second, w) for o in outcomes if (w := o.weights(soft)) is not None]


def elo(outcomes: Iterable[Outcome], *, soft: bool = False, k: float = 4.0, base: float = 1000.0,
        scale: float = 400.0, rounds: int = 100, seed: int = 0) -> dict[str, float]:
    """Elo ratings, averaged over random orders of the games.

    Sequential Elo depends on the order of the games, and judged pairs have none, so the games are
    replayed in ``rounds`` random permutations (``numpy.random.default_rng(seed)``), each starting
    all systems at ``base``, and the final ratings are averaged. A game scores 1 for a win, 0 for a
    loss and 0.5 for a tie (with ``soft``: p_first + p_tie / 2).

    Args:
        outcomes: Judged pairs.
        soft: Score games from probabilities (True) or verdicts (False, default).
        k: Update step; ``base``: starting rating; ``scale``: rating gap for 10:1 odds.
        rounds: Number of permutations (>= 1).
        seed: Seed of the permutations.

    Returns:
        Mean rating per system with at least one game.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    games = _games(outcomes, soft)
    systems = sorted({g[0] for g in games} | {g[1] for g in games})
    index = {s: i for i, s in enumerate(systems)}
    first = np.array([index[g[0]] for g in games], dtype=np.intp)
    second = np.array([index[g[1]] for g in games], dtype=np.intp)
    score = np.array([g[2][0] + g[2][2] / 2 for g in games])
    rng = np.random.default_rng(seed)
    order = np.array([rng.permutation(len(games)) for _ in range(rounds)], dtype=np.intp).reshape(rounds, -1)
    ratings, rows = np.full((rounds, len(systems)), float(base)), np.arange(rounds)
    for step in range(len(games)):  # all permutations advance together: row r plays game order[r, step]
        g = order[:, step]
        i, j = first[g], second[g]
        delta = k * (score[g] - 1 / (1 + 10 ** ((ratings[rows, j] - ratings[rows, i]) / scale)))
        ratings[rows, i] += delta
        ratings[rows, j] -= delta
    return dict(zip(systems, ratings.mean(axis=0).tolist()))


@dataclass(frozen=True)
class WinRecord:
    """Games of one system; ``rate = (wins + ties / 2) / games`` (counts are fractional when soft)."""

    wins: float
    losses: float
    ties: float
    games: int
    rate: float


def win_rates(outcomes: Iterable[Outcome], *, soft: bool = False) -> dict[str, WinRecord]:
    """Return each system's wins, losses, ties, games and win rate (a tie counts half).

    Args:
        outcomes: Judged pairs.
        soft: Count probabilities as fractional results (True) or verdicts (False, default).
    """
    tally: dict[str, Floats] = defaultdict(lambda: np.zeros(4))
    for a, b, (w1, w2, wt) in _games(outcomes, soft):
        tally[a] += (w1, w2, wt, 1)
        tally[b] += (w2, w1, wt, 1)
    return {s: WinRecord(float(w), float(lost), float(tie), int(n), float((w + tie / 2) / n))
            for s, (w, lost, tie, n) in sorted(tally.items())}


@dataclass(frozen=True)
class MeanScores:
    """Per system, the mean over ``items`` of its mean ``method`` score within each item, at ``scale``.

    ``common`` says whether the items are those every system was scored on; ``skipped`` counts the
    records of that scale left out (``unscored``, ``no_system``, ``no_score``).
    """

    means: dict[str, float]
    method: str
    scale: int | None
    items: int
    common: bool
    skipped: dict[str, int]


def mean_scores(score_records: Iterable[Record], *, method: str = "trustjudge", scale: int | None = None,
                systems: Sequence[str] | None = None) -> MeanScores:
    """Average each system's pointwise scores per item, then over items.

    Each item weighs the same, whatever the number of responses a system has in it. Where possible
    the average runs over the items every scored system was scored on, so all face the same
    questions; if no item is common to all, each system's own items are used.

    Args:
        score_records: Score records; a repeated ``(item_id, response_id, scale)`` keeps the newest.
        method: Score method (``discrete``, ``geval``, ``expected``, ``trustjudge``).
        scale: Scale to use; default: the largest scale present.
        systems: Systems to report; default: every system with a score.

    Raises:
        ValueError: If ``method`` is not a score method.
    """
    if method not in SCORE_METHODS:
        raise ValueError(f"unknown score method {method!r}; choose one of {', '.join(SCORE_METHODS)}")
    records = list({(str(r["item_id"]), str(r["response_id"]), r.get("scale")): r for r in score_records}.values())
    if scale is None:
        scale = max((int(r["scale"]) for r in records if r.get("scale") is not None), default=None)
    skipped = {"unscored": 0, "no_system": 0, "no_score": 0}
    per_item: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in (r for r in records if scale is None or r.get("scale") == scale):
        raw = (r.get("scores") or {}).get(method)
        value = None if raw is None or not math.isfinite(float(raw)) else float(raw)
        reason = ("unscored" if r.get("unscored") else "no_system" if r.get("system") is None
                  else "no_score" if value is None else None)
        if reason:
            skipped[reason] += 1
        elif value is not None:
            per_item[str(r["system"])][str(r["item_id"])].append(float(value))
    names = sorted(per_item) if systems is None else list(systems)
    scored = [set(per_item[s]) for s in names if s in per_item]
    common: set[str] = set.intersection(*scored) if scored else set()
    # Sorted item ids: iterating a set of strings follows the per-process hash seed, which would move
    # the last bits of a mean from one run to the next.
    means = {s: float(np.mean([np.mean(per_item[s][i]) for i in sorted(common or per_item[s])])) if s in per_item
             else NAN for s in names}
    return MeanScores(means, method, scale, len(common or set().union(*scored)), bool(common), skipped)


@dataclass(frozen=True)
class SystemRank:
    """One system's row (nan where a measure is unavailable); ``rank`` 1 is best by the primary fit.

    ``ci_low``/``ci_high`` and ``rank_best``/``rank_worst`` are bootstrap intervals of the primary
    strength and of the rank (ranks 0 without a bootstrap); ``games`` counts the pairs played.
    """

    system: str
    rank: int
    bt_soft: float
    bt_hard: float
    ci_low: float
    ci_high: float
    rank_best: int
    rank_worst: int
    elo: float
    win_rate: float
    games: int
    mean_score: float


@dataclass(frozen=True)
class Agreement:
    """Kendall tau-b between two rankings over the ``n`` systems both rank; nan if undefined."""

    first: str
    second: str
    tau: float
    p_value: float
    n: int


@dataclass(frozen=True)
class Ranking:
    """Systems ranked by Bradley-Terry (soft, hard), Elo, win rate and mean score, best first.

    ``primary`` names the fit that orders the rows and carries the intervals: ``"soft"`` (likelihood
    probabilities) whenever some pair has them, else ``"hard"`` (verdicts of ``method``). ``nu`` and
    ``nu_hard`` are the tie parameters of the two fits (Davidson nu, or Rao-Kupper theta). Elo and
    win rates count verdicts (probabilities if no pair has a verdict).
    """

    COLUMNS: ClassVar[tuple[str, ...]] = ("rank", "system", "bt_soft", "ci_low", "ci_high", "bt_hard", "elo",
                                          "win_rate", "games", "mean_score")

    systems: tuple[SystemRank, ...]
    primary: Literal["soft", "hard"]
    method: str
    ties: TieModel
    nu: float
    nu_hard: float
    prior: float
    bootstrap: int
    seed: int
    score_method: str
    score_scale: int | None
    agreements: tuple[Agreement, ...]
    pairs_soft: int
    pairs_hard: int
    items: int
    components: int
    converged: bool
    skipped: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict (nan becomes None)."""
        return {k: _clean(v) for k, v in asdict(self).items()}

    def rows(self) -> list[Row]:
        """Return one row per system in ``COLUMNS`` order, sorted by the primary strength, best first."""
        return [(s.rank, s.system, s.bt_soft, s.ci_low, s.ci_high, s.bt_hard, s.elo, s.win_rate, s.games,
                 s.mean_score) for s in self.systems]


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    return [_clean(v) for v in value] if isinstance(value, (list, tuple)) else value


def _agreement(a: str, b: str, x: Mapping[str, float], y: Mapping[str, float]) -> Agreement:
    both = [s for s in x if s in y and math.isfinite(x[s]) and math.isfinite(y[s])]
    if len(both) < 2:
        return Agreement(a, b, NAN, NAN, len(both))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant ranking gives nan, which is the right answer
        res = stats.kendalltau([x[s] for s in both], [y[s] for s in both])
    return Agreement(a, b, float(res.statistic), float(res.pvalue), len(both))


def rank(compare_records: Iterable[Record], score_records: Iterable[Record] | None = None, *,
         method: str = "likelihood", bootstrap: int = 200, seed: int = 0, score_method: str = "trustjudge",
         score_scale: int | None = None, ties: TieModel = "davidson", prior: float = DEFAULT_PRIOR,
         elo_rounds: int = 100) -> Ranking:
    """Rank systems by Bradley-Terry (soft and hard), Elo, win rate and mean score.

    Args:
        compare_records: Compare records (systems in ``first_system``/``second_system``).
        score_records: Score records, for the mean-score ranking (optional).
        method: Aggregation whose verdicts give the hard fit, Elo and win rates.
        bootstrap: Replicates over items for the intervals of the primary fit (0: none).
        seed: Seed of the bootstrap and of the Elo orders.
        score_method: Score method for the mean-score ranking.
        score_scale: Scale for the mean-score ranking; default: the largest present.
        ties: Tie model of the Bradley-Terry fits.
        prior: Prior precision on log-strengths.
        elo_rounds: Random game orders averaged for Elo.

    Raises:
        ValueError: Fewer than 2 systems, or no scored pair between two systems.
    """
    records = list(compare_records)
    outcomes, skipped = pair_outcomes(records, method=method)
    seen = {str(r[k]) for r in records if not r.get("unscored") for k in ("first_system", "second_system")
            if r.get(k) is not None}
    if len(seen) < 2:
        raise ValueError(f"ranking needs at least 2 systems, found {len(seen)} {sorted(seen)} (skipped: {skipped})")
    if not outcomes:
        raise ValueError(f"no scored pairs between two systems to rank (skipped: {skipped})")
    fits = {soft: bradley_terry(outcomes, ties=ties, soft=soft, prior=prior) for soft in (True, False)
            if len({s for o in outcomes if o.weights(soft) is not None for s in (o.first, o.second)}) > 1}
    soft_primary = True in fits
    boot = (bootstrap_bt(outcomes, fits[soft_primary].systems, ties=ties, soft=soft_primary, prior=prior,
                         samples=bootstrap, seed=seed) if bootstrap > 0 else None)
    count_soft = all(o.verdict is None for o in outcomes)
    wins = win_rates(outcomes, soft=count_soft)
    names = sorted(wins)
    scores = (mean_scores(score_records, method=score_method, scale=score_scale, systems=names)
              if score_records is not None else None)
    measures = {"bt_soft": dict(zip(fits[True].systems, fits[True].strengths)) if True in fits else {},
                "bt_hard": dict(zip(fits[False].systems, fits[False].strengths)) if False in fits else {},
                "elo": elo(outcomes, soft=count_soft, rounds=elo_rounds, seed=seed),
                "win_rate": {s: w.rate for s, w in wins.items()},
                "mean_score": scores.means if scores is not None else {}}
    primary = measures["bt_soft" if soft_primary else "bt_hard"]
    lines = []
    for position, s in enumerate(sorted(names, key=lambda s: (-primary.get(s, -math.inf), s)), start=1):
        ci, rank_ci = (NAN, NAN), (0, 0)
        if boot is not None and s in boot.fit.systems:
            ci, rank_ci = boot.strength_ci[boot.fit.systems.index(s)], boot.rank_ci[boot.fit.systems.index(s)]
        m = {name: values.get(s, NAN) for name, values in measures.items()}
        lines.append(SystemRank(s, position, m["bt_soft"], m["bt_hard"], *ci, *rank_ci, m["elo"], m["win_rate"],
                                wins[s].games, m["mean_score"]))
    score_skips = {f"score_{k}": v for k, v in scores.skipped.items()} if scores is not None else {}
    return Ranking(
        systems=tuple(lines), primary="soft" if soft_primary else "hard", method=method, ties=ties,
        nu=fits[True].tie if True in fits else NAN, nu_hard=fits[False].tie if False in fits else NAN,
        prior=prior, bootstrap=bootstrap, seed=seed, score_method=score_method,
        score_scale=scores.scale if scores is not None else score_scale,
        agreements=tuple(_agreement(a, b, measures[a], measures[b]) for a, b in combinations(RANKINGS, 2)),
        pairs_soft=fits[True].outcomes if True in fits else 0, pairs_hard=fits[False].outcomes if False in fits else 0,
        items=len({o.item_id for o in outcomes}), components=fits[soft_primary].components,
        converged=all(f.converged for f in fits.values()), skipped={**skipped, **score_skips})
