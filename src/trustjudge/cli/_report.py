"""``trustjudge report``: audit a file (judging only what the store lacks) and write a self-contained HTML report.

matplotlib is imported when the command runs, so ``trustjudge --help`` does not load it.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from ..io._outputs import readable_input, write_text
from . import _calibrated as calibrated
from ._audit import plan_audit, run_audit
from ._common import err, methods_note, write_records
from ._inputs import read_items
from ._options import (
    MAX_PAIRS_OPTION,
    CalibrationOptions,
    JudgeOptions,
    audit_options,
    calibration_options,
    input_options,
    judge_options,
    output_options,
)


@click.command("report")
@input_options
@judge_options("score", "compare")
@output_options(stdout=False)
@audit_options
@click.option("--html", "html_out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Write the HTML report here (one self-contained file).")
@click.option("--title", default=None, help="Report title (default: 'trustjudge audit report').")
@MAX_PAIRS_OPTION
@calibration_options("compare", summary=False)
def report(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, out: Path | None,
           dry_run: bool, scales: list[int], delta: float, ks: list[int], bootstrap: int, injection: bool,
           html_out: Path, title: str | None, max_pairs: int, calibrating: CalibrationOptions) -> None:
    """Audit ITEMS like `trustjudge audit` and write an HTML report: plots, audit table, ranking, conflicts;
    with --calibration (a compare calibration), also reliability before and after it and the selective-risk
    curve."""
    from ..report._report import DEFAULT_TITLE, render_report

    judging.guard(items, {"--out": out, "--html": html_out}, inputs=(calibrating.path,))
    cal = calibrated.load(calibrating, "compare")
    loaded = read_items(readable_input(items), skip_invalid, 1, fmt, max_pairs=max_pairs)
    j = judging.make()
    extra: list[tuple[str, str, str]] = []
    try:
        if dry_run:
            plan_audit(j, loaded, scales, injection)
            return
        calibrator = calibrated.Calibrator.start(cal, j, j.compare_task()) if cal is not None else None
        run = run_audit(j, loaded, scales=scales, delta=delta, ks=ks, bootstrap=bootstrap, injection=injection,
                        quiet=quiet)
        if calibrator is not None:
            from ..report._trust import calibration_section

            annotated = [calibrator.annotate(r) for r in run.compare_records]
            extra.append(calibration_section(calibrator.evaluation(annotated)))
            if not quiet:
                err.print(escape(calibrated.describe(calibrator.summary())), highlight=False)
        name, used_protocol, calls, from_store = j.name, j.protocol, j.stats.model_calls, j.stats.from_store
        calls_note = j.stats.recorded_note(":")
        calls_text = f"model calls: {calls}{calls_note}, from store: {from_store}"
    finally:
        j.close()
    score_records = [r for rs in run.score_records.values() for r in rs]
    write_records(out, score_records, run.compare_records)
    methods_note([*score_records, *run.compare_records], quiet)

    ranking = None
    try:
        from ..audit._ranking import rank
    except ImportError:  # the ranking module is optional: no ranking section then
        pass
    else:
        try:
            ranking = rank(run.compare_records, run.score_records[max(run.score_records)],
                           bootstrap=bootstrap).to_dict()
        except ValueError as exc:  # e.g. the items name fewer than two systems: the report has no ranking
            if not quiet:
                err.print(escape(f"no ranking: {exc}"), highlight=False)

    page = render_report(run, judge=name, protocol=used_protocol, data=str(items), ranking=ranking,
                         title=title or DEFAULT_TITLE, items=loaded, extra_sections=extra)
    write_text(html_out, page, "--html")
    if not quiet:
        err.print(escape(f"report: {html_out} ({len(page) / 1024:,.0f} KiB); {run.report.items} items, "
                         f"{run.report.pairs} pairs; {calls_text}"), highlight=False)
