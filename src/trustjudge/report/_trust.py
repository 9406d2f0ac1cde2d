"""The calibration section of the HTML reports: reliability before and after calibration, and the selective-risk
curve.

:func:`calibration_section` reads what :func:`trustjudge.audit._trust.evaluation` returns (or its JSON; missing keys
and null numbers are tolerated) and returns the section's HTML, which :func:`~trustjudge.report._report.render_report`
and :func:`~trustjudge.report._modes.render_mode_report` place among their own (``sections=``). Plots, drawn
like the reports' others (inline SVG from matplotlib on an Agg canvas, every text escaped):

- ``plot-calibration-reliability``: the top class's confidence (binned) against how often it agrees with
  the human, before calibration (grey, points ``...-before-<i>``) and after (blue, ``...-after-<i>``), with
  the diagonal (``...-diagonal``);
- ``plot-selective-risk``: agreement with humans on the kept verdicts against coverage, keeping the most
  confident first, by calibrated (``...-calibrated``) and raw confidence (``...-raw``), with the target
  (``...-target``) and the chosen threshold's point (``...-chosen``) when a target was given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..audit._levels import complement, marginal_warning, quote
from ._html import _RC, _e, _figure, _figure_html, _fmt, _no_data, _num

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SECTION_ID = "calibrated"
PLOT_IDS = ("plot-calibration-reliability", "plot-selective-risk")
_RAW, _CAL = "#999999", "#0072B2"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _bins(side: Mapping[str, Any]) -> list[tuple[float, float, int]]:
    out = []
    for b in side.get("reliability") or []:
        if isinstance(b, Mapping):
            x, y, n = _num(b.get("mean_prob")), _num(b.get("frequency")), _num(b.get("count"))
            if x is not None and y is not None and n:
                out.append((x, y, int(n)))
    return out


def _curve(points: Any) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for p in points or []:
        if isinstance(p, Mapping) and _num(p.get("coverage")) is not None and _num(p.get("agreement")) is not None:
            xs.append(float(_num(p["coverage"]) or 0.0))
            ys.append(float(_num(p["agreement"]) or 0.0))
    return xs, ys


def _plot_reliability(data: Mapping[str, Any]) -> Figure:
    before, after = _map(data.get("before")), _map(data.get("after"))
    fig = _figure(6.4, 4.6)
    ax = fig.subplots()
    ax.set_title(f"Reliability of the top class: ECE {_fmt(before.get('ece'))} before, {_fmt(after.get('ece'))} "
                 f"after calibration (n={_fmt(data.get('n'), 0)}, {data.get('source', 'records')})")
    ax.set_xlabel("confidence of the verdict (bin mean)")
    ax.set_ylabel("share agreeing with the human")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(-0.03, 1.08)
    ax.grid(True)
    sides = [("before", "raw probabilities", _RAW, _bins(before)), ("after", "calibrated", _CAL, _bins(after))]
    if not any(b for *_, b in sides):
        _no_data(ax, "no verdicts with human labels")
        return fig
    ax.plot([0, 1], [0, 1], linestyle="--", color="#555555", linewidth=1.0, label="perfect calibration",
            gid="diagonal")
    for name, label, color, bins in sides:
        if not bins:
            continue
        xs, ys = [b[0] for b in bins], [b[1] for b in bins]
        ax.plot(xs, ys, color=color, linewidth=1.2, label=label)
        for i, (x, y, n) in enumerate(bins):
            ax.plot([x], [y], "o", color=color, markersize=3 + min(6.0, n ** 0.5), gid=f"{name}-{i}")
    ax.legend(loc="upper left", frameon=False)
    return fig


def _plot_risk(data: Mapping[str, Any]) -> Figure:
    fig = _figure(6.4, 4.2)
    ax = fig.subplots()
    selection = _map(data.get("selection"))
    ax.set_title("Selective verdicts: agreement with humans on the kept ones against coverage")
    ax.set_xlabel("coverage (share of verdicts kept, most confident first)")
    ax.set_ylabel("agreement on the kept verdicts")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(-0.03, 1.05)
    ax.grid(True)
    cal = _curve(data.get("risk_curve"))
    raw = _curve(data.get("risk_curve_raw"))
    if not cal[0]:
        _no_data(ax, "no verdicts with human labels")
        return fig
    if raw[0]:
        ax.step(*raw, where="post", color=_RAW, linewidth=1.0, label="by raw confidence", gid="raw")
    ax.step(*cal, where="post", color=_CAL, linewidth=1.5, label="by calibrated confidence", gid="calibrated")
    target = _num(selection.get("target_agreement"))
    if target is not None:
        ax.axhline(target, linestyle="--", color="#D55E00", linewidth=1.0,
                   label=f"target {quote(target)} (delta {quote(selection.get('delta'))})", gid="target")
        coverage, agreement = _num(selection.get("coverage")), _num(selection.get("agreement"))
        if coverage is not None and agreement is not None and coverage > 0:
            ax.plot([coverage], [agreement], "D", color="#D55E00", markersize=7, gid="chosen",
                    label=f"chosen threshold {_fmt(selection.get('threshold'))}")
    ax.legend(loc="lower left", frameon=False)
    return fig


def _rows(rows: Sequence[tuple[str, str, str]]) -> str:
    body = "".join(f'<tr><td>{_e(a)}</td><td class="num">{_e(b)}</td><td>{_e(c)}</td></tr>' for a, b, c in rows)
    return ('<table class="metrics"><thead><tr><th>measure</th><th class="num">value</th><th>reading</th></tr>'
            f"</thead><tbody>{body}</tbody></table>")


def calibration_section(data: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(id, title, html)`` of the calibration section for an :func:`~trustjudge.audit._trust.evaluation` dict."""
    import matplotlib

    before, after = _map(data.get("before")), _map(data.get("after"))
    cal, selection = _map(data.get("calibration")), _map(data.get("selection"))
    source = str(data.get("source", "records"))
    where = ("the calibration set itself (no labelled verdicts among the records): the calibrated side is "
             "in-sample, so optimistic" if source == "calibration set"
             else "the labelled verdicts of these records")
    with matplotlib.rc_context(_RC):
        figures = [
            _figure_html(PLOT_IDS[0], "Reliability before and after calibration",
                         _e("Verdicts binned by the confidence of their top class (equal-width bins); each point is "
                            "a bin's mean confidence against the share of its verdicts that agree with the human "
                            "label, sized by its count. Grey: the judge's raw probabilities; blue: calibrated. "
                            "The dashed diagonal is perfect calibration."), _plot_reliability(data)),
            _figure_html(PLOT_IDS[1], "Selective-risk curve",
                         _e("Keeping the most confident verdicts first: the agreement with humans on those kept "
                            "against the share kept. The dashed line is the target; the diamond is the threshold "
                            "chosen on the calibration set by fixed-sequence testing."), _plot_risk(data)),
        ]
    overridden = cal.get("overridden") or []
    rows = [("measured on", f"{_fmt(data.get('n'), 0)} verdicts", where),
            ("calibration", f"{cal.get('method', '?')}, n={_fmt(cal.get('n'), 0)}",
             f"fitted for judge {cal.get('judge', '?')} (data {cal.get('data_hash', '?')})"
             + (f"; accepted despite a mismatch of {', '.join(map(str, overridden))}" if overridden else "")),
            ("ECE before / after", f"{_fmt(before.get('ece'))} / {_fmt(after.get('ece'))}",
             "expected calibration error of the top class (lower is better)"),
            ("Brier before / after", f"{_fmt(before.get('brier'))} / {_fmt(after.get('brier'))}",
             "squared distance to the human class (lower is better)"),
            ("accuracy before / after", f"{_fmt(before.get('accuracy'))} / {_fmt(after.get('accuracy'))}",
             "the most probable class against the human label")]
    if selection:
        delta = _num(selection.get("delta"))
        rows += [("target agreement", quote(selection.get("target_agreement")),
                  "the procedure's guarantee, over calibration sets: with probability >= "
                  f"{'?' if delta is None else complement(delta)} it keeps only verdicts agreeing with humans at "
                  "least this often"),
                 ("threshold", _fmt(selection.get("threshold"), 4), "keep a verdict whose calibrated confidence "
                                                                   "is at least this"),
                 ("coverage here", _fmt(selection.get("coverage")), "share of these verdicts kept"),
                 ("agreement on kept here", _fmt(selection.get("agreement")), "on these verdicts"),
                 ("calibration kept", f"{_fmt(selection.get('calibration_kept'), 0)} / "
                                      f"{_fmt(selection.get('calibration_n'), 0)}",
                  f"in-sample, after selection (optimistic): agreement {_fmt(selection.get('calibration_agreement'))}, "
                  f"Clopper-Pearson bound {_fmt(selection.get('agreement_lower_bound'))}"
                  + (f"; tested on these units, the selection map fitted on "
                     f"{_fmt(selection['selection'].get('fit_units'), 0)} others"
                     if isinstance(selection.get("selection"), dict) else ""))]
        warning = marginal_warning(selection) if delta is not None else None
        if warning is not None:
            rows.append(("barely passed", f"p-value {_fmt(selection.get('p_value'), 3)}", warning))
    html = "\n".join([f'<section id="{SECTION_ID}"><h2>Calibrated verdicts</h2>',
                      f'<p class="note">{_e("Measured on " + where + ".")}</p>', *figures, _rows(rows),
                      "</section>"])
    return SECTION_ID, "Calibration", html
