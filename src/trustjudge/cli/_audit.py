"""``trustjudge audit``: judge what the store lacks, then audit consistency and agreement with human labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from .._judge import AuditRun, Judge
from ..audit import _audit
from ..audit._injection import injected
from ..io._items import Item
from ..io._outputs import readable_input, write_text
from ._common import err, fmt_rate, methods_note, print_plan, progress, wide_console, write_records
from ._inputs import read_items
from ._options import (
    MAX_PAIRS_OPTION,
    JudgeOptions,
    audit_options,
    input_options,
    judge_options,
    output_options,
    parse_deltas,
)


def plan_audit(j: Judge, items: list[Item], scales: list[int], injection: bool = False) -> None:
    """Print the plan of an audit (``--dry-run``): the pointwise judgments per scale (with ``injection``, those
    of the injected responses too), then the pairwise ones."""
    for points in scales:
        print_plan(j, items, j.score_task(points), f"score ({points}-point)")
        if injection:
            print_plan(j, injected(items, points), j.score_task(points), f"score ({points}-point, injected)")
    print_plan(j, [it for it in items if len(it.responses) >= 2], j.compare_task())


def run_audit(j: Judge, items: list[Item], *, scales: list[int], delta: float, ks: list[int], bootstrap: int,
              injection: bool, quiet: bool) -> AuditRun:
    """Judge what the store lacks for an audit of ``items``, with a progress bar, and audit it."""
    with progress(quiet) as bar:
        task = bar.add_task(f"audit ({j.name}, {j.protocol})", total=j.audit_judgments(items, scales, injection))
        return j.audit(items, scales=scales, delta=delta, ks=ks, bootstrap=bootstrap,
                       progress=lambda n: bar.advance(task, n), injection=injection)


def _sweep(result: AuditRun, deltas: list[float]) -> dict[str, Any]:
    """Print the conflict ratio at each tolerance; return it as JSON data."""
    sweep = Table(title="Conflict ratio by tolerance delta")
    sweep.add_column("scores x verdicts")
    for d in deltas:
        sweep.add_column(f"delta={d:g}", justify="right")
    payload: dict[str, Any] = {}
    for points, records in result.score_records.items():
        for method in ("discrete", "geval", "expected", "trustjudge"):
            for agg in ("two_pass", "likelihood"):
                res = _audit.delta_sweep(records, result.compare_records, method, agg, deltas)
                sweep.add_row(f"{points}pt {method} x {agg}", *(fmt_rate(r.ratio) for r in res))
                payload[f"{points}/{method}/{agg}"] = [
                    {"delta": r.delta, "ratio": None if r.ratio != r.ratio else r.ratio,
                     "conflicts": r.conflicts, "counted": r.counted} for r in res]
    wide_console().print(sweep)
    return payload


@click.command("audit")
@input_options
@judge_options("score", "compare")
@output_options(stdout=False)
@audit_options
@click.option("--delta-sweep", default="", callback=lambda c, p, v: parse_deltas(v, p),
              help="Comma-separated deltas: CR for each (e.g. 0,1,2,5).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the audit as JSON here.")
@MAX_PAIRS_OPTION
def audit(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, out: Path | None,
          dry_run: bool, scales: list[int], delta: float, ks: list[int], bootstrap: int, injection: bool,
          delta_sweep: list[float], json_out: Path | None, max_pairs: int) -> None:
    """Judge what the store lacks, then audit consistency and agreement with human labels.

    One table, a row per method: conflict ratio of every scoring method against every aggregation,
    NTR_k with circular/equivalence splits and tie rates, swap flips, position and length bias,
    agreement with human labels (with bootstrap intervals over items), and unscored counts.
    """
    judging.guard(items, {"--out": out, "--json": json_out})
    loaded = read_items(readable_input(items), skip_invalid, 1, fmt, max_pairs=max_pairs)
    j = judging.make()
    try:
        if dry_run:
            plan_audit(j, loaded, scales, injection)
            return
        result = run_audit(j, loaded, scales=scales, delta=delta, ks=ks, bootstrap=bootstrap, injection=injection,
                           quiet=quiet)
        report = result.report
        table = Table(title=escape(f"Audit of {j.name} (protocol {j.protocol}) on {items}: {report.items} items, "
                                   f"{report.pairs} pairs, delta {delta}, 95% bootstrap CI over items "
                                   f"(B={bootstrap})"))
        for col in ("section", "method", "metric", "value", "95% CI", "n"):
            table.add_column(col, justify="right" if col in ("value", "95% CI", "n") else "left")
        for section, method, metric, value, lo, hi, n in report.rows():
            ci = f"{lo:.3f}-{hi:.3f}" if lo == lo and hi == hi else ""
            shown = f"{value:.0f}" if section == "unscored" else fmt_rate(value)
            table.add_row(escape(section), escape(method), escape(metric), shown, ci, f"{n:,}")
        wide_console().print(table)
        payload = report.to_dict()
        if delta_sweep:
            payload["delta_sweep"] = _sweep(result, delta_sweep)
        payload.update(judge=j.name, protocol=j.protocol, input=str(items), scales=scales)
        if json_out is not None:
            write_text(json_out, json.dumps(payload, indent=2) + "\n", "--json")
        write_records(out, (r for rs in result.score_records.values() for r in rs), result.compare_records)
        methods_note([*(r for rs in result.score_records.values() for r in rs), *result.compare_records], quiet)
        if not quiet:
            s = j.stats
            err.print(escape(f"model calls: {s.model_calls}{s.recorded_note(':', '; ')}; from store: {s.from_store}; "
                             f"store: {j.store.path}"),
                      highlight=False)
    finally:
        j.close()
