"""The metrics of the recipes that judge images: VisPlotBench's (executed code, its plot scored 0-100, the first
attempt that drew) and AutoFigure's pairwise one (two figures per dimension: A, B, both good, both bad)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from ..audit._stats import finite
from ._metrics import UNPARSED, Metric, Record, register_metric

__all__ = ["FIGURE_LABELS", "VISPLOT_READINGS", "VISPLOT_VALUES", "drawn_order"]


# -- VisPlotBench (recipe visplotbench): executed code, its plot scored 0-100, the first attempt that drew ------

VISPLOT_VALUES = ("pass_rate", "plot_score", "good", "bad")


def _visplot(r: Record, p: Mapping[str, Any]) -> float | None:
    """A task's row (its first attempt that drew, ``recipes._execute.attempt_rows``): ``pass_rate`` 1 where an
    attempt executed and drew; ``plot_score`` that attempt's expected 0-100 score (0 where none drew); ``good``
    P(score >= good_at) under its label distribution, ``bad`` P(score <= bad_at) (a task none of whose attempts
    drew: 0 and 1, its score being 0). ``hard``: the argmax score in place of the distribution. ``unparsed_score``
    (>= 0): the score a drawn plot whose judgment was unparsed counts as (the benchmark's ``fillna(0)``), else
    unscored."""
    if "executed" not in r:
        return None
    if p["value"] == "pass_rate":
        return 1.0 if r["executed"] else 0.0
    if not r["executed"]:
        return 1.0 if p["value"] == "bad" else 0.0
    if r.get("judge_unscored"):  # it drew; the judge's reply was not read: unscored, or the benchmark's fill
        if p["unparsed_score"] < 0 or r["judge_unscored"] not in UNPARSED:
            return None
        at = p["unparsed_score"]
        return at if p["value"] == "plot_score" else float(at >= p["good_at"] if p["value"] == "good"
                                                           else at <= p["bad_at"])
    scores = r.get("scores") or {}
    if p["value"] == "plot_score":
        return finite(scores.get("discrete" if p["hard"] else "expected"))
    dist = {float(k): float(v) for k, v in (r.get("distribution") or {}).items()}
    if p["hard"] or not dist:
        top = finite(scores.get("discrete"))
        if top is None:
            return None
        dist = {top: 1.0}
    total = sum(dist.values())
    if not total > 0:
        return None
    if p["value"] == "good":
        return sum(q for v, q in dist.items() if v >= p["good_at"]) / total
    return sum(q for v, q in dist.items() if v <= p["bad_at"]) / total


VISPLOT_READINGS: dict[str, dict[str, Any]] = {
    # the benchmark's (vis_judge.py calculate_stats_by_type): the judge's integer score, a task with no plot 0, an
    # unparsed reply 0 (fillna(0)); mean, and the shares of tasks scored >= 75 and <= 25 (an unparsed one: bad)
    "pass_rate": {"value": "pass_rate"},
    "score (benchmark)": {"value": "plot_score", "hard": True, "unparsed_score": 0.0},
    "good (benchmark)": {"value": "good", "hard": True, "unparsed_score": 0.0},
    "bad (benchmark)": {"value": "bad", "hard": True, "unparsed_score": 0.0},
    # ours: under the judge's label distribution, an unparsed judgment unscored
    "expected score (ours)": {"value": "plot_score", "hard": False},
    "P(>= 75) (ours)": {"value": "good", "hard": False},
    "P(<= 25) (ours)": {"value": "bad", "hard": False},
}
"""The readings ``trustjudge run visplotbench`` prints, the recipe's own (pass_rate) first."""

register_metric(Metric(
    "visplot", ("score",), _visplot,
    {"value": "pass_rate", "hard": False, "good_at": 75.0, "bad_at": 25.0, "unparsed_score": -1.0},
    "VisPlotBench, per task over its attempts (the first that drew): `value` pass_rate (an attempt's code executed "
    "and drew), plot_score (that attempt's 0-100 score; 0 where no attempt drew), good (P(score >= good_at)) or "
    "bad (P(score <= bad_at)) from the judge's label distribution (keep_distribution), or from its argmax with "
    "`hard`; unparsed_score (>= 0): the score an unparsed judgment of a drawn plot counts as (the benchmark: 0).",
    choices={"value": VISPLOT_VALUES}, readings=VISPLOT_READINGS))


# -- FigureBench / AutoFigure (recipe autofigure-pairwise): two figures per dimension, four labels -------------

FIGURE_LABELS = {"first": "A", "second": "B", "both_good": "BOTH_GOOD", "both_bad": "BOTH_BAD"}
FIGURE_ORDERS = ("random", "both")
_SWAPPED = {"A": "B", "B": "A", "BOTH_GOOD": "BOTH_GOOD", "BOTH_BAD": "BOTH_BAD"}


def drawn_order(seed: int, item_id: str, first_id: str, second_id: str) -> int:
    """The presentation order the benchmark's reading takes for a pair: 0 (its first response shown as A, judge.py's
    ``original``) or 1 (``swapped``), drawn with even odds from ``seed`` and the pair's ids (``random.Random`` on
    their joined text: the same draw on every run and machine, whatever the records' order)."""
    return 0 if random.Random(f"{seed}\x00{item_id}\x00{first_id}\x00{second_id}").random() < 0.5 else 1


def _one_order(r: Record, c: Mapping[str, Any], p: Mapping[str, Any]) -> str | None:
    """The label the judge answers in the pair's drawn order (its most probable one there), read as the pair is
    given: A the first response, B the second (a swapped order's A and B exchanged, as judge.py undoes its
    presentation order); ``None`` where that order was not read."""
    orders = c.get("orders")
    k = drawn_order(int(p["order_seed"]), str(r.get("item_id")), str(r.get("first_id")), str(r.get("second_id")))
    if not isinstance(orders, list) or len(orders) != 2 or orders[k].get("unscored") is not None:
        return None
    row = {lab: finite(orders[k].get(lab)) for lab in FIGURE_LABELS.values()}
    if any(q is None for q in row.values()):
        return None
    answer = max(row, key=lambda lab: float(row[lab] or 0.0))
    return _SWAPPED[answer] if k == 1 else answer


def _figure_pair(r: Record, p: Mapping[str, Any]) -> float | None:
    """A pair's probability of the label ``value`` stands for (both orders, mirrored: ``label_probabilities``),
    averaged over its dimensions (``criterion``: one dimension only); with ``hard``, the share of dimensions whose
    most probable label it is. ``order = "random"``: the benchmark's reading, 1 where the judge's answer in the
    pair's one drawn order (:func:`drawn_order`), its presentation undone, is that label."""
    label = FIGURE_LABELS[p["value"]]
    values = []
    for c in r.get("criteria") or []:
        if p["criterion"] and c.get("name") != p["criterion"]:
            continue
        if p["order"] == "random":
            answer = _one_order(r, c, p)
            if answer is not None:
                values.append(1.0 if answer == label else 0.0)
            continue
        probs = c.get("label_probabilities")
        if c.get("unscored") is not None or not isinstance(probs, dict) or label not in probs:
            continue
        q = finite(probs[label])
        if q is None:
            continue
        values.append((1.0 if max(probs, key=lambda k: probs[k]) == label else 0.0) if p["hard"] else q)
    return sum(values) / len(values) if values else None


register_metric(Metric(
    "figure_pairwise", ("criteria-compare",), _figure_pair,
    {"value": "first", "criterion": "", "hard": False, "order": "both", "order_seed": 0},
    "AutoFigure pairwise, per pair of figures: the probability of A (the first figure better), B, both good or both "
    "bad (`value`: first, second, both_good, both_bad), both orders combined with the second mirrored, averaged "
    "over the dimensions (`criterion`: one); `hard`: the share of dimensions whose argmax label it is. `order = "
    "\"random\"`: the benchmark's reading (judge.py), the judge's answer in one presentation order per pair drawn "
    "from `order_seed`, its order undone. Needs criteria-compare with labels A=first,B=second,BOTH_GOOD=tie,"
    "BOTH_BAD=tie.",
    choices={"value": tuple(FIGURE_LABELS), "order": FIGURE_ORDERS},
    readings={**{f"{v} (benchmark: one random order)": {"value": v, "order": "random"} for v in FIGURE_LABELS},
              **{f"{v} (hard, both orders)": {"value": v, "hard": True, "order": "both"} for v in FIGURE_LABELS},
              **{f"{v} (soft, both orders)": {"value": v, "hard": False, "order": "both"} for v in FIGURE_LABELS}}))
