"""Elo, win rates and mean pointwise scores per system (the rankings beside Bradley-Terry)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..engine._scoring import SCORE_METHODS
from ._outcomes import (
    NAN,
    Floats,
    Outcome,
    Record,
    Weights,
)


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
