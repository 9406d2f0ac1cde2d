"""The built-in modes' summaries (``Mode(summary_metrics=...)``): the headline values ``trustjudge summary`` reads
from each mode's records, declared through the contract a plug-in mode uses (issue 37).

Each mode is recognised from its record's fields; the recognisers are mutually exclusive (a pair record holds
``first_id``; a per-response record is a score's if it holds ``scores``, else a checklist's if ``checks``, else
claims' if ``claims``, else criteria's if ``criteria`` and ``aggregate``), so the order they are asked in never
matters. Records marked ``unscored`` count as unscored before any metric here is read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..audit._stats import finite
from ..audit._summary import Record, SummaryMetrics, Weights, soft_weights

__all__ = ["CHECKLIST_SUMMARY", "CLAIMS_SUMMARY", "COMPARE_SUMMARY", "CRITERIA_COMPARE_SUMMARY", "CRITERIA_SUMMARY",
           "SCORE_SUMMARY", "claims_ranked"]

_SCORE_METHODS = ("expected", "trustjudge", "geval", "discrete")
_HARD: Mapping[str, Weights] = {"first": (1.0, 0.0, 0.0), "second": (0.0, 1.0, 0.0), "tie": (0.0, 0.0, 1.0)}


def _lacks(record: Record, *keys: str) -> bool:
    return not any(k in record for k in keys)


def _in(block: str, key: str) -> Callable[[Record], float | None]:
    """``record[block][key]`` as a finite number (``None``: missing)."""
    return lambda r: finite((r.get(block) or {}).get(key))


def _field(key: str) -> Callable[[Record], float | None]:
    return lambda r: finite(r.get(key))


SCORE_SUMMARY = SummaryMetrics(
    {m: _in("scores", m) for m in _SCORE_METHODS},
    recognise=lambda r: "scores" in r and "first_id" not in r)
"""score: the mean of ``scores[method]`` (default ``expected``, the mean of the judge's label distribution)."""

CHECKLIST_SUMMARY = SummaryMetrics(
    {"satisfaction": _field("satisfaction"), "p_all": _field("p_all")},
    recognise=lambda r: "checks" in r and _lacks(r, "first_id", "scores"))
"""checklist: the mean ``satisfaction`` (expected weighted satisfaction), or ``p_all``."""

CLAIMS_SUMMARY = SummaryMetrics(
    {"precision": _field("precision"),
     "f1": lambda r: finite(((r.get("matching") or {}).get("hungarian") or {}).get("expected_f1")),
     "recall": lambda r: finite((r.get("matching") or {}).get("expected_recall")),
     "f1_at_k": _in("f1_at_k", "f1")},
    recognise=lambda r: "claims" in r and _lacks(r, "first_id", "scores", "checks"),
    default=lambda rows: "f1" if any(r.get("matching") for r in rows) else "precision")
"""claims: the mean expected ``precision``; with matching, ``f1`` (the one-to-one assignment's expected F1) is the
default; ``recall`` (expected recall) and ``f1_at_k`` (``f1_at_k.f1``) can be asked."""


def claims_ranked(items: Sequence[Any], scale: int | str) -> dict[str, Any]:
    """``rank --mode claims`` (``Mode.rank_options``): matching where any item has gold claims or a reference."""
    return {"match": any(it.gold_claims is not None or it.reference for it in items)}


CRITERIA_SUMMARY = SummaryMetrics(
    {m: _in("aggregate", m) for m in _SCORE_METHODS},
    recognise=lambda r: "criteria" in r and "aggregate" in r and _lacks(r, "first_id", "scores", "checks", "claims"))
"""criteria: the mean of ``aggregate[method]`` (default ``expected``, the weighted aggregate)."""


PairMetrics = Mapping[str, Callable[[Record, str], Weights | None]]


def _pairs(soft_key: str, hard: Callable[[Record, str], object]) -> PairMetrics:
    return {"win_rate": lambda r, method: soft_weights(r.get(soft_key)),
            "verdict": lambda r, method: _HARD.get(str(hard(r, method)))}


COMPARE_SUMMARY = SummaryMetrics(
    pairs=_pairs("probabilities", lambda r, method: (r.get("verdicts") or {}).get(method)),
    recognise=lambda r: "first_id" in r and "verdicts" in r and "criteria" not in r)
"""compare: the ``win_rate`` (P(win) + P(tie) / 2 under the soft probabilities), or the hard ``verdict`` of an
aggregation method (default ``likelihood``)."""

CRITERIA_COMPARE_SUMMARY = SummaryMetrics(
    pairs=_pairs("aggregate", lambda r, method: r.get("verdict")),
    recognise=lambda r: "first_id" in r and "criteria" in r)
"""criteria-compare: the ``win_rate`` under the weighted aggregate's probabilities, or its hard ``verdict``."""

