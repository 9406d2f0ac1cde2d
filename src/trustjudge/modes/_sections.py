"""A mode's report as plain data: sections of notes, tables (rows of cells) and figures (data series).

A mode's :meth:`~trustjudge.modes._base.Task.report_sections` hook turns its audit (JSON data) into a list of
:class:`Section`; :mod:`trustjudge.report` draws them (HTML, plots), so a mode holds no HTML and no plotting
code. Every text here is plain text: the report escapes it.

A table cell is a ``str`` (shown as given), ``None`` (shown as a dash), an ``int`` (a count: ``1,234``) or a
``float`` (three decimals; a dash where it is not finite); :func:`number`, :func:`count`, :func:`interval` and
:func:`of` give the same texts where a section formats a cell itself.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Bars", "Bin", "Block", "Cell", "Column", "Group", "Heading", "Note", "Reliability", "Row", "Section",
           "Series", "Table", "count", "fields_section", "interval", "mapping", "number", "of", "real"]

Cell = str | int | float | None


# -- numbers as text --------------------------------------------------------------------------------------
def real(value: Any) -> float | None:
    """``value`` as a finite float, else ``None``."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def number(value: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals; a dash for none."""
    x = real(value)
    return "–" if x is None else f"{x:.{digits}f}"


def count(value: Any) -> str:
    """A count with thousands separators; a dash for none."""
    x = real(value)
    return "–" if x is None else f"{x:,.0f}"


def interval(value: Any) -> str:
    """A ``[lo, hi]`` pair as ``lo – hi`` (three decimals); empty for anything else."""
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 2:
        lo, hi = real(value[0]), real(value[1])
        if lo is not None and hi is not None:
            return f"{lo:.3f} – {hi:.3f}"
    return ""


def of(part: Any, whole: Any) -> str:
    """``part / whole``, as counts."""
    return f"{count(part)} / {count(whole)}"


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` where it is a mapping, else an empty one (audits read back from JSON may lack any key)."""
    return value if isinstance(value, Mapping) else {}


def cell_text(value: Cell) -> str:
    """How a cell reads (see the module docstring)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return count(value)
    return number(value)


# -- blocks -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Note:
    """A short paragraph of plain text."""

    text: str


@dataclass(frozen=True)
class Heading:
    """A sub-heading inside a section."""

    text: str


@dataclass(frozen=True)
class Column:
    label: str
    numeric: bool = False
    """Right-aligned (numbers)."""


@dataclass(frozen=True)
class Row:
    cells: tuple[Cell, ...]
    highlighted: bool = False
    """Drawn stressed (TrustJudge's own method, say)."""


@dataclass(frozen=True)
class Group:
    """Consecutive rows of a table, under a title spanning the columns (``None``: no title)."""

    rows: tuple[Row, ...]
    title: str | None = None


@dataclass(frozen=True)
class Table:
    columns: tuple[Column, ...]
    groups: tuple[Group, ...]
    name: str = "table"
    """What the table is (a word: the HTML table's class)."""

    @staticmethod
    def of(columns: Sequence[tuple[str, bool]], rows: Iterable[Sequence[Cell]], name: str = "table") -> Table:
        """A table of one untitled group: ``columns`` as (label, numeric), ``rows`` of cells."""
        return Table(tuple(Column(label, numeric) for label, numeric in columns),
                     (Group(tuple(Row(tuple(r)) for r in rows)),), name)


@dataclass(frozen=True)
class Bin:
    """One bin of a reliability diagram: predicted probabilities in ``[lo, hi)``."""

    mean_prob: float
    frequency: float
    count: int
    lo: float | None = None
    hi: float | None = None


@dataclass(frozen=True)
class Reliability:
    """A reliability diagram: binned predicted probability of ``what`` against the observed frequency of the
    ``positive`` label, with the count per bin."""

    id: str
    title: str
    caption: str
    what: str
    positive: str
    bins: tuple[Bin, ...]
    ece: float | None = None
    brier: float | None = None


@dataclass(frozen=True)
class Series:
    """One bar per category (``None``: no value)."""

    label: str
    values: tuple[float | None, ...]


@dataclass(frozen=True)
class Bars:
    """Grouped bars: a group per category, a bar per series."""

    id: str
    title: str
    caption: str
    heading: str
    """The plot's own title."""
    categories: tuple[str, ...]
    series: tuple[Series, ...]
    xlabel: str = ""
    ylabel: str = ""
    ylim: tuple[float, float] | None = None
    legend: str | None = None
    """The legend's title."""


Block = Note | Heading | Table | Reliability | Bars


@dataclass(frozen=True)
class Section:
    """One section of a mode's report."""

    id: str
    """A word, unique in the page (the anchor of the page's navigation)."""
    title: str
    blocks: tuple[Block, ...] = ()
    nav: str | None = None
    """Its name in the page's navigation (default: the id, capitalised)."""
    appendix: bool = False
    """Drawn after the sections that others add to the page (the calibration of ``--calibration``)."""


def fields_section(audit: Mapping[str, Any], known: Iterable[str] = (), *, id: str = "other",
                   title: str = "Other fields") -> Section | None:
    """The audit's fields other than ``known``, one row each (their JSON, shortened), or ``None``: a mode's
    sections end with it, so what its report does not draw is still shown."""
    skip = set(known)
    rest = {k: v for k, v in audit.items() if k not in skip}
    if not rest:
        return None
    rows = [(str(k), _short(json.dumps(v, default=str, ensure_ascii=False), 400)) for k, v in rest.items()]
    return Section(id, title, (Table.of([("field", False), ("value", False)], rows, "other"),), appendix=True)


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
