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
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any, ClassVar, Literal

from scipy import stats  # type: ignore[import-untyped, unused-ignore]

from ._bradley_terry import BTBootstrap, BTFit, bootstrap_bt, bradley_terry
from ._bradley_terry import _design as _design
from ._bradley_terry import _nll as _nll
from ._outcomes import (
    DEFAULT_PRIOR,
    NAN,
    RANKINGS,
    TIE_MODELS,
    Outcome,
    Record,
    Row,
    TieModel,
    pair_outcomes,
)
from ._ratings import MeanScores, WinRecord, elo, mean_scores, win_rates

__all__ = ["DEFAULT_PRIOR", "RANKINGS", "TIE_MODELS", "Agreement", "BTBootstrap", "BTFit", "MeanScores", "Outcome",
           "Ranking", "SystemRank", "WinRecord", "bootstrap_bt", "bradley_terry", "elo", "mean_scores",
           "pair_outcomes", "rank", "win_rates"]


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
        """Return a JSON-serialisable dict (nan becomes None), with :meth:`basis`."""
        return {**{k: _clean(v) for k, v in asdict(self).items()}, "basis": self.basis()}

    def basis(self) -> str:
        """What each ranking ranks on: two rankings of the same data agree only where they say the same."""
        scores = (f"the mean {self.score_method} score on the {self.score_scale}-point scale"
                  if self.score_scale is not None else "no scores")
        return (f"bt_soft: the pairs' {self.method} probabilities; bt_hard, elo, win_rate: their {self.method} "
                f"verdicts; mean_score: {scores}")

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
