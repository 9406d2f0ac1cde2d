"""What every command's output shares: the error console, messages, progress bar, plan table, records."""

from __future__ import annotations

import json
import math
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from .._judge import Judge
from ..backends import DEFAULT_JUDGE
from ..io._items import Item
from ..io._outputs import is_stdio, record_output
from ..modes._base import Task
from ..modes._registry import MODES

err = Console(stderr=True, soft_wrap=True)


def fail(message: str) -> int:
    """Print ``error: message`` and return the exit status of a failed command (2)."""
    err.print(f"[red]error:[/] {escape(message)}", highlight=False)
    return 2


class _Bars(Progress):
    """Progress bars that end on their real totals: a bar whose total was an upper bound (claims extracted, a
    cascade's later tiers) or unknown reads done/done when its work finished, never 8/136 or 24/?."""

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            for bar in self.tasks:
                self.update(bar.id, total=bar.completed)
            self.refresh()
        super().__exit__(exc_type, exc, tb)


def progress(quiet: bool) -> Progress:
    """The progress bar on standard error (hidden with ``quiet``)."""
    return _Bars(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=err, disable=quiet)


def wide_console() -> Console:
    """Standard output at least 120 columns wide (the audit and ranking tables)."""
    return Console(width=max(Console().width, 120))


def fmt_rate(value: float) -> str:
    """A rate with three decimals; nan as ``-``."""
    return "-" if value != value else f"{value:.3f}"


def records_note(j: Judge, count: int, out: Path | None, items: Path | None = None) -> None:
    """Say where a command's records went and how to look at the stored judgments behind them."""
    where = "standard output" if out is None or is_stdio(out) else str(out)
    store = shlex.quote(str(j.store.path))
    judge = "" if j.name == DEFAULT_JUDGE else f" --judge {shlex.quote(j.name)}"
    look = f"trustjudge store stats --store {store}"
    if items is not None:
        look += f"; one item's prompts and outputs: trustjudge store show {shlex.quote(str(items))} ITEM_ID{judge} " \
                f"--store {store}"
    err.print(escape(f"records: {count:,} written to {where}; the judgments behind them are in {j.store.path} "
                     f"(look: {look})"), highlight=False, soft_wrap=True)


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 07 min``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def print_plan(j: Judge, items: list[Item], task: Task, title: str | None = None) -> None:
    """Print what judging ``items`` with ``task`` would take (``--dry-run``): judgments, stored, calls, tokens,
    time. The table is titled ``title``, by default the task's mode."""
    plan = j.plan(items, task)
    title = title or task.kind
    table = Table(title=escape(f"Plan: {title} with {j.name} ({plan.protocol})"))
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("judgments (prompts)", f"{plan.judgments:,}")
    mode = MODES.get(task.kind)
    several = [it for it in items if len(it.responses) >= 2]
    if mode is not None and mode.min_responses >= 2 and several:
        # Pairwise work grows with the square of the responses: say where it comes from.
        sizes = [len(it.all_pairs()) for it in several]
        top = max(range(len(several)), key=lambda k: sizes[k])
        table.add_row("pairs (each judged in both orders)", f"{sum(sizes):,}")
        table.add_row("most pairs in one item", f"{sizes[top]:,} ({escape(several[top].id)}, "
                                                f"{len(several[top].responses)} responses)")
    table.add_row("already in the store", f"{plan.stored:,}")
    table.add_row("unscorable without a call", f"{plan.unscorable:,}")
    if getattr(j.backend, "calls_model", True):
        table.add_row("model calls to make", f"{plan.model_calls:,}")
    else:  # a recorded judge answers from its file: lookups, not model calls (as the run's summary counts them)
        table.add_row("model calls to make", "0")
        table.add_row("recorded lookups to make", f"{plan.model_calls:,}")
    table.add_row("prompt tokens (all / to run)", f"{plan.prompt_tokens:,} / {plan.prompt_tokens_to_run:,}")
    sp = plan.speed
    speed = f"{sp.prompt_tokens_per_s:,.0f} prompt tokens/s"
    if sp.seconds_per_call:
        speed += f" + {sp.seconds_per_call:.2f} s per call"
    table.add_row("speed", escape(speed))
    table.add_row("speed from", escape(sp.source))
    eta = plan.estimated_seconds
    extra = " (critiques at max-new-tokens: an upper bound)" if plan.protocol == "cot" and plan.model_calls else ""
    table.add_row("estimated time", f"{duration(eta)}{extra}" if math.isfinite(eta) else "unknown")
    if task.plan_note:
        table.add_row("not counted", escape(task.plan_note))
    Console().print(table)


def warn_top_k() -> None:
    """Say once per run that labels came from the top-k log-probabilities (``-q`` does not hide it)."""
    err.print("[yellow]warning:[/] labels are read from the judge server's top-k log-probabilities, not exactly: "
              "a label outside the top-k gets probability 0 and scores can differ from an exact judge "
              "(records say \"label_method\": \"top_k\"; see docs/judges.md for servers with exact labels)",
              highlight=False)


def methods_note(records: list[Mapping[str, Any]], quiet: bool) -> None:
    """Warn if any record's labels came from the top-k; unless quiet, count each method."""
    methods = Counter(r["label_method"] for r in records if r.get("label_method"))
    if methods["top_k"] or methods["top_k_first"]:
        warn_top_k()
    if methods and not quiet:
        err.print("labels read: " + ", ".join(f"{k} {v}" for k, v in sorted(methods.items())), highlight=False)


def write_records(out: Path | None, scores: Iterable[Mapping[str, Any]],
                  compares: Iterable[Mapping[str, Any]]) -> None:
    """Write the score and compare records a result rests on to ``--out`` (JSONL, or Parquet by extension;
    a ``kind`` each)."""
    if out is None:
        return
    with record_output(out, "--out") as fh:
        for rec in scores:
            fh.write(json.dumps({"kind": "score", **rec}) + "\n")
        for rec in compares:
            fh.write(json.dumps({"kind": "compare", **rec}) + "\n")


def is_utf8(stream: Any) -> bool:
    """Whether ``stream`` encodes UTF-8 (else JSON is written with ``\\u`` escapes)."""
    return str(getattr(stream, "encoding", "") or "").lower().replace("_", "-") in ("utf-8", "utf8")
