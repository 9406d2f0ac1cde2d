"""The plots of the audit report: score histograms, conflict ratio, non-transitivity, position bias, ranking.

Each is a matplotlib figure (:func:`~trustjudge.report._html._figure`) that the report embeds as inline SVG
under the ids of :data:`trustjudge.report._report.PLOT_IDS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..audit._audit import AuditReport
from ..audit._stats import dedupe_scores
from ..engine._scoring import AGGREGATIONS, SCORE_METHODS
from ._html import _color, _figure, _fmt, _grouped_bars, _no_data, _num, _ordered, _short, _yerr

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Record = Mapping[str, Any]


def _bin_edges(scale: int, low: float, high: float) -> list[float]:
    """Histogram edges centred on the scale's labels (and on quarter/half steps on small scales)."""
    width = 0.25 if scale <= 5 else 0.5 if scale <= 10 else float(max(1, round(scale / 20)))
    first = math.floor((min(1.0, low) - 1) / width)  # geval can fall below 1 (lost label mass)
    last = math.ceil((max(float(scale), high) - 1) / width)
    return [1 + width * (k - 0.5) for k in range(first, last + 2)]


def _plot_scores(score_records: Mapping[int, Sequence[Record]]) -> Figure:
    scales = sorted(score_records)
    by_scale = {s: list(dedupe_scores(score_records[s])) for s in scales}
    methods = _ordered((m for recs in by_scale.values() for r in recs for m, v in (r.get("scores") or {}).items()
                        if v is not None), SCORE_METHODS) or list(SCORE_METHODS)
    fig = _figure(2.3 * len(methods) + 0.6, 2.0 * max(1, len(scales)) + 0.7)
    axes = fig.subplots(max(1, len(scales)), len(methods), squeeze=False)
    fig.suptitle("Score distributions per scoring method and scale")
    if not scales:
        for ax in axes[0]:
            _no_data(ax, "no score records")
            ax.set_xlabel("score")
            ax.set_ylabel("responses")
    for row, scale in zip(axes, scales):
        records = by_scale[scale]
        unscored = sum(1 for r in records if r.get("unscored") is not None)
        for col, (ax, method) in enumerate(zip(row, methods)):
            values = [v for r in records if r.get("unscored") is None
                      and (v := _num((r.get("scores") or {}).get(method))) is not None]
            ax.set_title(f"{scale}-point · {method}")
            ax.set_xlabel(f"score (1-{scale})")
            ax.set_ylabel("responses" if col == 0 else "")
            if not values:
                _no_data(ax, "no scores")
                continue
            edges = _bin_edges(scale, min(values), max(values))
            counts, _, _ = ax.hist(values, bins=edges, color=_color(method, col), edgecolor="white", linewidth=0.5)
            mean = sum(values) / len(values)
            ax.axvline(mean, color="#222222", linestyle="--", linewidth=0.9)
            note = f"mean {mean:.2f}, n={len(values)}" + (f", {unscored} unscored" if unscored else "")
            ax.text(0.98, 0.98, note, ha="right", va="top", transform=ax.transAxes, fontsize=7,
                    bbox={"boxstyle": "square,pad=0.15", "facecolor": "white", "edgecolor": "none"})
            ax.set_ylim(0, max(1.0, float(max(counts))) * 1.3)  # headroom: the note never covers a bar
            ax.set_xlim(edges[0], edges[-1])
            ax.yaxis.grid(True)
            ax.yaxis.get_major_locator().set_params(integer=True)
    return fig


def _plot_conflict(report: AuditReport) -> Figure:
    scales = sorted({scale for scale, _, _ in report.conflict})
    fig = _figure(max(6.0, 4.4 * max(1, len(scales)) + 0.4), 3.5)
    axes = fig.subplots(1, max(1, len(scales)), squeeze=False, sharey=True)[0]
    fig.suptitle("Conflict ratio: pointwise scores vs pairwise verdicts (95% CI, lower is better)")
    if not scales:
        _no_data(axes[0], "no scored pairs")
        axes[0].set_xlabel("scoring method")
        axes[0].set_ylabel("conflict ratio (CR)")
        return fig
    aggs = _ordered((a for _, _, a in report.conflict), AGGREGATIONS)
    for ax, scale in zip(axes, scales):
        methods = _ordered((m for s, m, _ in report.conflict if s == scale), SCORE_METHODS)
        series = []
        for i, agg in enumerate(aggs):
            results = [report.conflict.get((scale, m, agg)) for m in methods]
            values = [None if r is None else _num(r.ratio) for r in results]
            cis = [(None, None) if r is None else (_num(r.ci[0]), _num(r.ci[1])) for r in results]
            series.append((agg, _color(agg, i), values, cis, None))
        _grouped_bars(ax, methods, series)
        ax.set_title(f"{scale}-point scale")
        ax.set_xlabel("scoring method")
        ax.set_ylim(0, 1.05)
    axes[0].set_ylabel("conflict ratio (CR)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="aggregation", loc="outside right center", frameon=False)
    return fig


def _plot_ntr(report: AuditReport) -> Figure:
    fig = _figure(7.5, 3.4)
    ax = fig.subplots()
    ax.set_title("Non-transitivity NTR_k and verdict tie rate by aggregation (95% CI, lower NTR is better)")
    ax.set_xlabel("aggregation")
    ax.set_ylabel("rate")
    if not report.ntr:
        _no_data(ax, "no pairs judged")
        return fig
    aggs = _ordered((a for a, _ in report.ntr), AGGREGATIONS)
    ks = sorted({k for _, k in report.ntr})
    blues = ("#9ecae1", "#4292c6", "#08519c", "#08306b", "#041a3d")
    series: list[Any] = []
    for i, k in enumerate(ks):
        results = [report.ntr.get((a, k)) for a in aggs]
        series.append((f"NTR_{k}", blues[min(i, len(blues) - 1)],
                       [None if r is None else _num(r.ratio) for r in results],
                       [(None, None) if r is None else (_num(r.ci[0]), _num(r.ci[1])) for r in results], None))
    ties = []
    for a in aggs:
        first = next((r for (agg, _), r in report.ntr.items() if agg == a), None)
        ties.append(None if first is None else _num(first.tie_rate))
    series.append(("tie rate", "#E69F00", ties, None, "//"))
    _grouped_bars(ax, aggs, series)
    ax.set_ylim(0, 1.05)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return fig


def _plot_position(report: AuditReport) -> Figure:
    fig = _figure(6.5, 3.3)
    ax = fig.subplots()
    swap = report.swap
    ax.set_title(f"Position bias per presentation order (swap flip rate {_fmt(swap.rate, 2)} "
                 f"over {swap.pairs} pairs)")
    ax.set_xlabel("presentation order")
    ax.set_ylabel("share of judgments")
    orders = (report.position.order1, report.position.order2, report.position.overall)
    if not any(o.judged for o in orders):
        _no_data(ax, "no pairs judged")
        return fig
    groups = [f"{o.order}\n(n={o.judged})" for o in orders]
    series: list[Any] = [
        ("first shown wins (A)", "#0072B2", [_num(o.first_shown_rate) for o in orders], None, None),
        ("tie (C)", "#E69F00", [_num(o.tie_rate) for o in orders], None, "//"),
    ]
    _grouped_bars(ax, groups, series)
    for container in ax.containers:
        ax.bar_label(container, fmt="%.2f", fontsize=7, padding=1)  # type: ignore[arg-type]
    ax.set_ylim(0, 1.1)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return fig


@dataclass(frozen=True)
class _System:
    name: str
    strength: float | None
    low: float | None
    high: float | None
    raw: Mapping[str, Any]


def _systems(ranking: Mapping[str, Any]) -> list[_System]:
    """Read a ranking dict leniently: ``strength``, else the primary Bradley-Terry fit, else the other one."""
    primary = ranking.get("primary")
    keys = ("strength", "bt_soft", "bt_hard") if primary != "hard" else ("strength", "bt_hard", "bt_soft")
    out = []
    for i, s in enumerate(ranking.get("systems") or []):
        if not isinstance(s, Mapping):
            continue
        strength = next((v for k in keys if (v := _num(s.get(k))) is not None), None)
        out.append(_System(str(s.get("system", f"system {i + 1}")), strength, _num(s.get("ci_low")),
                           _num(s.get("ci_high")), s))
    return out


def _strength_label(ranking: Mapping[str, Any]) -> str:
    primary = ranking.get("primary")
    if primary in ("soft", "hard"):
        return f"Bradley-Terry log-strength ({primary})"
    return "strength"


def _plot_ranking(ranking: Mapping[str, Any]) -> Figure:
    systems = [s for s in _systems(ranking) if s.strength is not None]
    fig = _figure(7.0, max(2.2, 0.34 * len(systems) + 1.3))
    ax = fig.subplots()
    ax.set_title("System ranking with 95% intervals (best at the top)")
    ax.set_xlabel(_strength_label(ranking))
    ax.set_ylabel("system")
    if not systems:
        _no_data(ax, "no system strengths")
        return fig
    ys = list(range(len(systems)))[::-1]
    values = [float(s.strength or 0.0) for s in systems]
    cis = [(s.low, s.high) for s in systems]
    err = _yerr(values, cis)
    ax.errorbar(values, ys, xerr=err, fmt="o", color="#0072B2", ecolor="#555555", elinewidth=1.2, capsize=3,
                markersize=5)
    ends = [v for s in systems for v in (s.low, s.high, s.strength) if v is not None]
    if min(ends) <= 0 <= max(ends):  # log-strengths centre on 0; other scales need not include it
        ax.axvline(0, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_yticks(ys, [_short(s.name, 40) for s in systems])
    ax.xaxis.grid(True)
    ax.set_ylim(-0.7, len(systems) - 0.3)
    return fig
