"""``trustjudge criteria``, ``checklist`` and ``claims``: the judging modes, streaming records out.

Both read the same items as ``score`` (with ``criteria`` / ``checklist`` fields, or a ``--suite`` file that
gives them to items carrying none), take every judge and engine option, resume from the store, and with
``--audit`` also write the mode's audit (JSON) after the records (``--report``: as a self-contained HTML page).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from ..engine._engine import BACKEND_ERROR
from ..io._items import Item, Suite, load_suite
from .._judge import Judge
from ..modes._audits import checklist_audit, claims_audit, claims_sensitivity, criteria_audit, grounding_audit
from ..report._modes import render_mode_report
from ..io._outputs import atomic_output, readable_input, record_output, write_text
from ..modes._prompts import YES_NO, LabelSet
from ..modes._base import Task, check_item
from ..report._trust import calibration_section
from ..errors import BackendError
from . import _calibrated as calibrated
from ._common import err, is_utf8, print_plan, progress, records_note
from ._inputs import changed, digest, read_items, scan, stream_items
from ._options import (
    MAX_PAIRS_OPTION,
    CalibrationOptions,
    Finite,
    JudgeOptions,
    calibration_options,
    input_options,
    judge_options,
    output_options,
)

SUITE = click.option("--suite", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                     help="A suite file (JSON or TOML) whose criteria/checklist apply to items carrying none.")
REWEIGHT = click.option("--reweight", is_flag=True,
                        help="When a criterion (check) is unscored, aggregate over the rest with renormalised "
                             "weights and list it in `reweighted` (default: the aggregate is unscored).")
AUDIT = click.option("--audit", "audit_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Also audit the mode and write the report (JSON) here.")
REPORT = click.option("--report", "report_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
                      help="Also audit the mode and write it as a self-contained HTML report (plots, tables) here.")
GROUNDING = click.option("--grounding-audit", "grounding_audit_", is_flag=True,
                         help="With --audit: judge the items again without their profile/knowledge/evidence and "
                              "with swapped profiles, and report the shift.")


def _suite(path: Path | None) -> Suite:
    return load_suite(path) if path is not None else Suite()


def _run(task_of: Callable[[Judge], Task], items_path: Path, out: Path | None, dry_run: bool, skip_invalid: bool,
         quiet: bool, judging: JudgeOptions, fmt: str, audit: Callable[[Judge, Task, list[dict[str, Any]]], Any],
         audit_out: Path | None, report_out: Path | None = None, mode: str = "",
         calibrating: CalibrationOptions | None = None, max_pairs: int | None = None) -> None:
    """Judge a file with a task, streaming records; then the audit, if ``--audit`` or ``--report`` asks. With
    ``calibrating`` each record is annotated with its calibrated verdicts as it is written, and the report gets
    the calibration section (``max_pairs``: the most pairs an item may have, where pairs are judged)."""
    loaded = calibrated.load(calibrating, mode) if calibrating is not None else None
    auditing = audit_out is not None or report_out is not None
    if dry_run:
        items = read_items(items_path, skip_invalid, 1, fmt, max_pairs=max_pairs)
        j = judging.make()
        try:
            print_plan(j, items, task_of(j))
        finally:
            j.close()
        return
    sha256 = digest(items_path)
    # The task, to validate the items against it, from a judge that opens no store file and starts no Ray:
    # bad input stops the run before anything is created or loaded.
    probe = dataclasses.replace(judging, store=Path(":memory:"), ray_address=None).make()
    try:
        task = task_of(probe)
        total = scan(items_path, skip_invalid, 1, fmt, _checked(task, items_path), max_pairs=max_pairs)
    finally:
        probe.close()
    if digest(items_path) != sha256:
        raise changed(items_path)
    j = judging.make()
    j.source = str(items_path)
    task = task_of(j)
    records: list[dict[str, Any]] = []
    unscored: Counter[str] = Counter()
    written = 0
    try:
        calibrator = calibrated.Calibrator.start(loaded, j, task) if loaded is not None else None
        with record_output(out, "--out") as stream:
            with progress(quiet) as bar:
                bar_task = bar.add_task(f"{task.kind} ({j.name}, {task.protocol})", total=total)
                todo = stream_items(items_path, 1, fmt, skip_invalid, sha256, max_pairs=max_pairs)
                ascii_only = not is_utf8(stream)
                for record in j.run(task, todo, progress=lambda n: bar.advance(bar_task, n)):
                    row = record.to_dict()
                    if calibrator is not None:
                        row = calibrator.annotate(row)
                    stream.write(json.dumps(row, ensure_ascii=ascii_only) + "\n")
                    stream.flush()
                    written += 1
                    if row["unscored"]:
                        unscored[row["unscored"]] += 1
                    if auditing:
                        records.append(row)
        s = j.stats
        if not quiet:
            err.print(escape(f"{task.kind}: {written} records; model calls {s.model_calls}, from store "
                             f"{s.from_store}; unscored: {dict(unscored) or 'none'}; store: {j.store.path}"),
                      highlight=False)
            records_note(j, written, out, items_path)
        if unscored.get(BACKEND_ERROR) and s.last_error:
            err.print(f"[yellow]backend error:[/] {escape(s.last_error)}", highlight=False)
        if calibrator is not None:
            calibrator.finish(calibrating.summary if calibrating is not None else None, quiet)
        if auditing:
            report = audit(j, task, records)
            if audit_out is not None:
                with atomic_output(audit_out, "--audit") as fh:
                    fh.write(json.dumps(report, indent=2) + "\n")
                if not quiet:
                    err.print(escape(f"audit written to {audit_out}"), highlight=False)
            if report_out is not None:
                extra = [calibration_section(calibrator.evaluation(records))] if calibrator is not None else []
                write_text(report_out, render_mode_report(report, title=f"trustjudge {mode} audit", mode=mode, details={
                    "judge": j.name, "data": str(items_path)}, extra_sections=extra), "--report")
                if not quiet:
                    err.print(escape(f"audit report written to {report_out}"), highlight=False)
        if written and unscored.get(BACKEND_ERROR) == written:
            raise BackendError(f"every judgment failed ({written} records say backend_error): "
                               f"{s.last_error or 'no message'}")
    finally:
        j.close()


def _checked(task: Task, path: Path) -> Callable[[Item], int]:
    """Per item: its judgment count, after the task's own check (so a missing criterion stops the run
    before any model call, naming the file, line and item)."""
    def count(item: Item) -> int:
        check_item(task, item, str(path))
        return task.size(item)

    return count


def _all_items(path: Path, skip_invalid: bool, fmt: str, max_pairs: int | None = None) -> list[Item]:
    return read_items(path, skip_invalid, 1, fmt, max_pairs=max_pairs)


@click.command("criteria")
@input_options
@judge_options("criteria")
@output_options(stdout=True)
@SUITE
@REWEIGHT
@click.option("--scale", type=click.Choice(["5", "10"]), default=None,
              help="Scale of criteria without level descriptions [default: the suite's, else 5].")
@click.option("--pairwise", is_flag=True, help="Compare the responses of each item per criterion, in both orders, "
                                               "instead of scoring them.")
@click.option("--graded", is_flag=True, help="With --pairwise: 5-way verdicts (A>>B .. B>>A) with an expected margin.")
@AUDIT
@REPORT
@GROUNDING
@calibration_options("criteria")
@MAX_PAIRS_OPTION
def criteria(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, out: Path | None,
             dry_run: bool, suite: Path | None, reweight: bool, scale: str | None, pairwise: bool, graded: bool,
             audit_out: Path | None, report_out: Path | None, grounding_audit_: bool, max_pairs: int) -> None:
    """Judge every response on every criterion (rubric), with the weighted aggregate and its spread."""
    if graded and not pairwise:
        raise click.UsageError("--graded needs --pairwise")
    # Pairs are judged with --pairwise, and by the audit (per criterion, both orders) without it.
    bound = max_pairs if pairwise or audit_out is not None or report_out is not None else None
    judging.guard(items, {"--out": out, "--audit": audit_out, "--report": report_out}, inputs=(suite,))
    s = _suite(suite)
    points = int(scale) if scale else (s.scale or 5)

    def task_of(j: Judge) -> Task:
        if pairwise:
            return j.criteria_compare_task(s.criteria, graded=graded, reweight=reweight)
        return j.criteria_task(s.criteria, reweight=reweight, scale=points)

    def audit(j: Judge, task: Task, records: list[dict[str, Any]]) -> dict[str, Any]:
        listed = _all_items(items, skip_invalid, fmt, bound)
        several = [it for it in listed if len(it.responses) >= 2]
        if pairwise:
            scores = [r.to_dict() for r in j.run(j.criteria_task(s.criteria, reweight=reweight, scale=points), listed)]
            report = criteria_audit(scores, records)
        else:
            pairs = [r.to_dict() for r in j.run(j.criteria_compare_task(s.criteria, reweight=reweight), several)]
            report = criteria_audit(records, pairs)
        if grounding_audit_:
            report["grounding"] = grounding_audit(j.run, listed, j.criteria_task(s.criteria, reweight=reweight,
                                                                                  scale=points))
        return report

    _run(task_of, readable_input(items), out, dry_run, skip_invalid, quiet, judging, fmt,
         audit, audit_out, report_out, "criteria", max_pairs=bound)


@click.command("checklist")
@input_options
@judge_options("checklist")
@output_options(stdout=True)
@SUITE
@REWEIGHT
@click.option("--labels", default=None, help='The answers a check may get, e.g. "FULL=1,PARTIAL=0.5,NO=0" '
                                             '[default: the suite\'s, else "YES=1,NO=0"].')
@AUDIT
@REPORT
@GROUNDING
@calibration_options("checklist")
def checklist(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, out: Path | None,
              dry_run: bool, suite: Path | None, reweight: bool, labels: str | None, audit_out: Path | None,
              report_out: Path | None, grounding_audit_: bool, calibrating: CalibrationOptions) -> None:
    """Ask every response every check: P(pass) per check, expected satisfaction, P(all), counts; with
    --calibration, each check's P(pass) also calibrated (and with --target-agreement, kept or abstained on)."""
    judging.guard(items, {"--out": out, "--audit": audit_out, "--report": report_out, "--summary": calibrating.summary},
                  inputs=(suite, calibrating.path))
    s = _suite(suite)
    spec = labels or s.labels
    label_set = LabelSet.parse(spec) if spec else YES_NO

    def task_of(j: Judge) -> Task:
        return j.checklist_task(s.checklist, labels=label_set, reweight=reweight)

    def audit(j: Judge, task: Task, records: list[dict[str, Any]]) -> dict[str, Any]:
        listed = _all_items(items, skip_invalid, fmt)
        several = [it for it in listed if len(it.responses) >= 2]
        pairs = [r.to_dict() for r in j.compare(several)] if several else []
        report = checklist_audit(records, pairs, labels=label_set)
        if grounding_audit_:
            report["grounding"] = grounding_audit(j.run, listed, task)
        return report

    _run(task_of, readable_input(items), out, dry_run, skip_invalid, quiet, judging, fmt,
         audit, audit_out, report_out, "checklist", calibrating)


@click.command("claims")
@input_options
@judge_options("claims")
@output_options(stdout=True)
@click.option("--k", "k", type=click.IntRange(min=1), default=None,
              help="Also give E[precision], E[recall@K] and E[F1@K] with recall counting up to K supported claims.")
@click.option("--unknown", is_flag=True, help="Add UNKNOWN to the verification labels (reported apart).")
@click.option("--match", is_flag=True, help="Match the claims against the item's gold_claims (else claims extracted "
                                            "from its reference): coverage, expected recall, Hungarian F1.")
@click.option("--min-overlap", default=0.0, show_default=True, type=Finite(min=0.0, max=1.0),
              help="With --match: judge only pairs whose word overlap (Jaccard) reaches this (others count 0; "
                   "recorded).")
@click.option("--extract-tokens", default=512, show_default=True, type=click.IntRange(min=16),
              help="Longest claim extraction (a longer one is unscored: truncated).")
@click.option("--max-claims", default=32, show_default=True, type=click.IntRange(min=1),
              help="An extraction with more claims is unscored (too_many_claims): it bounds the work per response.")
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Verify each claim against the evidence; --no-verify with --match: match-only (no evidence "
                   "needed, no verification question).")
@click.option("--coverage", type=click.Choice(["noisy_or", "max"]), default="noisy_or", show_default=True,
              help="With --match: a gold claim's coverage from its P(match) over the predictions: noisy_or "
                   "(1 - prod(1 - p); saturates on long lists) or max (the best single match).")
@AUDIT
@REPORT
@click.option("--sensitivity", is_flag=True, help="With --audit: evidence order, negation and extractor stability "
                                                  "(a second extraction at temperature 0.7).")
@calibration_options("claims")
def claims(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, out: Path | None,
           dry_run: bool, k: int | None, unknown: bool, match: bool, min_overlap: float, extract_tokens: int,
           max_claims: int, verify: bool, coverage: str, claims_templates: dict[str, Path],
           audit_out: Path | None, report_out: Path | None, sensitivity: bool, calibrating: CalibrationOptions) -> None:
    """Extract each response's claims (or take the given ones), verify each against the item's evidence, and
    report expected precision, the distribution of supported claims and, with --match, recall; with
    --calibration, each verification also calibrated (and with --target-agreement, kept or abstained on)."""
    judging.guard(items, {"--out": out, "--audit": audit_out, "--report": report_out, "--summary": calibrating.summary},
                  inputs=(calibrating.path, *claims_templates.values()))
    if not verify and not match:
        raise click.UsageError("--no-verify needs --match (match-only: extraction and matching, no verification)")

    def task_of(j: Judge) -> Task:
        return j.claims_task(k=k, unknown=unknown, match=match, min_overlap=min_overlap, max_new_tokens=extract_tokens,
                             max_claims=max_claims, templates=dict(claims_templates) or None, verify=verify,
                             coverage="max" if coverage == "max" else "noisy_or")

    def audit(j: Judge, task: Task, records: list[dict[str, Any]]) -> dict[str, Any]:
        report = claims_audit(records)
        if sensitivity:
            listed = _all_items(items, skip_invalid, fmt)
            other = dataclasses.replace(judging, temperature=0.7, seed=judging.seed + 1).make()
            try:
                report["sensitivity"] = claims_sensitivity(j.run, listed, task, [list(other.run(task_of(other),
                                                                                               listed))])
            finally:
                other.close()
        return report

    _run(task_of, readable_input(items), out, dry_run, skip_invalid, quiet, judging, fmt,
         audit, audit_out, report_out, "claims", calibrating)
