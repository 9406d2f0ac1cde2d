"""``trustjudge score`` and ``trustjudge compare``: judge a file, streaming records out as they finish."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.markup import escape

from ..engine._engine import BACKEND_ERROR
from ..io._items import Item
from .._judge import Judge
from ..modes._registry import Mode, get_mode
from ..io._outputs import readable_input, record_output
from ..engine._scoring import AGGREGATIONS, SCORE_METHODS
from ..modes._base import Task
from ..errors import BackendError, ConfigError
from ..modes._prompts import PairLabels
from ._common import err, is_utf8, print_plan, progress, records_note, warn_top_k
from ._inputs import changed, digest, read_items, scan, stream_items
from . import _calibrated as calibrated
from ._options import (
    MAX_PAIRS_OPTION,
    SCALE_RANGE,
    CalibrationOptions,
    Finite,
    JudgeOptions,
    calibration_options,
    input_options,
    judge_options,
    output_options,
)


class _Summary:
    """Running totals for the end-of-run table (constant memory, whatever the input size)."""

    def __init__(self) -> None:
        self.records = 0
        self.unscored: Counter[str] = Counter()
        self.methods: Counter[str] = Counter()

    def add(self, row: dict[str, Any]) -> None:
        self.records += 1
        method = row.get("method")
        if method:
            if method == "top_k" and not self.methods["top_k"]:
                warn_top_k()
            self.methods[method] += 1
        if row["unscored"]:
            self.unscored[row["unscored"]] += 1
        self.count(row)

    def count(self, row: dict[str, Any]) -> None:
        """The mode's own totals of ``row``."""

    def table(self, j: Judge) -> Table:
        raise NotImplementedError

    def show(self, j: Judge) -> None:
        err.print(self.table(j))
        s = j.stats
        err.print(escape(f"model calls: {s.model_calls} (labels {s.label_calls}, generations {s.generate_calls}); "
                         f"from store: {s.from_store}; store: {j.store.path}"), highlight=False)
        if self.unscored:
            err.print("unscored: " + ", ".join(f"{k} {v}" for k, v in sorted(self.unscored.items())), highlight=False)
        if self.methods:
            err.print("labels read: " + ", ".join(f"{k} {v}" for k, v in sorted(self.methods.items())), highlight=False)
        if s.last_error and self.unscored.get(BACKEND_ERROR):
            err.print(f"[yellow]backend error:[/] {escape(s.last_error)}", highlight=False)

    def check(self, j: Judge) -> None:
        """Fail (exit non-zero) when the judge failed every judgment it was asked for."""
        failed = self.unscored.get(BACKEND_ERROR, 0)
        if failed and failed == self.records:
            cause = j.stats.last_error or "no message"
            raise BackendError(f"every judgment failed ({failed} backend errors; the records say backend_error): "
                               f"{cause}")


class _Scores(_Summary):
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

    def table(self, j: Judge) -> Table:
        table = Table(title=escape(f"Scores ({j.name}, protocol {j.protocol}, scale {j.scale.span})"))
        for col in ("method", "mean", "scored", "unscored"):
            table.add_column(col, justify="right" if col != "method" else "left")
        for m in SCORE_METHODS:
            n = self.counts[m]
            table.add_row(m, f"{self.sums[m] / n:.2f}" if n else "-", str(n), str(self.records - n))
        return table


class _Verdicts(_Summary):
    """Verdict counts per aggregation."""

    def __init__(self) -> None:
        super().__init__()
        self.verdicts: dict[str, Counter[str | None]] = {m: Counter() for m in AGGREGATIONS}

    def count(self, row: dict[str, Any]) -> None:
        for m in AGGREGATIONS:
            self.verdicts[m][row["verdicts"][m]] += 1

    def table(self, j: Judge) -> Table:
        table = Table(title=escape(f"Verdicts ({j.name}, protocol {j.protocol}, both orders)"))
        for col in ("method", "first wins", "second wins", "tie", "unscored"):
            table.add_column(col, justify="right" if col != "method" else "left")
        for m in AGGREGATIONS:
            c = self.verdicts[m]
            table.add_row(m, str(c["first"]), str(c["second"]), str(c["tie"]), str(c[None]))
        return table


def _run(mode: Mode, task_of: Callable[[Judge], Task], per_item: Callable[[Item], int], summary: _Summary,
         items_path: Path, out: Path | None, dry_run: bool, skip_invalid: bool, quiet: bool, judging: JudgeOptions,
         options: dict[str, Any], fmt: str = "auto", max_pairs: int | None = None,
         calibrating: CalibrationOptions | None = None) -> None:
    """Judge a file with ``mode``'s task (``task_of(judge)``), streaming: items are read, judged and written
    chunk by chunk (``max_pairs``: the most pairs an item may have; with ``calibrating``, each record annotated
    with its calibrated verdict as it is written). The judge is ``judging.make(**options)``; ``per_item`` counts
    an item's judgments for the progress bar before it is built (the task's ``size``: no store is opened for a
    file that fails to read)."""
    loaded = calibrated.load(calibrating, mode.name) if calibrating is not None else None
    min_responses = mode.min_responses
    if dry_run:
        items = read_items(items_path, skip_invalid, min_responses, fmt, max_pairs=max_pairs)
        j = judging.make(**options)
        try:
            print_plan(j, items, task_of(j))
        finally:
            j.close()
        return
    sha256 = digest(items_path)
    total = scan(items_path, skip_invalid, min_responses, fmt, per_item, max_pairs=max_pairs)
    if digest(items_path) != sha256:
        raise changed(items_path)
    j = judging.make(**options)
    try:
        task = task_of(j)
        calibrator = calibrated.Calibrator.start(loaded, j, task) if loaded is not None else None
        with record_output(out, "--out") as stream:
            with progress(quiet) as bar:
                bar_task = bar.add_task(f"{mode.name} ({j.name}, {task.protocol})", total=total)
                todo = stream_items(items_path, min_responses, fmt, skip_invalid, sha256, max_pairs=max_pairs)
                ascii_only = not is_utf8(stream)
                for record in j.run(task, todo, progress=lambda n: bar.advance(bar_task, n)):
                    row = record.to_dict()
                    if calibrator is not None:
                        row = calibrator.annotate(row)
                    stream.write(json.dumps(row, ensure_ascii=ascii_only) + "\n")
                    summary.add(row)
                    stream.flush()
        if not quiet:
            summary.show(j)
            records_note(j, summary.records, out, items_path)
        if calibrator is not None:
            calibrator.finish(calibrating.summary if calibrating is not None else None, quiet)
        summary.check(j)
    finally:
        j.close()


def _pair_labels(ctx: click.Context, param: click.Parameter, value: str | None) -> PairLabels | None:
    try:
        return None if value is None else PairLabels.parse(value)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


@click.command("score")
@input_options
@judge_options("score")
@output_options(stdout=True)
@click.option("--scale", type=SCALE_RANGE, default="10", show_default=True,
              help="Rating scale: a top value N (1..N; 10: the default judge's best trade-off, "
                   "bench/results/consistency.md) or an integer range LO-HI (0-5, 0-10).")
@click.option("--distribution", is_flag=True, help="Include each response's full label distribution.")
@calibration_options("score")
def score(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, out: Path | None,
          dry_run: bool, scale: str, distribution: bool) -> None:
    """Score every response under every method (discrete, geval, expected, trustjudge)."""
    judging.guard(items, {"--out": out})
    _run(get_mode("score"), lambda j: j.score_task(), lambda it: len(it.responses), _Scores(), readable_input(items),
         out, dry_run, skip_invalid, quiet, judging, {"scale": scale, "keep_distribution": distribution}, fmt)


@click.command("compare")
@input_options
@judge_options("compare")
@output_options(stdout=True)
@click.option("--delta", default=0.0, show_default=True, type=Finite(min=0.0),
              help="Tie margin for likelihood and ppl aggregation.")
@click.option("--labels", "pair_labels", metavar="LABEL=first|second|tie,...", default=None, callback=_pair_labels,
              help="Verdict labels of your own, each with the preference it stands for (first: the response shown "
                   "as A), e.g. A=first,B=second,BOTH_GOOD=tie,BOTH_BAD=tie; records keep each label's probability. "
                   "Default: A, B, C.")
@MAX_PAIRS_OPTION
@calibration_options("compare")
def compare(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, out: Path | None,
            dry_run: bool, delta: float, pair_labels: PairLabels | None, max_pairs: int,
            calibrating: CalibrationOptions) -> None:
    """Compare pairs in both orders under every aggregation (single, two_pass, likelihood, ppl); with
    --calibration, each verdict also calibrated (and with --target-agreement, kept or abstained on)."""
    judging.guard(items, {"--out": out, "--summary": calibrating.summary}, inputs=(calibrating.path,))
    _run(get_mode("compare"), lambda j: j.compare_task(labels=pair_labels), lambda it: 2 * len(it.all_pairs()),
         _Verdicts(),
         readable_input(items), out, dry_run, skip_invalid, quiet, judging, {"delta": delta}, fmt, max_pairs,
         calibrating)
