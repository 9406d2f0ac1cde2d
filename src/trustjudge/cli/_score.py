"""``trustjudge score`` and ``trustjudge compare``: their end-of-run tables and extra options (the commands
themselves are built from the mode registry, :mod:`trustjudge.cli._mode_command`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from .._judge import Judge
from ..engine._engine import BACKEND_ERROR
from ..engine._scoring import AGGREGATIONS, SCORE_METHODS
from ..errors import BackendError
from ..modes._base import Task
from ._common import err, records_note, warn_top_k
from ._mode_command import Hooks, Summary


class _Tabled(Summary):
    """Running totals for the end-of-run table (constant memory, whatever the input size)."""

    def __init__(self) -> None:
        super().__init__()
        self.methods: Counter[str] = Counter()

    def add(self, row: dict[str, Any]) -> None:
        super().add(row)
        method = row.get("label_method")
        if method:
            if method.startswith("top_k") and not (self.methods["top_k"] or self.methods["top_k_first"]):
                warn_top_k()
            self.methods[method] += 1
        self.count(row)

    def count(self, row: dict[str, Any]) -> None:
        """The mode's own totals of ``row``."""

    def table(self, j: Judge, task: Task) -> Table:
        raise NotImplementedError

    def show(self, j: Judge, task: Task, out: Path | None, items: Path, quiet: bool) -> None:
        if quiet:
            return
        err.print(self.table(j, task))
        s = j.stats
        err.print(escape(f"model calls: {s.model_calls} (labels {s.label_calls}, generations {s.generate_calls})"
                         f"{s.recorded_note(':', '; ')}; from store: {s.from_store}; store: {j.store.path}"),
                  highlight=False)
        if self.unscored:
            err.print("unscored: " + ", ".join(f"{k} {v}" for k, v in sorted(self.unscored.items())), highlight=False)
        if self.methods:
            err.print("labels read: " + ", ".join(f"{k} {v}" for k, v in sorted(self.methods.items())), highlight=False)
        if s.last_error and self.unscored.get(BACKEND_ERROR):
            err.print(f"[yellow]backend error:[/] {escape(s.last_error)}", highlight=False)
        records_note(j, self.records, out, items)

    def check(self, j: Judge) -> None:
        """Fail (exit non-zero) when the judge failed every judgment it was asked for."""
        failed = self.unscored.get(BACKEND_ERROR, 0)
        if failed and failed == self.records:
            cause = j.stats.last_error or "no message"
            raise BackendError(f"every judgment failed ({failed} backend errors; the records say backend_error): "
                               f"{cause}")


class _Scores(_Tabled):
    """Mean score per method."""

    def __init__(self) -> None:
        super().__init__()
        self.sums: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()

    def count(self, row: dict[str, Any]) -> None:
        for m in SCORE_METHODS:
            value = row["scores"][m]
            if value is not None:
                self.sums[m] += value
                self.counts[m] += 1

    def table(self, j: Judge, task: Task) -> Table:
        span = getattr(task, "scale", j.scale).span
        table = Table(title=escape(f"Scores ({j.name}, protocol {task.protocol}, scale {span})"))
        for col in ("method", "mean", "scored", "unscored"):
            table.add_column(col, justify="right" if col != "method" else "left")
        for m in SCORE_METHODS:
            n = self.counts[m]
            table.add_row(m, f"{self.sums[m] / n:.2f}" if n else "-", str(n), str(self.records - n))
        return table


class _Verdicts(_Tabled):
    """Verdict counts per aggregation."""

    def __init__(self) -> None:
        super().__init__()
        self.verdicts: dict[str, Counter[str | None]] = {m: Counter() for m in AGGREGATIONS}

    def count(self, row: dict[str, Any]) -> None:
        for m in AGGREGATIONS:
            self.verdicts[m][row["verdicts"][m]] += 1

    def table(self, j: Judge, task: Task) -> Table:
        table = Table(title=escape(f"Verdicts ({j.name}, protocol {task.protocol}, both orders)"))
        for col in ("method", "first wins", "second wins", "tie", "unscored"):
            table.add_column(col, justify="right" if col != "method" else "left")
        for m in AGGREGATIONS:
            c = self.verdicts[m]
            table.add_row(m, str(c["first"]), str(c["second"]), str(c["tie"]), str(c[None]))
        return table


SCORE = Hooks(doc="Score every response under every method (discrete, geval, expected, trustjudge).", summary=_Scores)
COMPARE = Hooks(
    doc="Compare pairs in both orders under every aggregation (single, two_pass, likelihood, ppl); with "
        "--calibration, each verdict also calibrated (and with --target-agreement, kept or abstained on).",
    summary=_Verdicts)
