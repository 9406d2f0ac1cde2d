"""A self-contained HTML report of an audit run: metadata, plots, the audit table, per-question conflicts.

:func:`render_report` returns ONE HTML string that needs no network to view: the CSS is inline, every
plot is an inline SVG drawn by matplotlib (object API on an Agg canvas, never pyplot, so no display and
no global backend change), and a Content-Security-Policy forbids every load and every script. All user
text (item ids, systems, questions, responses, the data path, the judge name) is HTML-escaped; in plots
mathtext is off, so a ``$`` in a system name is printed as is.

Each plot is a ``<figure class="plot" id="plot-...">`` holding one ``<svg>``: ``plot-scores`` (score
histograms per scale and scoring method), ``plot-conflict`` (conflict ratio by scoring method x
aggregation), ``plot-ntr`` (NTR_k and tie rate by aggregation), ``plot-position`` (position bias per
order) and, when a ranking is given, ``plot-ranking`` (strengths with intervals).
"""

from __future__ import annotations

import html
import io
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..audit._audit import AuditReport, _dedupe_pairs, _dedupe_scores
from ..engine._scoring import AGGREGATIONS, SCORE_METHODS

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ..io._items import Item
    from ..audit._audit import AuditRun

Record = Mapping[str, Any]

DEFAULT_TITLE = "trustjudge audit report"
MAX_CONFLICT_ITEMS = 50
MAX_CONFLICTS_PER_ITEM = 12
PLOT_IDS = ("plot-scores", "plot-conflict", "plot-ntr", "plot-position", "plot-ranking")

# Okabe-Ito (colour-blind safe); TrustJudge's own methods (trustjudge, likelihood) get the strong blue.
_COLORS = {
    "discrete": "#999999", "geval": "#E69F00", "expected": "#56B4E9", "trustjudge": "#0072B2",
    "single": "#999999", "two_pass": "#E69F00", "likelihood": "#0072B2", "ppl": "#009E73",
}
_EXTRA_COLORS = ("#CC79A7", "#D55E00", "#F0E442", "#000000")
_RC: Any = {  # matplotlib's rc_context is typed with a Literal of every key
    "svg.fonttype": "path",          # glyphs as paths: the SVG needs no font on the viewing machine
    "svg.hashsalt": "trustjudge",    # deterministic clip-path ids
    "text.parse_math": False,        # "$" in a system name is text, not mathtext
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "figure.titlesize": 11,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.axisbelow": True,
    "grid.alpha": 0.35,
    "grid.linewidth": 0.6,
}

_SECTIONS = {
    "conflict": ("Conflict ratio",
                 "Share of judged pairs whose pairwise verdict contradicts the two pointwise scores "
                 "(lower is better)."),
    "transitivity": ("Transitivity",
                     ("NTR_k: share of k-response subsets whose verdicts fit no weak order (lower is better); "
                      "read it next to the verdict tie rate.")),
    "position": ("Position bias",
                 ("How often the response shown first wins (label A) and how often a tie is chosen, per order; "
                  "swap flips: pairs whose two orders disagree.")),
    "length": ("Length bias", "Correlation of the verdict with the length difference; wins of the longer response."),
    "human pairwise": ("Agreement with human pairwise labels", "Accuracy and Cohen's kappa against `human`."),
    "human scores": ("Agreement with human scores", "Rank correlation of scores with `human_score`."),
    "unscored": ("Unscored", "Judgments that could not be scored, by reason (counts)."),
    "injection": ("Prompt injection",
                  ("Each response re-scored with an appended instruction to give the top score: mean score shift "
                   "(fraction of the scale) and share of responses given the top label, plain and injected.")),
}


# -- small helpers ----------------------------------------------------------------------------------------
def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _fmt(value: Any, digits: int = 3) -> str:
    number = _num(value)
    return "–" if number is None else f"{number:.{digits}f}"


def _short(text: Any, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _color(name: str, index: int) -> str:
    return _COLORS.get(name, _EXTRA_COLORS[index % len(_EXTRA_COLORS)])


def _ordered(names: Iterable[str], known: Sequence[str]) -> list[str]:
    seen = list(dict.fromkeys(names))
    return [n for n in known if n in seen] + [n for n in seen if n not in known]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("trustjudge")
    except PackageNotFoundError:  # pragma: no cover - not installed (running from a source tree)
        return "unknown"


# -- matplotlib -------------------------------------------------------------------------------------------
def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


_SVG_DROP = re.compile(r"<\?xml[^>]*\?>|<!DOCTYPE[^>]*>|<!--.*?-->|<metadata>.*?</metadata>", re.DOTALL)


def _svg(fig: Figure, prefix: str, label: str) -> str:
    """The figure as inline SVG: no XML prolog, metadata or comments; ids prefixed to be unique per page."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    svg = _SVG_DROP.sub("", buf.getvalue()).strip()
    # Inline SVG in HTML needs no namespace declarations (the parser supplies svg and xlink); dropping them
    # leaves no URL at all in the page.
    svg = re.sub(r'\s+xmlns(?::\w+)?="[^"]*"', "", svg)
    svg = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', svg)
    svg = re.sub(r'\bhref="#([^"]+)"', rf'href="#{prefix}-\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}-\1)", svg)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{_e(label)}" ', 1)


def _no_data(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#666666")
    ax.set_xticks([])
    ax.set_yticks([])


def _yerr(values: Sequence[float | None], cis: Sequence[tuple[float | None, float | None]]) -> list[list[float]]:
    low, high = [], []
    for v, (lo, hi) in zip(values, cis):
        ok = v is not None and lo is not None and hi is not None
        low.append(max(0.0, v - lo) if ok else 0.0)  # type: ignore[operator]
        high.append(max(0.0, hi - v) if ok else 0.0)  # type: ignore[operator]
    return [low, high]


def _grouped_bars(ax: Axes, groups: Sequence[str], series: Sequence[tuple[str, str, list[float | None],
                  list[tuple[float | None, float | None]] | None, str | None]]) -> None:
    """Bars: one group per x label, one bar per series (label, colour, values, intervals, hatch)."""
    width = 0.8 / max(1, len(series))
    for s, (label, color, values, cis, hatch) in enumerate(series):
        xs = [g - 0.4 + width * (s + 0.5) for g in range(len(groups))]
        heights = [0.0 if v is None else v for v in values]
        yerr = _yerr(values, cis) if cis is not None else None
        ax.bar(xs, heights, width * 0.92, label=label, color=color, hatch=hatch, edgecolor="white",
               linewidth=0.5, yerr=yerr, error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#333333"})
        for x, v in zip(xs, values):
            if v is None:
                ax.text(x, 0.01, "n/a", ha="center", va="bottom", rotation=90, fontsize=6, color="#666666")
    ax.set_xticks(range(len(groups)), groups)
    ax.yaxis.grid(True)


def _bin_edges(scale: int, low: float, high: float) -> list[float]:
    """Histogram edges centred on the scale's labels (and on quarter/half steps on small scales)."""
    width = 0.25 if scale <= 5 else 0.5 if scale <= 10 else float(max(1, round(scale / 20)))
    first = math.floor((min(1.0, low) - 1) / width)  # geval can fall below 1 (lost label mass)
    last = math.ceil((max(float(scale), high) - 1) / width)
    return [1 + width * (k - 0.5) for k in range(first, last + 2)]


def _plot_scores(score_records: Mapping[int, Sequence[Record]]) -> Figure:
    scales = sorted(score_records)
    by_scale = {s: list(_dedupe_scores(score_records[s])) for s in scales}
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


# -- HTML pieces ------------------------------------------------------------------------------------------
_CSS = """
:root{--fg:#1d232b;--muted:#5d6875;--line:#dde2e8;--bg:#ffffff;--panel:#f6f8fa;--accent:#0072b2;--bad:#b3261e}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"DejaVu Sans",Arial,sans-serif}
main{max-width:1120px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:19px;margin:36px 0 8px;padding-bottom:4px;border-bottom:2px solid var(--line)}
h3{font-size:15px;margin:20px 0 4px}
p.sub,p.note,.muted{color:var(--muted)}
p.note{margin:4px 0 10px;font-size:13px}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:3px 18px;margin:14px 0;padding:12px 16px;
background:var(--panel);border:1px solid var(--line);border-radius:6px}
dl.meta dt{color:var(--muted)}
dl.meta dd{margin:0;font-weight:600;overflow-wrap:anywhere}
nav{margin:10px 0 0;font-size:13px}
nav a{color:var(--accent);margin-right:14px;text-decoration:none}
figure.plot{margin:18px 0 26px;padding:10px 12px;border:1px solid var(--line);border-radius:6px;background:#fff}
figure.plot svg{display:block;max-width:100%;height:auto;margin:0 auto}
figure.plot figcaption{color:var(--muted);font-size:13px;margin-top:6px}
table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0 12px}
th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
thead th{background:var(--panel);position:sticky;top:0;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tbody.section th{background:#eef3f8;font-size:13px;padding-top:10px}
tbody.section th .muted{font-weight:400}
tr.tj td{background:#f1f7fc}
tr.tj td:first-child{box-shadow:inset 3px 0 0 var(--accent)}
td.item{max-width:340px;overflow-wrap:anywhere}
td.item .q,.resp{display:block;color:var(--muted);font-size:12px;overflow-wrap:anywhere}
span.v-first,span.v-second,span.v-tie{font-weight:600}
td.conflict{color:var(--bad);font-weight:600}
tbody.item-group tr:first-child td{border-top:2px solid var(--line)}
footer{margin-top:40px;color:var(--muted);font-size:12px}
"""


def _figure_html(fig_id: str, title: str, caption: str, fig: Figure) -> str:
    return (f'<figure class="plot" id="{fig_id}">\n{_svg(fig, fig_id, title)}\n'
            f"<figcaption>{caption}</figcaption>\n</figure>")


def _meta_html(run: AuditRun, judge: str, protocol: str, data: str, generated: datetime) -> str:
    report = run.report
    per_scale = ", ".join(f"{scale}-point: {report.score_records.get(scale, len(recs))}"
                          for scale, recs in sorted(run.score_records.items())) or "none"
    unscored = sum(sum(r.values()) for r in report.unscored_scores.values()) + sum(report.unscored_compare.values())
    rows = [("judge", judge), ("protocol", protocol), ("data", data), ("items", f"{report.items:,}"),
            ("pairs (both orders judged)", f"{report.pairs:,}"), ("scored responses", per_scale),
            ("unscored judgments", f"{unscored:,}"), ("conflict tolerance delta", f"{report.delta:g}"),
            ("intervals", f"95% percentile bootstrap over items, B={report.bootstrap}, seed {report.seed}"
             if report.bootstrap else "none (bootstrap 0)"),
            ("date", generated.strftime("%Y-%m-%d %H:%M %Z").strip())]
    return '<dl class="meta">' + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows) + "</dl>"


def _is_trustjudge_row(section: str, method: str) -> bool:
    return (section == "conflict" and "trustjudge" in method and "likelihood" in method) or \
        (section in ("transitivity", "human pairwise") and method == "likelihood") or \
        (section == "human scores" and method.endswith("pt trustjudge"))


def _audit_table(report: AuditReport) -> str:
    by_section: dict[str, list[Any]] = defaultdict(list)
    for row in report.rows():
        by_section[row[0]].append(row)
    if not by_section:
        return '<p class="note">The audit has no rows (no judgments).</p>'
    parts = [('<table class="audit"><thead><tr><th>method</th><th>metric</th><th class="num">value</th>'
              '<th class="num">95% CI</th><th class="num">n</th></tr></thead>')]
    for section, rows in by_section.items():
        name, note = _SECTIONS.get(section, (section, ""))
        parts.append(f'<tbody class="section" id="audit-{_e(section.replace(" ", "-"))}"><tr><th colspan="5">'
                     f'{_e(name)} <span class="muted">— {_e(note)}</span></th></tr></tbody><tbody>')
        for _, method, metric, value, lo, hi, n in rows:
            shown = f"{value:.0f}" if section == "unscored" else _fmt(value)
            ci = f"{_fmt(lo)} – {_fmt(hi)}" if _num(lo) is not None and _num(hi) is not None else ""
            cls = ' class="tj"' if _is_trustjudge_row(section, method) else ""
            parts.append(f'<tr{cls}><td>{_e(method)}</td><td>{_e(metric)}</td><td class="num">{_e(shown)}</td>'
                         f'<td class="num">{_e(ci)}</td><td class="num">{n:,}</td></tr>')
        parts.append("</tbody>")
    parts.append("</table>")
    return "\n".join(parts)


def _ranking_html(ranking: Mapping[str, Any]) -> str:
    systems = _systems(ranking)
    if not systems:
        return '<p class="note">The ranking has no systems.</p>'
    extra = [("bt_hard", "BT hard", 3), ("elo", "Elo", 1), ("win_rate", "win rate", 3), ("games", "games", 0),
             ("mean_score", "mean score", 2)]
    extra = [c for c in extra if any(c[0] in s.raw for s in systems)]
    has_rank = any("rank" in s.raw for s in systems)
    has_range = any(_num(s.raw.get("rank_best")) for s in systems)
    head = (("<th class=\"num\">rank</th>" if has_rank else "") + "<th>system</th><th class=\"num\">strength</th>"
            "<th class=\"num\">95% CI</th>" + ("<th class=\"num\">rank range</th>" if has_range else "")
            + "".join(f'<th class="num">{_e(label)}</th>' for _, label, _ in extra))
    body = []
    for s in systems:
        cells = f'<td class="num">{_e(s.raw.get("rank", ""))}</td>' if has_rank else ""
        cells += f"<td>{_e(s.name)}</td><td class=\"num\">{_fmt(s.strength)}</td>"
        ci = f"{_fmt(s.low)} – {_fmt(s.high)}" if s.low is not None and s.high is not None else ""
        cells += f'<td class="num">{_e(ci)}</td>'
        if has_range:
            best, worst = _num(s.raw.get("rank_best")), _num(s.raw.get("rank_worst"))
            cells += f'<td class="num">{f"{best:.0f}–{worst:.0f}" if best and worst else ""}</td>'
        for key, _, digits in extra:
            cells += f'<td class="num">{_e(_fmt(s.raw.get(key), digits))}</td>'
        body.append(f"<tr>{cells}</tr>")
    facts = [(k, ranking.get(k)) for k in ("primary", "method", "ties", "nu", "bootstrap", "items", "pairs_soft",
                                            "pairs_hard", "components", "converged") if ranking.get(k) is not None]
    note = "; ".join(f"{k} {_fmt(v) if isinstance(v, float) else v}" for k, v in facts)
    parts = [f'<p class="note">{_e(note)}</p>' if note else "",
             f'<table class="ranking"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>']
    agreements = [a for a in ranking.get("agreements") or [] if isinstance(a, Mapping)]
    if agreements:
        cells = ", ".join(f"{a.get('first')} vs {a.get('second')} {_fmt(a.get('tau'), 2)}" for a in agreements)
        parts.append(f'<p class="note">Kendall tau-b between rankings: {_e(cells)}</p>')
    return "\n".join(parts)


@dataclass(frozen=True)
class _Conflict:
    first: str
    second: str
    score_first: float
    score_second: float
    verdict: str
    probabilities: Mapping[str, Any] | None
    first_system: str | None
    second_system: str | None


def conflicts_by_item(run: AuditRun, *, scale: int | None = None, score_method: str = "trustjudge",
                      aggregation: str = "likelihood") -> tuple[int | None, dict[str, list[_Conflict]]]:
    """Return the scale used and, per item (input order), the pairs whose verdict contradicts the scores.

    The rule is the conflict ratio's (``_audit.conflict_ratio``) with the report's delta, so the counts
    add up to the audit's ``conflict[(scale, score_method, aggregation)].conflicts``. Default scale: 100
    when present, else the largest.
    """
    scales = sorted(run.score_records)
    if scale is None:
        scale = 100 if 100 in scales else (scales[-1] if scales else None)
    if scale is None or scale not in run.score_records:
        return scale, {}
    delta = run.report.delta
    scores = {}
    for r in _dedupe_scores(run.score_records[scale]):
        value = None if r.get("unscored") is not None else _num((r.get("scores") or {}).get(score_method))
        scores[(str(r["item_id"]), str(r["response_id"]))] = value
    out: dict[str, list[_Conflict]] = {}
    for rec in _dedupe_pairs(run.compare_records):
        item, first, second = str(rec["item_id"]), str(rec["first_id"]), str(rec["second_id"])
        verdict = None if rec.get("unscored") is not None else (rec.get("verdicts") or {}).get(aggregation)
        x, y = scores.get((item, first)), scores.get((item, second))
        if verdict not in ("first", "second", "tie") or x is None or y is None:
            continue
        sign = {"first": 1, "second": -1, "tie": 0}[str(verdict)]
        if (x > y + delta and sign <= 0) or (y > x + delta and sign >= 0) or (abs(x - y) <= delta and sign != 0):
            out.setdefault(item, []).append(_Conflict(first, second, x, y, str(verdict), rec.get("probabilities"),
                                                      rec.get("first_system"), rec.get("second_system")))
    return scale, out


def _conflicts_html(run: AuditRun, items: Sequence[Item] | None, max_items: int,
                    max_per_item: int = MAX_CONFLICTS_PER_ITEM) -> str:
    method, agg = "trustjudge", "likelihood"
    scale, found = conflicts_by_item(run, score_method=method, aggregation=agg)
    if scale is None:
        return '<p class="note">No score records: nothing to compare the verdicts with.</p>'
    total = sum(len(v) for v in found.values())
    result = run.report.conflict.get((scale, method, agg))
    counted = f" of {result.counted:,} pairs" if result is not None else ""
    intro = (f'<p class="note">Pairs whose <b>{agg}</b> verdict disagrees with the <b>{scale}-point {method}</b> '
             f"scores (tolerance delta {run.report.delta:g}): {total:,} conflicts{_e(counted)} in {len(found):,} "
             f"items")
    if not found:
        return intro + ".</p>"
    order = {item_id: i for i, item_id in enumerate(dict.fromkeys(str(r["item_id"]) for r in run.compare_records))}
    ranked = sorted(found, key=lambda item_id: (-len(found[item_id]), order.get(item_id, 0)))
    shown = ranked[:max_items]
    intro += (f"; the {len(shown)} items with the most conflicts are shown.</p>" if len(ranked) > len(shown)
              else ".</p>")
    by_id = {it.id: it for it in items or []}
    parts = [intro, ('<table class="conflicts"><thead><tr><th>item</th><th>pair (first vs second)</th>'
                     '<th class="num">scores (first / second)</th><th class="num">Δ score</th>'
                     f'<th>{_e(agg)} verdict</th><th class="num">P(first / second / tie)</th></tr></thead>')]

    def side(item: Item | None, rid: str, system: str | None) -> str:
        label = _e(rid) + (f' <span class="muted">({_e(system)})</span>' if system else "")
        if item is not None:
            try:
                text = item.response(rid).text
            except KeyError:
                text = ""
            if text:
                shown = f'<span class="resp">{_e(_short(text, 70))}</span>'
                return f'<span title="{_e(_short(text, 400))}">{label}{shown}</span>'
        return label

    for item_id in shown:
        item = by_id.get(item_id)
        every = found[item_id]
        # The largest contradictions first; a long tail is summarised in one line.
        conflicts = sorted(every, key=lambda c: -abs(c.score_first - c.score_second))[:max_per_item]
        rest = len(every) - len(conflicts)
        question = f'<span class="q">{_e(_short(item.question, 140))}</span>' if item is not None else ""
        parts.append('<tbody class="item-group">')
        for i, c in enumerate(conflicts):
            head = (f'<td class="item" rowspan="{len(conflicts) + (rest > 0)}"><b>{_e(item_id)}</b> '
                    f'<span class="muted">({len(every)})</span>{question}</td>') if i == 0 else ""
            winner = {"first": c.first, "second": c.second}.get(c.verdict)
            verdict = (f'<span class="v-{_e(c.verdict)}">{_e(c.verdict)}</span>'
                       + (f' <span class="muted">({_e(winner)} wins)</span>' if winner else ""))
            p = c.probabilities or {}
            probs = " / ".join(_fmt(p.get(k), 2) for k in ("first", "second", "tie")) if p else "–"
            parts.append(f"<tr>{head}<td>{side(item, c.first, c.first_system)} <span class=\"muted\">vs</span> "
                         f"{side(item, c.second, c.second_system)}</td>"
                         f'<td class="num">{c.score_first:.1f} / {c.score_second:.1f}</td>'
                         f'<td class="num conflict">{c.score_first - c.score_second:+.1f}</td>'
                         f"<td>{verdict}</td><td class=\"num\">{_e(probs)}</td></tr>")
        if rest:
            parts.append(f'<tr><td colspan="5" class="muted">… and {rest} more conflicting pairs with smaller '
                         "score differences</td></tr>")
        parts.append("</tbody>")
    parts.append("</table>")
    return "\n".join(parts)


# -- the report -------------------------------------------------------------------------------------------
def render_report(run: AuditRun, *, judge: str, protocol: str, data: str, ranking: Mapping[str, Any] | None = None,
                  title: str = DEFAULT_TITLE, items: Sequence[Item] | None = None,
                  generated: datetime | None = None, max_conflict_items: int = MAX_CONFLICT_ITEMS,
                  extra_sections: Sequence[tuple[str, str, str]] = ()) -> str:
    """Return a self-contained HTML report (one string, no network needed to view it) of an audit run.

    Args:
        run: What :meth:`trustjudge.Judge.audit` returned.
        judge: The judge's name, as shown.
        protocol: ``direct`` or ``cot``.
        data: The input file (shown as given).
        ranking: A ranking dict (``trustjudge.audit._ranking.Ranking.to_dict()``, or any
            ``{"systems": [{"system", "strength", "ci_low", "ci_high"}, ...]}``; missing keys are tolerated),
            or ``None`` for no ranking section.
        title: The page title.
        items: The audited items, to show question and response text next to each conflict (optional).
        generated: The report's date (default: now, UTC).
        max_conflict_items: How many items (most conflicts first) the per-question table shows; each
            shows its largest contradictions (up to ``MAX_CONFLICTS_PER_ITEM`` pairs) and counts the rest.
        extra_sections: Further sections, ``(id, title, html)``, placed after the plots (the calibration
            section of :func:`trustjudge.report._trust.calibration_section`); their HTML is used as given.
    """
    import matplotlib

    generated = generated or datetime.now(timezone.utc)
    report = run.report
    with matplotlib.rc_context(_RC):
        figures = [
            _figure_html("plot-scores", "Score distributions",
                         "Histograms of every scoring method's scores on each scale; the dashed line is the mean.",
                         _plot_scores(run.score_records)),
            _figure_html("plot-conflict", "Conflict ratio",
                         "Share of pairs whose pairwise verdict contradicts the pointwise scores, per scoring "
                         "method (x) and aggregation (colour); whiskers: 95% bootstrap intervals over items.",
                         _plot_conflict(report)),
            _figure_html("plot-ntr", "Non-transitivity",
                         "NTR_k per aggregation (blue) next to the share of pairs judged a tie (hatched): many "
                         "ties can hide intransitivity as equivalence violations, or mask it.",
                         _plot_ntr(report)),
            _figure_html("plot-position", "Position bias",
                         "How often the response shown first wins and how often a tie is chosen, in each "
                         "presentation order and pooled.", _plot_position(report)),
        ]
        ranking_fig = (_figure_html("plot-ranking", "Ranking",
                                    "Systems by strength with their 95% intervals (bootstrap over items), "
                                    "best at the top.", _plot_ranking(ranking))
                       if ranking is not None else "")
    nav = [("summary", "Summary"), ("plots", "Plots"), *((k, t) for k, t, _ in extra_sections)] \
        + ([("ranking", "Ranking")] if ranking is not None else []) \
        + [("audit", "Audit table"), ("conflicts", "Per-question conflicts")]
    body = [
        f"<header id=\"summary\"><h1>{_e(title)}</h1>",
        f'<p class="sub">trustjudge {_e(_version())} · consistency audit of <b>{_e(judge)}</b> on {_e(data)}</p>',
        _meta_html(run, judge, protocol, data, generated),
        "<nav>" + "".join(f'<a href="#{k}">{_e(v)}</a>' for k, v in nav) + "</nav></header>",
        '<section id="plots"><h2>Plots</h2>', *figures, "</section>", *(html for _, _, html in extra_sections),
    ]
    if ranking is not None:
        body += ['<section id="ranking"><h2>Ranking</h2>', ranking_fig, _ranking_html(ranking), "</section>"]
    body += [
        '<section id="audit"><h2>Audit table</h2>',
        ('<p class="note">Rates are fractions in [0, 1]; <i>n</i> is what each value rests on (pairs, subsets, '
         "judgments, responses or items). Highlighted rows: TrustJudge's methods (distribution-sensitive "
         "trustjudge scores, likelihood-aware aggregation).</p>"),
        _audit_table(report), "</section>",
        '<section id="conflicts"><h2>Per-question conflicts</h2>',
        _conflicts_html(run, items, max_conflict_items), "</section>",
        (f"<footer>Generated by trustjudge {_e(_version())} on {_e(generated.isoformat(timespec='seconds'))}. "
         "This file is self-contained: it loads nothing and runs no script.</footer>"),
    ]
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)} · {_e(judge)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
            + "\n".join(body) + "\n</main>\n</body>\n</html>\n")
