"""A self-contained HTML report of a judging-mode audit (what ``--audit`` / ``--report`` write for a mode).

A mode's report is plain data: its task's :meth:`~trustjudge.modes._base.Task.report_sections` hook turns the
audit into sections of notes, tables and figures (:mod:`trustjudge.modes._sections`), and
:meth:`~trustjudge.modes._base.Task.report_facts` gives the summary's facts. :func:`render_mode_report` reaches
a mode's hooks through the registry and draws them here, in the style of the holistic report
(:mod:`trustjudge.report._report`; both are drawn with the kit of :mod:`trustjudge.report._html`): inline CSS,
plots as inline SVG drawn by matplotlib on an Agg canvas, a Content-Security-Policy that forbids every load
and script, and every piece of text (criterion names, reasons, keys) HTML-escaped.

Figures: a :class:`~trustjudge.modes._sections.Reliability` diagram (binned predicted probability against the
observed frequency of the positive human label, with the diagonal and the count of each bin; each bin's count
bar is ``<g id="<figure id>-bin-<i>">``, its point ``...-point-<i>``, the diagonal ``...-diagonal``: the
built-in modes' is ``plot-reliability``) and :class:`~trustjudge.modes._sections.Bars` (grouped bars: the
criteria mode's ``plot-agreement``, pooled Spearman per criterion and scoring method).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..modes._registry import Mode, get_mode
from ..modes._sections import Bars, Block, Heading, Note, Reliability, Section, Table, cell_text
from ._html import _CSS, _RC, _color, _e, _figure, _figure_html, _fmt, _grouped_bars, _no_data, _short, _version

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_NUM = ' class="num"'
_TJ = ' class="tj"'


# -- blocks ---------------------------------------------------------------------------------------------------
def _table(table: Table) -> str:
    """A table; every cell is escaped here."""
    head = table.columns
    parts = [f'<table class="{_e(table.name)}"><thead><tr>'
             + "".join(f"<th{_NUM if c.numeric else ''}>{_e(c.label)}</th>" for c in head)
             + "</tr></thead>"]
    for group in table.groups:
        if group.title is not None:
            parts.append(f'<tbody class="section"><tr><th colspan="{len(head)}">{_e(group.title)}</th></tr></tbody>')
        parts.append("<tbody>")
        for row in group.rows:
            tds = "".join(f"<td{_NUM if c.numeric else ''}>{_e(cell_text(cell))}</td>"
                          for cell, c in zip(row.cells, head))
            parts.append(f"<tr{_TJ if row.highlighted else ''}>{tds}</tr>")
        parts.append("</tbody>")
    parts.append("</table>")
    return "\n".join(parts)


def _plot_reliability(r: Reliability) -> Figure:
    bins = r.bins
    fig = _figure(6.4, 5.4)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3.0, 1.2])
    total = sum(b.count for b in bins)
    fig.suptitle(f"Reliability of {r.what} against human {r.positive} (ECE {_fmt(r.ece)}, "
                 f"Brier {_fmt(r.brier)}, n={total})")
    top.set_ylabel(f"observed frequency of {r.positive}")
    bottom.set_xlabel(f"predicted {r.what} (bin mean)")
    bottom.set_ylabel("count")
    for ax in (top, bottom):
        ax.set_xlim(0, 1)
        ax.grid(True)
    if not bins:
        _no_data(top, "no judgments with human labels")
        bottom.set_yticks([])
        return fig
    top.plot([0, 1], [0, 1], linestyle="--", color="#999999", linewidth=1.0, label="perfect calibration",
             gid="diagonal")
    xs = [b.mean_prob for b in bins]
    ys = [b.frequency for b in bins]
    top.plot(xs, ys, color="#0072B2", linewidth=1.2, label="judge")
    for i, (b, x, y) in enumerate(zip(bins, xs, ys)):
        top.vlines(x, min(x, y), max(x, y), color="#D55E00", linewidth=1.0, alpha=0.7)
        top.plot([x], [y], "o", color="#0072B2", markersize=5, gid=f"point-{i}")
        top.annotate(f"n={b.count:,}", (x, y), textcoords="offset points", xytext=(4, 5), fontsize=7,
                     color="#333333")
    top.set_ylim(-0.03, 1.08)
    top.legend(loc="upper left", frameon=False)
    for i, b in enumerate(bins):
        lo = xs[i] - 0.02 if b.lo is None else b.lo
        hi = xs[i] + 0.02 if b.hi is None else b.hi
        bars = bottom.bar([(lo + hi) / 2], [float(b.count)], width=(hi - lo) * 0.92,
                          color="#56B4E9", edgecolor="white", linewidth=0.5)
        bars.patches[0].set_gid(f"bin-{i}")
        bottom.bar_label(bars, fmt="%d", fontsize=7, padding=1)
    bottom.set_ylim(0, max(float(b.count) for b in bins) * 1.35)
    bottom.yaxis.get_major_locator().set_params(integer=True)
    return fig


def _plot_bars(b: Bars) -> Figure:
    fig = _figure(max(6.0, 1.1 * len(b.categories) * max(1, len(b.series)) / 2 + 2.5), 3.4)
    ax = fig.subplots()
    ax.set_title(b.heading)
    ax.set_xlabel(b.xlabel)
    ax.set_ylabel(b.ylabel)
    series: list[Any] = [(s.label, _color(s.label, i), list(s.values), None, None) for i, s in enumerate(b.series)]
    _grouped_bars(ax, [_short(n, 24) for n in b.categories], series)
    ax.axhline(0, color="#555555", linewidth=0.8)
    if b.ylim is not None:
        ax.set_ylim(*b.ylim)
    ax.legend(title=b.legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return fig


def _block(block: Block) -> str:
    if isinstance(block, Note):
        return f'<p class="note">{_e(block.text)}</p>'
    if isinstance(block, Heading):
        return f"<h3>{_e(block.text)}</h3>"
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Reliability):
        return _figure_html(_e(block.id), block.title, _e(block.caption), _plot_reliability(block))
    if isinstance(block, Bars):
        return _figure_html(_e(block.id), block.title, _e(block.caption), _plot_bars(block))
    raise TypeError(f"a report section holds notes, headings, tables and figures, not a {type(block).__name__}")


def _section(section: Section) -> list[str]:
    return [f'<section id="{_e(section.id)}"><h2>{_e(section.title)}</h2>', *map(_block, section.blocks),
            "</section>"]


# -- the report -------------------------------------------------------------------------------------------
def _reporting(mode: str) -> Mode:
    try:
        found = get_mode(mode)
    except ConfigError as exc:
        raise ValueError(f"mode {mode!r}: {exc}") from None
    if not found.audits:
        raise ValueError(f"mode {mode!r} has no audit to report (its task defines no audit hook)")
    return found


def render_mode_report(audit: Mapping[str, Any], *, title: str, mode: str, label: str | None = None,
                       details: Mapping[str, Any] | None = None, generated: datetime | None = None,
                       extra_sections: Sequence[tuple[str, str, str]] = ()) -> str:
    """Return a self-contained HTML report (one string) of a judging mode's audit.

    Args:
        audit: What the mode's audit hook returned (or its JSON), e.g. ``criteria_audit``, ``checklist_audit``
            or ``claims_audit`` with ``grounding`` and ``sensitivity`` inside where they were run.
        title: The page title.
        mode: The mode (registered, built-in or a plug-in) whose task's report hooks draw the audit.
        label: What the page calls the audit (default: the mode's name; the CLI gives its command).
        details: Extra facts for the summary (e.g. judge and data file), shown as given.
        generated: The report's date (default: now, UTC).
        extra_sections: Further sections, ``(id, title, html)``, placed after the mode's own and before its
            appendix sections (the calibration section of :func:`trustjudge.report._trust.calibration_section`);
            their HTML is used as given.

    Raises:
        ValueError: an unknown mode, or one without an audit.
    """
    task = _reporting(mode).task
    return render_sections(task.report_sections(audit), title=title, label=label or mode,
                           facts=[*(details or {}).items(), *task.report_facts(audit)], generated=generated,
                           extra_sections=extra_sections)


def render_sections(sections: Sequence[Section], *, title: str, label: str, facts: Sequence[tuple[str, Any]] = (),
                    generated: datetime | None = None, extra_sections: Sequence[tuple[str, str, str]] = ()) -> str:
    """The page of :func:`render_mode_report` from sections as data (``label``: what the audit is called)."""
    import matplotlib

    generated = generated or datetime.now(timezone.utc)
    body_sections: list[str] = []
    ids: list[str] = []
    titles: dict[str, str] = {}
    main = [s for s in sections if not s.appendix]
    appendix = [s for s in sections if s.appendix]
    with matplotlib.rc_context(_RC):
        for s in main:
            body_sections += _section(s)
            ids.append(s.id)
            titles[s.id] = s.nav or s.id.capitalize()
        for key, name, html in extra_sections:
            body_sections.append(html)
            ids.append(key)
            titles[key] = name
        for s in appendix:
            body_sections += _section(s)
            ids.append(s.id)
            titles[s.id] = s.nav or s.id.capitalize()
    meta = [("mode", label), *facts]
    nav = "".join(f'<a href="#{_e(k)}">{_e(titles.get(k, k.capitalize()))}</a>' for k in ids)
    body = [f'<header id="summary"><h1>{_e(title)}</h1>',
            f'<p class="sub">trustjudge {_e(_version())} · {_e(label)} audit</p>',
            '<dl class="meta">' + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in meta)
            + f"<dt>date</dt><dd>{_e(generated.strftime('%Y-%m-%d %H:%M %Z').strip())}</dd></dl>",
            f"<nav>{nav}</nav></header>", *body_sections,
            (f"<footer>Generated by trustjudge {_e(_version())} on {_e(generated.isoformat(timespec='seconds'))}. "
             "This file is self-contained: it loads nothing and runs no script.</footer>")]
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)} · {_e(label)} audit</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            "<main>\n" + "\n".join(body) + "\n</main>\n</body>\n</html>\n")
