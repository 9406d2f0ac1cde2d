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

The page is assembled here (summary, audit table, ranking table); the plots are drawn by
:mod:`trustjudge.report._plots`, the per-question conflicts by :mod:`trustjudge.report._conflicts`, and
the pieces every page shares (escaping, number formats, the stylesheet, SVG embedding) are in
:mod:`trustjudge.report._html`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..audit._audit import AuditReport
from ._conflicts import MAX_CONFLICT_ITEMS, MAX_CONFLICTS_PER_ITEM, _conflicts_html, conflicts_by_item
from ._html import _CSS, _RC, _e, _figure_html, _fmt, _num, _version
from ._plots import _plot_conflict, _plot_ntr, _plot_position, _plot_ranking, _plot_scores, _systems

if TYPE_CHECKING:
    from ..audit._audit import AuditRun
    from ..io._items import Item

DEFAULT_TITLE = "trustjudge audit report"
PLOT_IDS = ("plot-scores", "plot-conflict", "plot-ntr", "plot-position", "plot-ranking")

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


# -- HTML pieces ------------------------------------------------------------------------------------------
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
        basis = f" (ranked on: {ranking['basis']})" if ranking.get("basis") else ""
        parts.append(f'<p class="note">Kendall tau-b between rankings{_e(basis)}: {_e(cells)}</p>')
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


__all__ = ["DEFAULT_TITLE", "MAX_CONFLICTS_PER_ITEM", "MAX_CONFLICT_ITEMS", "PLOT_IDS", "conflicts_by_item",
           "render_report"]
