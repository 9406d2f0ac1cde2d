"""Judged pairs as outcomes between systems: the types the ranking modules share, and :func:`pair_outcomes`.

What is ranked is the *system* behind each response; records without one, and unscored records, are skipped
and counted. A record whose ``(item_id, pair)`` repeats replaces the earlier one (the newest line wins).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ..engine._scoring import AGGREGATIONS

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
