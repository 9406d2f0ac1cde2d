"""A self-contained HTML report of a judging-mode audit (what ``--audit`` writes for criteria, checklist, claims).

:func:`render_mode_report` reads the audit dict of :mod:`trustjudge.modes._audits` (``criteria_audit``,
``checklist_audit`` or ``claims_audit``, with ``grounding`` / ``sensitivity`` inside when they were run;
missing keys and null numbers are tolerated) and returns one HTML string in the style of the holistic
report (:mod:`trustjudge.report._report`; both are drawn with the kit of :mod:`trustjudge.report._html`):
inline CSS, plots as inline SVG drawn by matplotlib on an Agg canvas, a Content-Security-Policy that forbids
every load and script, and every piece of text (criterion names, reasons, keys) HTML-escaped.

Plots: ``plot-reliability`` (checklist P(pass) or claims P(supported): binned predicted probability against
the observed frequency of the positive human label, with the diagonal and the count of each bin; each bin's
count bar is ``<g id="plot-reliability-bin-<i>">``, its point ``...-point-<i>``, the diagonal
``...-diagonal``) and, for criteria with human labels, ``plot-agreement`` (pooled Spearman per criterion and
scoring method).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ._html import (
    _CSS,
    _RC,
    _color,
    _e,
    _figure,
    _figure_html,
    _fmt,
    _grouped_bars,
    _no_data,
    _num,
    _ordered,
    _short,
    _version,
)
from ..engine._scoring import AGGREGATIONS, SCORE_METHODS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MODES = ("criteria", "checklist", "claims")
_KNOWN = {
    "criteria": {"criteria", "aggregate_vs_human_overall", "wins_every_criterion", "grounding"},
    "checklist": {"responses", "checks_with_human_labels", "calibration", "value_mae", "conflict_ratio_vs_pairwise",
                  "grounding"},
    "claims": {"responses", "claims", "unscored_claims", "with_human_labels", "responses_unscored",
               "supported_calibration", "label_agreement", "sensitivity"},
}


# -- small helpers ----------------------------------------------------------------------------------------
def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(value: Any) -> str:
    number = _num(value)
    return "–" if number is None else f"{number:,.0f}"


def _ci(value: Any) -> str:
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        lo, hi = _num(value[0]), _num(value[1])
        if lo is not None and hi is not None:
            return f"{lo:.3f} – {hi:.3f}"
    return ""


def _of(part: Any, whole: Any) -> str:
    return f"{_count(part)} / {_count(whole)}"


_NUM = ' class="num"'
_TJ = ' class="tj"'


def _table(cls: str, head: Sequence[tuple[str, bool]], groups: Iterable[tuple[str | None, Sequence[tuple[
        Sequence[str], bool]]]]) -> str:
    """A table: ``head`` is (label, numeric) per column; each group is (a section title or None, rows), a row
    being (plain-text cells, highlighted). Every cell is escaped here."""
    parts = [f'<table class="{_e(cls)}"><thead><tr>'
             + "".join(f"<th{_NUM if num else ''}>{_e(label)}</th>" for label, num in head)
             + "</tr></thead>"]
    for title, rows in groups:
        if title is not None:
            parts.append(f'<tbody class="section"><tr><th colspan="{len(head)}">{_e(title)}</th></tr></tbody>')
        parts.append("<tbody>")
        for cells, highlighted in rows:
            tds = "".join(f"<td{_NUM if num else ''}>{_e(cell)}</td>"
                          for cell, (_, num) in zip(cells, head))
            parts.append(f"<tr{_TJ if highlighted else ''}>{tds}</tr>")
        parts.append("</tbody>")
    parts.append("</table>")
    return "\n".join(parts)


def _note(text: str) -> str:
    return f'<p class="note">{_e(text)}</p>'


def _metrics_table(rows: Sequence[tuple[str, Any, str]]) -> str:
    """(metric, value, what it means) rows; integers print without decimals."""
    body = [([name, _count(value) if isinstance(value, int) else _fmt(value), meaning], False)
            for name, value, meaning in rows]
    return _table("metrics", [("metric", False), ("value", True), ("reading", False)], [(None, body)])


# -- plots ------------------------------------------------------------------------------------------------
def _bins(calibration: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out = []
    for b in calibration.get("reliability") or []:
        if isinstance(b, Mapping) and _num(b.get("count")) and _num(b.get("mean_prob")) is not None \
                and _num(b.get("frequency")) is not None:
            out.append(b)
    return out


def _plot_reliability(calibration: Mapping[str, Any], what: str, positive: str) -> Figure:
    bins = _bins(calibration)
    fig = _figure(6.4, 5.4)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3.0, 1.2])
    total = sum(int(_num(b["count"]) or 0) for b in bins)
    fig.suptitle(f"Reliability of {what} against human {positive} (ECE {_fmt(calibration.get('ece'))}, "
                 f"Brier {_fmt(calibration.get('brier'))}, n={total})")
    top.set_ylabel(f"observed frequency of {positive}")
    bottom.set_xlabel(f"predicted {what} (bin mean)")
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
    xs = [float(_num(b["mean_prob"]) or 0.0) for b in bins]
    ys = [float(_num(b["frequency"]) or 0.0) for b in bins]
    top.plot(xs, ys, color="#0072B2", linewidth=1.2, label="judge")
    for i, (b, x, y) in enumerate(zip(bins, xs, ys)):
        top.vlines(x, min(x, y), max(x, y), color="#D55E00", linewidth=1.0, alpha=0.7)
        top.plot([x], [y], "o", color="#0072B2", markersize=5, gid=f"point-{i}")
        top.annotate(f"n={_count(b['count'])}", (x, y), textcoords="offset points", xytext=(4, 5), fontsize=7,
                     color="#333333")
    top.set_ylim(-0.03, 1.08)
    top.legend(loc="upper left", frameon=False)
    for i, b in enumerate(bins):
        lo, hi = _num(b.get("lo")), _num(b.get("hi"))
        lo = xs[i] - 0.02 if lo is None else lo
        hi = xs[i] + 0.02 if hi is None else hi
        bars = bottom.bar([(lo + hi) / 2], [float(_num(b["count"]) or 0.0)], width=(hi - lo) * 0.92,
                          color="#56B4E9", edgecolor="white", linewidth=0.5)
        bars.patches[0].set_gid(f"bin-{i}")
        bottom.bar_label(bars, fmt="%d", fontsize=7, padding=1)
    bottom.set_ylim(0, max(float(_num(b["count"]) or 0.0) for b in bins) * 1.35)
    bottom.yaxis.get_major_locator().set_params(integer=True)
    return fig


def _plot_agreement(criteria: Mapping[str, Any]) -> Figure:
    names = [n for n, entry in criteria.items() if _map(entry).get("human_agreement")]
    methods = _ordered((m for n in names for m in _map(_map(criteria[n]).get("human_agreement"))), SCORE_METHODS)
    fig = _figure(max(6.0, 1.1 * len(names) * max(1, len(methods)) / 2 + 2.5), 3.4)
    ax = fig.subplots()
    ax.set_title("Agreement with the human per-criterion scores (pooled Spearman, higher is better)")
    ax.set_xlabel("criterion")
    ax.set_ylabel("Spearman rho")
    series: list[Any] = []
    for i, method in enumerate(methods):
        values = [_num(_map(_map(_map(criteria[n]).get("human_agreement")).get(method)).get("spearman_pooled"))
                  for n in names]
        series.append((method, _color(method, i), values, None, None))
    _grouped_bars(ax, [_short(n, 24) for n in names], series)
    ax.axhline(0, color="#555555", linewidth=0.8)
    ax.set_ylim(-1.05, 1.05)
    ax.legend(title="scoring method", loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return fig


# -- sections ---------------------------------------------------------------------------------------------
def _reliability_table(calibration: Mapping[str, Any], what: str) -> str:
    rows = []
    for b in _bins(calibration):
        lo, hi = _num(b.get("lo")), _num(b.get("hi"))
        gap = (_num(b["frequency"]) or 0.0) - (_num(b["mean_prob"]) or 0.0)
        closing = "]" if hi is not None and hi >= 1.0 else ")"  # the last bin holds p = 1
        rows.append(([f"[{_fmt(lo, 2)}, {_fmt(hi, 2)}{closing}", _count(b.get("count")), _fmt(b.get("mean_prob")),
                      _fmt(b.get("frequency")), f"{gap:+.3f}"], False))
    if not rows:
        return _note("No reliability bins (no judgments with human labels).")
    return _table("reliability", [("bin", False), ("count", True), (f"mean {what}", True),
                                  ("observed frequency", True), ("frequency − predicted", True)], [(None, rows)])


def _calibration_section(calibration: Mapping[str, Any], what: str, positive: str, extra: Sequence[tuple[
        str, Any, str]]) -> list[str]:
    fig = _figure_html("plot-reliability", f"Reliability of {what}",
                       _e(f"Each point is one bin of {what} (equal-width bins of [0, 1], empty bins left out): "
                          f"the mean predicted probability against the share of human {positive} labels, labelled "
                          "with its count; the dashed diagonal is perfect calibration and the orange segments the "
                          "gaps. Below: judgments per bin."),
                       _plot_reliability(calibration, what, positive))
    rows = [("Brier score", calibration.get("brier"), "mean squared error of the probability (lower is better)"),
            ("ECE", calibration.get("ece"), "expected calibration error over the bins (lower is better)"),
            ("AUROC", calibration.get("auroc"), "P(a positive outranks a negative); 0.5 is chance"),
            ("accuracy", calibration.get("accuracy"), f"{what} > 0.5 against the human label"),
            *([("Cohen's kappa", calibration["kappa"], "chance-corrected agreement of the thresholded decision")]
              if "kappa" in calibration else []),
            ("base rate", calibration.get("base_rate"), f"share of human {positive} labels"),
            *extra]
    return [fig, "<h3>Calibration metrics</h3>", _metrics_table(rows), "<h3>Reliability bins</h3>",
            _reliability_table(calibration, what)]


def _cr_rows(results: Mapping[str, Any], order: Sequence[str], highlight: str) -> list[tuple[list[str], bool]]:
    rows = []
    for name in _ordered(results, order):
        r = _map(results[name])
        rows.append(([name, _fmt(r.get("ratio")), _ci(r.get("ci")), _of(r.get("conflicts"), r.get("counted")),
                      _count(r.get("ties_in_verdicts")), _count(r.get("excluded")), _count(r.get("items"))],
                     name == highlight))
    return rows


_CR_HEAD = [("", False), ("CR", True), ("95% CI", True), ("conflicts / pairs", True), ("tied verdicts", True),
            ("excluded", True), ("items", True)]
_AGREEMENT_HEAD = [("scoring method", False), ("Spearman pooled", True), ("Kendall pooled", True), ("n", True),
                   ("Spearman within item", True), ("Kendall within item", True), ("95% CI (within)", True),
                   ("items varying / all", True)]


def _agreement_rows(agreement: Mapping[str, Any]) -> list[tuple[list[str], bool]]:
    rows = []
    for method in _ordered(agreement, SCORE_METHODS):
        a = _map(agreement[method])
        rows.append(([method, _fmt(a.get("spearman_pooled")), _fmt(a.get("kendall_pooled")), _count(a.get("n")),
                      _fmt(a.get("spearman_mean")), _fmt(a.get("kendall_mean")), _ci(a.get("spearman_ci")),
                      _of(a.get("items"), a.get("items_total"))], method == "trustjudge"))
    return rows


def _criteria_sections(audit: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    criteria = _map(audit.get("criteria"))
    body: list[str] = ['<section id="agreement"><h2>Agreement with human scores, per criterion</h2>']
    with_humans = [n for n, e in criteria.items() if _map(e).get("human_agreement")]
    if with_humans:
        body.append(_figure_html("plot-agreement", "Agreement per criterion",
                                  _e("Pooled Spearman correlation of each criterion's scores with its human scores, "
                                     "per scoring method."), _plot_agreement(criteria)))
        body.append(_note("Spearman and Kendall (tau-b) pooled over every response, and averaged within items "
                          "where both sides vary. Highlighted: TrustJudge's distribution-sensitive score."))
        body.append(_table("agreement", _AGREEMENT_HEAD,
                           [(f"criterion {n}", _agreement_rows(_map(_map(criteria[n]).get("human_agreement"))))
                            for n in with_humans]))
    else:
        body.append(_note("No criterion has human scores."))
    overall = _map(audit.get("aggregate_vs_human_overall"))
    if overall:
        body.append("<h3>Weighted aggregate against the human overall score</h3>")
        body.append(_table("agreement", _AGREEMENT_HEAD, [(None, _agreement_rows(overall))]))
    body.append("</section>")

    body.append('<section id="consistency"><h2>Consistency per criterion: conflict ratio and transitivity</h2>')
    counts = [([n, _count(_map(e).get("judged")), _count(_map(e).get("unscored"))], False)
              for n, e in criteria.items()]
    if counts:
        body.append(_table("judged", [("criterion", False), ("judged", True), ("unscored", True)],
                           [(None, counts)]))
    with_cr = [n for n, e in criteria.items() if _map(e).get("conflict_ratio")]
    if with_cr:
        body.append("<h3>Conflict ratio (CR)</h3>")
        body.append(_note("Share of the criterion's pairwise verdicts that contradict its pointwise scores, per "
                          "scoring method (lower is better)."))
        head = [("scoring method", False), *_CR_HEAD[1:]]
        body.append(_table("cr", head, [(f"criterion {n}", _cr_rows(_map(_map(criteria[n]).get("conflict_ratio")),
                                                                       SCORE_METHODS, "trustjudge"))
                                        for n in with_cr]))
    with_ntr = [n for n, e in criteria.items() if _map(e).get("ntr")]
    if with_ntr:
        body.append("<h3>Non-transitivity (NTR_k)</h3>")
        body.append(_note("Share of k-response subsets whose per-criterion verdicts fit no weak order (lower is "
                          "better); read it next to the tie rate of the verdicts."))
        groups = []
        for n in with_ntr:
            ntr = _map(_map(criteria[n]).get("ntr"))
            rows = []
            for k in sorted(ntr, key=lambda s: (_num(s) is None, _num(s) or 0.0, s)):
                r = _map(ntr[k])
                judged, ties = _num(r.get("judged")), _num(r.get("ties"))
                tie_rate = ties / judged if judged and ties is not None else None
                rows.append(([f"NTR_{k}", _fmt(r.get("ratio")), _ci(r.get("ci")),
                              _of(r.get("violating"), r.get("valid_subsets")), _count(r.get("circular")),
                              _count(r.get("equivalence")), _fmt(tie_rate), _count(r.get("items"))], False))
            groups.append((f"criterion {n}", rows))
        body.append(_table("ntr", [("k", False), ("NTR", True), ("95% CI", True), ("violating / subsets", True),
                                   ("circular", True), ("equivalence", True), ("tie rate", True), ("items", True)],
                           groups))
    if not with_cr and not with_ntr:
        body.append(_note("No per-criterion pairwise verdicts were audited."))
    wins = _map(audit.get("wins_every_criterion"))
    if wins:
        body.append("<h3>Wins every criterion, loses the aggregate</h3>")
        body.append(_note("Pairs where one response wins every criterion's pairwise verdict, and how many of them "
                          f"the pointwise aggregate ({wins.get('method', 'trustjudge')}) or the pairwise aggregate "
                          "verdict give to the other response."))
        sweeps = wins.get("pairs_won_on_every_criterion")
        body.append(_table("wins", [("", False), ("pairs", True), ("share of sweeps", True)], [(None, [
            (["won on every criterion", _count(sweeps), ""], False),
            (["lost the pointwise aggregate", _count(wins.get("lost_pointwise_aggregate")),
              _fmt(wins.get("share_lost_pointwise"))], False),
            (["lost the pairwise aggregate", _count(wins.get("lost_pairwise_aggregate")),
              _fmt(wins.get("share_lost_pairwise"))], False)])]))
    body.append("</section>")
    return body, ["agreement", "consistency"]


def _checklist_sections(audit: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    calibration = _map(audit.get("calibration"))
    body = ['<section id="calibration"><h2>Calibration of P(pass)</h2>',
            _note("A check passes for the human when its human value is 1 (YES, FULL)."),
            *_calibration_section(calibration, "P(pass)", "pass",
                                  [("mean P(pass)", calibration.get("mean_p_pass"), "compare with the base rate"),
                                   ("value MAE", audit.get("value_mae"),
                                    "mean |expected value − human value| per check")]),
            "</section>"]
    sections = ["calibration"]
    cr = _map(audit.get("conflict_ratio_vs_pairwise"))
    if cr:
        body += ['<section id="consistency"><h2>Conflict ratio against holistic pairwise verdicts</h2>',
                 _note("Share of pairs whose holistic pairwise verdict contradicts the two responses' expected "
                       "checklist satisfaction, per aggregation (lower is better)."),
                 _table("cr", [("aggregation", False), *_CR_HEAD[1:]], [(None, _cr_rows(cr, AGGREGATIONS,
                                                                                      "likelihood"))]),
                 "</section>"]
        sections.append("consistency")
    return body, sections


def _claims_sections(audit: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    calibration = _map(audit.get("supported_calibration"))
    labels = _map(audit.get("label_agreement"))
    extra = [("label accuracy", labels.get("accuracy"), "most probable label against the human label"),
             ("label kappa", labels.get("kappa"), "Cohen's kappa of the most probable label")] if labels else []
    body = ['<section id="calibration"><h2>Calibration of P(supported)</h2>',
            _note("A claim counts as positive when its human label is SUPPORTED (PARTIAL, UNSUPPORTED and UNKNOWN "
                  "count as not supported)."),
            *_calibration_section(calibration, "P(supported)", "SUPPORTED", extra), "</section>"]
    sections = ["calibration"]
    sensitivity = _map(audit.get("sensitivity"))
    if sensitivity:
        order, negation, extractor = (_map(sensitivity.get(k)) for k in ("evidence_order", "negation", "extractor"))
        body += ['<section id="sensitivity"><h2>Sensitivity</h2>',
                 _note("How much the verification moves when nothing it should depend on changes (lower is "
                       "better throughout)."),
                 _table("sensitivity", [("probe", False), ("measure", False), ("value", True), ("n", True)],
                        [(None, [
                            (["evidence order reversed", "mean |shift| of P(supported)",
                              _fmt(order.get("mean_abs_shift")), _count(order.get("claims"))], False),
                            (["evidence order reversed", "max |shift| of P(supported)",
                              _fmt(order.get("max_abs_shift")), _count(order.get("claims"))], False),
                            (["negation", "share of claims supported with their negation",
                              _fmt(negation.get("share")), _count(negation.get("claims"))], False),
                            (["negation", "claims supported with their negation",
                              _count(negation.get("both_supported")), _count(negation.get("claims"))], False),
                            (["second extraction", "mean |difference| in claims per response",
                              _fmt(extractor.get("mean_abs_count_difference")), _count(extractor.get("responses"))],
                             False)])]),
                 "</section>"]
        sections.append("sensitivity")
    unscored = _map(audit.get("responses_unscored"))
    if unscored:
        body += ['<section id="unscored"><h2>Unscored responses</h2>',
                 _table("unscored", [("reason", False), ("responses", True)],
                        [(None, [([str(k), _count(v)], False) for k, v in unscored.items()])]), "</section>"]
        sections.append("unscored")
    return body, sections


def _grounding_section(grounding: Mapping[str, Any]) -> list[str]:
    rows = [(["responses compared", _of(grounding.get("compared"), grounding.get("responses"))], False),
            (["mean shift (with − without grounding)", _fmt(grounding.get("mean_shift"))], False),
            (["mean |shift|", _fmt(grounding.get("mean_abs_shift"))], False),
            (["Spearman with human, with grounding", _fmt(grounding.get("agreement_with_grounding"))], False),
            (["Spearman with human, without grounding", _fmt(grounding.get("agreement_without_grounding"))], False)]
    wrong = _map(grounding.get("wrong_profile"))
    if wrong:
        rows += [(["wrong profile: items / responses", _of(wrong.get("items"), wrong.get("responses"))], False),
                 (["wrong profile: share of scores not dropping", _fmt(wrong.get("share_not_dropping"))], False),
                 (["wrong profile: mean drop", _fmt(wrong.get("mean_drop"))], False)]
    return ['<section id="grounding"><h2>Grounding</h2>',
            _note(f"The same items judged without their profile/knowledge/evidence, and with each item's profile "
                  f"swapped for another's (scoring method {grounding.get('method', 'trustjudge')}); under a wrong "
                  "profile a personalised score should drop."),
            _table("grounding", [("measure", False), ("value", True)], [(None, rows)]), "</section>"]


def _summary(audit: Mapping[str, Any], mode: str, details: Mapping[str, Any]) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = [("mode", mode), *details.items()]
    if mode == "criteria":
        criteria = _map(audit.get("criteria"))
        rows += [("criteria", len(criteria)),
                 ("judgments", _count(sum(_num(_map(e).get("judged")) or 0 for e in criteria.values())))]
    elif mode == "checklist":
        rows += [("responses", _count(audit.get("responses"))),
                 ("checks with human labels", _count(audit.get("checks_with_human_labels")))]
    else:
        rows += [("responses", _count(audit.get("responses"))), ("claims", _count(audit.get("claims"))),
                 ("unscored claims", _count(audit.get("unscored_claims"))),
                 ("claims with human labels", _count(audit.get("with_human_labels")))]
    return rows


def _other_section(audit: Mapping[str, Any], mode: str) -> list[str]:
    rest = {k: v for k, v in audit.items() if k not in _KNOWN[mode]}
    if not rest:
        return []
    rows = [([str(k), _short(json.dumps(v, default=str, ensure_ascii=False), 400)], False) for k, v in rest.items()]
    return ['<section id="other"><h2>Other fields</h2>',
            _table("other", [("field", False), ("value", False)], [(None, rows)]), "</section>"]


# -- the report -------------------------------------------------------------------------------------------
def render_mode_report(audit: Mapping[str, Any], *, title: str, mode: str,
                       details: Mapping[str, Any] | None = None, generated: datetime | None = None,
                       extra_sections: Sequence[tuple[str, str, str]] = ()) -> str:
    """Return a self-contained HTML report (one string) of a judging-mode audit.

    Args:
        audit: What ``criteria_audit``, ``checklist_audit`` or ``claims_audit`` returned (or its JSON), with
            ``grounding`` (:func:`~trustjudge.modes._audits.grounding_audit`) and, for claims, ``sensitivity``
            (:func:`~trustjudge.modes._audits.claims_sensitivity`) inside where they were run.
        title: The page title.
        mode: ``criteria``, ``checklist`` or ``claims``.
        details: Extra facts for the summary (e.g. judge and data file), shown as given.
        generated: The report's date (default: now, UTC).
        extra_sections: Further sections, ``(id, title, html)``, placed after the mode's own (the calibration
            section of :func:`trustjudge.report._trust.calibration_section`); their HTML is used as given.

    Raises:
        ValueError: an unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    import matplotlib

    generated = generated or datetime.now(timezone.utc)
    with matplotlib.rc_context(_RC):
        if mode == "criteria":
            sections, ids = _criteria_sections(audit)
        elif mode == "checklist":
            sections, ids = _checklist_sections(audit)
        else:
            sections, ids = _claims_sections(audit)
    titles = {k: k.capitalize() for k in ids}
    for key, label, html in extra_sections:
        sections.append(html)
        ids.append(key)
        titles[key] = label
    grounding = _map(audit.get("grounding"))
    if grounding:
        sections += _grounding_section(grounding)
        ids.append("grounding")
    other = _other_section(audit, mode)
    if other:
        sections += other
        ids.append("other")
    meta = _summary(audit, mode, details or {})
    nav = "".join(f'<a href="#{_e(k)}">{_e(titles.get(k, k.capitalize()))}</a>' for k in ids)
    body = [f'<header id="summary"><h1>{_e(title)}</h1>',
            f'<p class="sub">trustjudge {_e(_version())} · {_e(mode)} audit</p>',
            '<dl class="meta">' + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in meta)
            + f"<dt>date</dt><dd>{_e(generated.strftime('%Y-%m-%d %H:%M %Z').strip())}</dd></dl>",
            f"<nav>{nav}</nav></header>", *sections,
            (f"<footer>Generated by trustjudge {_e(_version())} on {_e(generated.isoformat(timespec='seconds'))}. "
             "This file is self-contained: it loads nothing and runs no script.</footer>")]
    csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)} · {_e(mode)} audit</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            "<main>\n" + "\n".join(body) + "\n</main>\n</body>\n</html>\n")
