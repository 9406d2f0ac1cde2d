"""The drawing kit of every report page: escaping and number formats, the stylesheet, plots as inline SVG.

Plots are drawn by matplotlib's object API on an Agg canvas (never pyplot, so no display and no global
backend change) under :data:`_RC` (glyphs as paths, deterministic ids, mathtext off, so a ``$`` in a
system name is printed as is), and embedded as ``<svg>`` without prolog, metadata or namespace URLs, their
ids prefixed to be unique per page. :mod:`trustjudge.report._report`, :mod:`trustjudge.report._modes`
and :mod:`trustjudge.report._trust` build their pages from these pieces.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

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


# -- text and numbers -------------------------------------------------------------------------------------
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
