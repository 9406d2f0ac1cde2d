"""``trustjudge summary``: each system's headline value, with a bootstrap interval over items, from records.

The records are the JSON lines any judging command writes (``--out``); nothing is judged. The table is the
one ``trustjudge rank --mode`` and ``trustjudge run`` print (:func:`show_summary`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from ..audit._summary import Summary, summarize, summary_rows
from ..errors import ConfigError, InputError
from ..io._outputs import readable_input, write_text
from ..modes import get_mode
from ._common import err, fail, wide_console

BOOTSTRAP = click.option("--bootstrap", default=1000, show_default=True, type=click.IntRange(min=0),
                         help="Bootstrap resamples over items for the 95% intervals (0: none).")
SEED = click.option("--seed", "summary_seed", default=0, show_default=True, type=click.IntRange(min=0),
                    help="Bootstrap seed (the same seed gives the same intervals).")


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON lines file of records (blank lines skipped); bad lines name file and line."""
    with open(path, encoding="utf-8-sig") as fh:
        for line, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except ValueError as exc:
                raise InputError(f"invalid JSON: {exc}", file=str(path), line=line) from None
            if not isinstance(record, dict):
                raise InputError(f"a record is a JSON object, got {type(record).__name__}", file=str(path),
                                 line=line)
            yield record


def show_summary(summary: Summary, title: str | None = None, *, stderr: bool = False) -> None:
    """Print the per-system table on standard output (``stderr``: on standard error, where records may be on
    standard output)."""
    what = f"{summary.mode}: {summary.metric}"
    interval = f"95% CI over items (B={summary.bootstrap})" if summary.bootstrap else "no bootstrap"
    table = Table(title=escape(title or f"Per-system summary ({what}; {interval})"))
    columns = ["system", summary.metric, "95% CI", "scored", "items", "unscored"]
    if any(s.bt is not None for s in summary.systems):
        columns += ["BT log-strength", "BT 95% CI"]
    for col in columns:
        table.add_column(escape(col), justify="left" if col == "system" else "right")
    for row in summary_rows(summary):
        table.add_row(*(escape(c) for c in row))
    (err if stderr else wide_console()).print(table)


def write_summary(summary: Summary, path: Path, option: str, **extra: Any) -> None:
    write_text(path, json.dumps({**extra, **summary.to_dict()}, indent=2) + "\n", option)


def _known_mode(name: str | None) -> str | None:
    """``--mode``: a mode by name, loaded (a plug-in registers its summary when loaded)."""
    if name is not None:
        try:
            get_mode(name)
        except ConfigError as exc:
            raise click.BadParameter(str(exc)) from None
    return name


@click.command("summary")
@click.argument("records", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--mode", default=None, callback=lambda ctx, param, value: _known_mode(value),
              help="The mode to summarise (any mode with a summary, a plug-in's too) "
                   "[default: that of the first judgment record].")
@click.option("--metric", default=None,
              help="The headline value: score/criteria: expected, trustjudge, geval, discrete; checklist: "
                   "satisfaction, p_all; claims: precision, f1, recall, f1_at_k; compare/criteria-compare: win_rate, "
                   "verdict [default: the first; claims with matching: f1].")
@click.option("--method", default="likelihood", show_default=True,
              help="With --metric verdict on compare records: the aggregation whose verdict counts.")
@BOOTSTRAP
@SEED
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the summary as JSON here.")
def summary(records: Path, mode: str | None, metric: str | None, method: str, bootstrap: int, summary_seed: int,
            json_out: Path | None) -> None:
    """Each system's headline value from RECORDS (JSON lines of any mode), with a 95% bootstrap interval over
    items and its unscored count; a system is the response's `system` field, else its id."""
    rows = list(read_records(readable_input(records)))
    try:
        result = summarize(rows, mode=mode, metric=metric, method=method, bootstrap=bootstrap, seed=summary_seed)
    except ValueError as exc:
        raise SystemExit(fail(f"{records}: {exc}")) from None
    show_summary(result)
    if json_out is not None:
        write_summary(result, json_out, "--json", records=str(records))


class SystemTally:
    """``--summary`` on a judging command: keeps the records written (only when a summary file is asked) and
    writes each system's headline value with its interval; with a calibration, beside the calibration summary
    (whose keys stay as they were, the per-system summary under ``per_system``)."""

    def __init__(self, path: Path | None, mode: str) -> None:
        self.path = path
        self.mode = mode
        self.rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        if self.path is not None:
            self.rows.append(row)

    def finish(self, quiet: bool, calibration: dict[str, Any] | None = None) -> None:
        if self.path is None:
            return
        data: dict[str, Any]
        try:
            result = summarize(self.rows, mode=self.mode, bootstrap=1000, seed=0) if self.rows else None
        except ValueError as exc:  # the records are written already: say why there is no summary
            raise SystemExit(fail(f"--summary: {exc}")) from None
        per_system = result.to_dict() if result is not None else {"mode": self.mode, "systems": []}
        data = {**calibration, "per_system": per_system} if calibration is not None else per_system
        write_text(self.path, json.dumps(data, indent=2) + "\n", "--summary")
        if result is not None and not quiet:
            show_summary(result, stderr=True)
