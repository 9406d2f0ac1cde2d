"""``trustjudge calibrate`` and ``trustjudge select``: calibrated probabilities and selective verdicts.

``calibrate`` judges labelled items in a mode (only what the store lacks) and writes a calibration file
naming the judge, template and protocol it is valid for. ``select`` judges items in that file's mode, adds
each verdict's calibrated probabilities and confidence, and with ``--target-agreement`` keeps only the
verdicts whose confidence passes the threshold that guarantees the agreement (see
:mod:`trustjudge.audit._calibration`); ``--abstained-out`` writes the items behind the rest, ready for labels.
``select --cascade J1,J2[,human]`` judges pairs, checks or claims (the calibration files' mode) with a
cascade (:mod:`trustjudge._cascade`): one ``--calibration`` per model tier, each tier judging only what the
ones before it abstained on.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from .._cascade import CASCADE_MODES, HUMAN, human_items, thresholds
from .._judge import task_for_calibration
from .._panel import planned_calls
from ..audit import _ledger
from ..audit._estimators import CALIBRATED, ESTIMATORS
from ..audit._levels import guarantee_text, marginal_warning, quote
from ..audit._support import DEFAULT_RISK_DELTA, selection_support
from ..audit._trust import (
    Calibration,
    abstained_items,
    calibrates,
    calibration_modes,
    judge_scaled,
    levelled,
)
from ..audit._verify import verification_problems
from ..errors import ConfigError
from ..io._files import load_suite
from ..io._outputs import check_outputs
from ..modes._registry import get_mode
from ._calibrated import remembered, write_selected
from ._common import err, progress
from ._domains import select_domains
from ._inputs import digest, read_items
from ._inputs import item_dict as _item_dict
from ._mode_options import suite_values
from ._options import (
    FORCE_DELTA,
    RISK_DELTA_HELP,
    RISK_LEVEL,
    SCALE_RANGE,
    Finite,
    JudgeOptions,
    input_options,
    judge_options,
    resolve_risk_delta,
)

_SCALE = click.option("--scale", type=SCALE_RANGE, default=None,
                      help="With a score calibration: the rating scale (a top value or a range such as 0-5; "
                           "default: the judge's, 1..10).")


@click.command("calibrate")
@input_options
@judge_options("compare")
@click.option("--mode", default="compare", show_default=True, callback=lambda ctx, param, value: _calibrated(value),
              help=f"What to calibrate ({', '.join(calibration_modes())}, or a plug-in mode with a calibration): "
                   "pairwise verdicts, checklist checks, claim verifications, pointwise or per-criterion scores.")
@click.option("--method", type=click.Choice(["platt", "temperature", "isotonic", "vector"]), default=None,
              help="Two classes (checklist): platt (default), temperature or isotonic; several classes: vector; "
                   "score, criteria: vector (default up to 11 levels) or temperature (default above).")
@click.option("--tolerance", type=Finite(min=0.0), default=None,
              help="--mode score or criteria: a verdict agrees with the human's score when at most this many points "
                   "away (default 0: the same level). Stored in the file.")
@click.option("--confidence", type=click.Choice(list(ESTIMATORS)), default=CALIBRATED, show_default=True,
              help="What ranks the verdicts a target keeps: the calibrated top probability; `features`: a "
                   "logistic regression over zero-call features of each verdict (margin, entropy, agreement of "
                   "the two orders, label mass...), fitted with the map; or `ensemble`: each pair also judged under "
                   "the explicit-steps template, combined by mean log-probability; `annotators`: k simulated "
                   "annotators (in-context examples drawn from part A of the calibration set), mean probability; "
                   "`critiques`: n critiques sampled (cot, temperature 0.7), agreement of their verdicts. "
                   "Stored in the file.")
@click.option("--panel-size", type=click.IntRange(2, 16), default=None,
              help="--confidence annotators: k, 3 or 5 (default 3); critiques: n samples (default 5).")
@_SCALE
@click.option("--suite", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="--mode checklist or criteria: the suite file whose checks or criteria (and labels, scale) apply "
                   "to items carrying none, as the checklist and criteria commands take it.")
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the calibration file (JSON) here.")
@click.option("--verify", "verify", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Instead of writing a file, check that this calibration file is what ITEMS' labels and the "
                   "store's judgments give (same units, labels, probabilities and map; zero model calls).")
def calibrate(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, mode: str,
              method: str | None, tolerance: float | None, confidence: str, panel_size: int | None,
              scale: str | None, suite: Path | None, out: Path | None, verify: Path | None) -> None:
    """Fit a calibration map on ITEMS' human labels (zero model calls for what the store holds)."""
    if (out is None) == (verify is None):
        raise click.UsageError("give --out FILE (fit a calibration) or --verify FILE (check one), not both"
                               if out is not None else "give --out FILE to write the calibration (or --verify FILE)")
    if verify is not None:
        _verify(items, fmt, skip_invalid, quiet, judging, scale, suite, verify)
        return
    assert out is not None
    if not levelled(mode) and (tolerance is not None or scale is not None):
        raise click.UsageError(f"{'--tolerance' if tolerance is not None else '--scale'} applies to --mode "
                               f"{' or '.join(m for m in calibration_modes() if levelled(m))}")
    judging.guard(items, {"--out": out}, inputs=(suite,))
    _template_fits(judging, mode)
    todo = read_items(items, skip_invalid, get_mode(mode).min_responses, fmt)
    j, judged = _scaled_judge(judging, mode, scale, items, suite)
    try:
        with progress(quiet) as bar:
            sized = judged if judged is not None else j.calibration_task(mode)
            task = bar.add_task(f"calibrate {mode} ({j.name})", total=sum(sized.size(it) for it in todo))
            cal = j.calibrate(todo, mode, method=method, tolerance=tolerance, task=judged,
                              progress=lambda n: bar.advance(task, n), confidence=confidence,
                              panel_size=panel_size)
        cal.save(out)
        s = j.stats
        support = selection_support(cal)
        if not quiet:
            err.print(escape(f"calibration ({cal.map.method}, confidence {cal.confidence}, {cal.n} labelled verdicts) "
                             f"written to {out}; model calls {s.model_calls}{s.recorded_note()}, from store "
                             f"{s.from_store}; store: {j.store.path}"), highlight=False)
        if not quiet or support.highest is None:  # the warning is printed even with --quiet
            err.print(escape(support.message(cal.n, cal.mode)), highlight=False)
    finally:
        j.close()


def _scaled_judge(judging: JudgeOptions, mode: str, scale: str | None, items: Path,
                  suite: Path | None = None) -> tuple[Any, Any]:
    """The judge a calibration of ``mode`` is fitted with, and the task to judge where ``--scale`` (criteria)
    or ``--suite`` (the suite's checks or criteria, labels and scale) changes the mode's defaults."""
    options = suite_values(get_mode(mode), load_suite(suite)) if suite is not None else {}
    if suite is not None and not options:
        raise click.UsageError(f"--suite gives the {mode} mode nothing ({suite} holds none of its options: "
                               "--suite is for --mode checklist or criteria)")
    if scale is not None and levelled(mode) and not judge_scaled(mode):
        options["scale"] = scale  # the task's own scale
    j = judging.make(**({"scale": scale} if scale is not None and judge_scaled(mode) else {}))
    j.source = str(items)
    try:
        return j, (task_for_calibration(j.task(mode, **options)) if options else None)
    except BaseException:
        j.close()
        raise


def _verify(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, scale: str | None,
            suite: Path | None, path: Path) -> None:
    """``calibrate --verify CAL``: refit CAL's mode, method and tolerance on ITEMS from the store alone and
    compare (a calibration file is trusted input: its hash is no signature)."""
    cal = Calibration.load(path)
    _template_fits(judging, cal.mode)
    todo = read_items(items, skip_invalid, get_mode(cal.mode).min_responses, fmt)
    j, judged = _scaled_judge(judging, cal.mode, scale, items, suite)
    try:
        task = task_for_calibration(judged if judged is not None else j.calibration_task(cal.mode))
        plan = j.plan(todo, task)
        lacking = plan.model_calls if cal.panel is None else planned_calls(j, cal.mode, list(todo), cal.panel)
        if lacking:
            raise ConfigError(f"cannot verify {path}: the store {j.store.path} lacks {lacking} of the "
                              f"{plan.judgments} judgments of {items} (verifying makes no model call: give the "
                              "store the file was fitted from with --store)")
        fresh = j.calibrate(todo, cal.mode, method=cal.map.method, tolerance=cal.tolerance, task=judged,
                            confidence=cal.confidence, panel_size=(cal.panel or {}).get("size"))
        problems = verification_problems(cal, fresh)
        if j.stats.model_calls:
            problems.append(f"{j.stats.model_calls} model call(s) were needed (claims extracted anew)")
    finally:
        j.close()
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise ConfigError(f"{path} is not what {items} and the store give: {shown}")
    if not quiet:
        err.print(escape(f"{path}: verified: its {cal.n} {cal.mode} units, their labels and probabilities and its "
                         f"{cal.map.method} map are those {items} and the store {j.store.path} give (zero model "
                         "calls)"), highlight=False)


@click.command("select")
@input_options
@judge_options("compare")
@click.option("--calibration", "calibration_paths", required=True, multiple=True,
              help="A calibration file from `trustjudge calibrate` (its mode is the mode judged). With --cascade: "
                   "one per model tier, in order (repeat the option). With --calibration-by: DOMAIN=FILE for each "
                   "domain, or one JSON map file of domain -> calibration file.")
@click.option("--calibration-by", "calibration_by", default=None, metavar="FIELD",
              help="A calibration per domain: the item field FIELD names each item's domain, and its verdicts are "
                   "calibrated (and kept) by that domain's file; an item of a domain without one is abstained "
                   "(no_calibration_for_domain).")
@click.option("--cascade", default=None, metavar="J1,J2[,human]",
              help="Judge with a cascade: J1 judges every verdict (pair, check or claim: the calibration files' "
                   "mode), J2 only what J1 abstained on, and so on; a last `human` leaves the rest to people "
                   "(written with --abstained-out). Needs --target-agreement.")
@click.option("--target-agreement", type=RISK_LEVEL, default=None,
              help="Keep only verdicts confident enough that agreement with humans on the kept ones is at least "
                   "this, with probability >= 1 - risk delta (e.g. 0.8).")
@click.option("--risk-delta", "risk_delta", type=RISK_LEVEL, default=None,
              help=f"{RISK_DELTA_HELP}  [default: {DEFAULT_RISK_DELTA:g}]")
@click.option("--delta", "old_delta", type=RISK_LEVEL, default=None, hidden=True,
              help="Deprecated spelling of --risk-delta (compare's --delta is its tie margin).")
@FORCE_DELTA
@click.option("--calibration-override", is_flag=True,
              help="Use the calibration file although it was fitted for another judge, template or protocol "
                   "(every record says so).")
@_SCALE
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the annotated records here (JSON lines; default: standard output).")
@click.option("--summary", "summary_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the run's summary (coverage, guarantee) as JSON here.")
@click.option("--abstained-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the items behind abstained verdicts here (items JSONL, ready for human labels).")
def select(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions,
           calibration_paths: tuple[str, ...], calibration_by: str | None, cascade: str | None,
           target_agreement: float | None, risk_delta: float | None, old_delta: float | None, force_delta: bool,
           calibration_override: bool, scale: str | None, out: Path | None, summary_out: Path | None,
           abstained_out: Path | None) -> None:
    """Judge ITEMS with calibrated probabilities, and with --target-agreement keep only guaranteed verdicts."""
    risk_delta = resolve_risk_delta(risk_delta, old_delta, "select", DEFAULT_RISK_DELTA) or DEFAULT_RISK_DELTA
    outputs = {"--out": out, "--summary": summary_out, "--abstained-out": abstained_out}
    if calibration_by is not None:
        return select_domains(items, fmt, skip_invalid, quiet, judging, calibration_by, calibration_paths,
                              target_agreement, risk_delta, calibration_override, outputs, cascade or scale,
                              force_delta)
    paths = tuple(_existing(p) for p in calibration_paths)
    if cascade is not None:
        if scale is not None:
            raise click.UsageError("--scale applies to a score calibration, not to a cascade")
        _select_cascade(items, fmt, skip_invalid, quiet, judging, paths, cascade, target_agreement,
                        risk_delta, calibration_override, outputs, force_delta)
        return
    if len(paths) != 1:
        raise click.UsageError(f"select takes one --calibration file, got {len(paths)} (several are for "
                               "--cascade: one per model tier, or --calibration-by: one per domain)")
    calibration_path = paths[0]
    judging.guard(items, outputs)
    check_outputs(outputs, inputs=[calibration_path])
    _template_fits(judging, None)
    cal = Calibration.load(calibration_path)
    _template_fits(judging, cal.mode)
    if scale is not None and not judge_scaled(cal.mode):
        raise click.UsageError(f"--scale applies to a {' or '.join(m for m in calibration_modes() if judge_scaled(m))} "
                               f"calibration; {calibration_path} is a {cal.mode} one"
                               + (f" (judge with `trustjudge {cal.mode} --scale S --calibration FILE`)"
                                  if levelled(cal.mode) else ""))
    if abstained_out is not None and target_agreement is None:
        raise click.UsageError("--abstained-out needs --target-agreement (nothing abstains without a target)")
    if target_agreement is not None:
        cal.selection(target_agreement, risk_delta, force_delta)  # refuse an unsupported target before any judging
    todo = read_items(items, skip_invalid, get_mode(cal.mode).min_responses, fmt)
    j = judging.make(**({"scale": scale} if scale is not None else {}))
    j.source = str(items)
    try:
        with progress(quiet) as bar:
            sized = j.calibration_task(cal.mode)
            task = bar.add_task(f"select {cal.mode} ({j.name})", total=sum(sized.size(it) for it in todo))
            records, summary = j.select(todo, cal, target=target_agreement, delta=risk_delta,
                                        override=calibration_override, progress=lambda n: bar.advance(task, n),
                                        force_delta=force_delta)
        verification = _verification(records, summary, calibration_path, cal, items)
        write_selected(outputs, records, summary,
                       lambda: abstained_items(cal.mode, records, {it.id: _item_dict(it) for it in todo}))
        s = j.stats
        if not quiet:
            cov = summary["coverage"]
            agree = summary["agreement_on_kept"]
            g = summary.get("guarantee")
            err.print(escape(f"select {cal.mode}: {summary['verdicts']} verdicts, kept {summary['kept']}"
                      + (f" (coverage {cov:.2f})" if cov is not None else "")
                      + (f"; agreement with the labels given {agree:.3f}" if agree is not None else "")
                      + (f"; {guarantee_text(g)}" if g else "")
                      + f"; model calls {s.model_calls}{s.recorded_note()}, from store {s.from_store}"),
                     highlight=False)
            shift = (summary.get("shift") or {}).get("warning")
            if g and shift:
                err.print(escape(f"WARNING: {shift}"), highlight=False)
            if verification is not None:
                err.print(escape(f"VERIFICATION: {summary['verification']['notice']}"), highlight=False)
        warning = marginal_warning(summary.get("guarantee") or {})
        if warning is not None:  # even with -q
            err.print(escape(warning), highlight=False)
        if out is not None and not quiet:
            err.print(escape(f"records written to {out}"), highlight=False)
    finally:
        j.close()


def _verification(records: list[dict[str, Any]], summary: dict[str, Any], path: Path, cal: Calibration,
                  items: Path) -> dict[str, Any] | None:
    """What ``check-sample`` last concluded for ``cal`` on ``items``, said in the records and the summary (which
    names the calibration file, so that ``sample --summary`` remembers its check beside it)."""
    summary["calibration"]["file"] = str(path)
    verification = remembered(path, cal, digest(items))
    _ledger.stamp(cal.mode, records, cal.map.classes, cal.levels, verification)
    if verification is not None:
        summary["verification"] = {**verification, "notice": _ledger.notice(verification)}
    return verification


def _select_cascade(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions,
                    calibration_paths: tuple[Path, ...], cascade: str, target: float | None, delta: float,
                    override: bool, outputs: dict[str, Path | None], force_delta: bool = False) -> None:
    """``select --cascade``: the tiers in order, one calibration file per model tier, the rest for people."""
    names = [n.strip() for n in cascade.split(",")]
    if not all(names):
        raise click.BadParameter(f"judge names separated by commas, got {cascade!r}", param_hint="--cascade")
    human = names[-1] == HUMAN
    model = names[:-1] if human else names
    if HUMAN in model or not model:
        raise click.BadParameter("`human` can only be the last tier, after at least one judge", param_hint="--cascade")
    if len(calibration_paths) != len(model):
        raise click.UsageError(f"--cascade names {len(model)} model tier(s) ({', '.join(model)}) but "
                               f"{len(calibration_paths)} --calibration file(s) were given: one per model tier, in "
                               "order")
    if target is None:
        raise click.UsageError("--cascade needs --target-agreement (a tier passes on what it is not sure enough of)")
    given = click.get_current_context().get_parameter_source("judge")  # not $TRUSTJUDGE_JUDGE or the project's
    if given is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError("--cascade names the judges: leave out --judge")
    if human and outputs["--abstained-out"] is None:
        raise click.UsageError("a cascade ending in `human` writes what is left to people: give --abstained-out FILE")
    judging.guard(items, outputs)
    check_outputs(outputs, inputs=list(calibration_paths))
    cals = [Calibration.load(p) for p in calibration_paths]
    for cal in cals:
        _template_fits(judging, cal.mode)
    modes = sorted({cal.mode for cal in cals})
    if len(modes) > 1:
        raise click.UsageError(f"the --calibration files are of different modes ({', '.join(modes)}): a cascade "
                               "judges one mode")
    mode = modes[0]
    if mode not in CASCADE_MODES:
        raise click.UsageError(f"cascades judge the modes {', '.join(CASCADE_MODES)}, not {mode}")
    selections = thresholds(cals, target, delta, force_delta)  # refuse an unsupported target before any judging
    if not any(sel.supported for sel in selections):
        raise click.UsageError(f"no tier of the cascade can support agreement >= {quote(target)} at delta "
                               f"{quote(delta)} on its calibration set: label more items, or lower the target")
    todo = read_items(items, skip_invalid, get_mode(mode).min_responses, fmt)
    j = replace(judging, judge=model[0]).make()
    j.source = str(items)
    tiers: list[tuple[str, Calibration | None]] = [*zip(model, cals), *([(HUMAN, None)] if human else [])]
    try:
        with progress(quiet) as bar:
            task = bar.add_task(f"cascade {' -> '.join(names)}", total=None)
            records, summary = j.cascade(todo, tiers, target=target, delta=delta, override=override,
                                         progress=lambda n: bar.advance(task, n), force_delta=force_delta)
        write_selected(outputs, records, summary,
                       lambda: human_items(records, {it.id: _item_dict(it) for it in todo}, mode))
        if not quiet:
            _cascade_table(summary)
    finally:
        j.close()


def _cascade_table(summary: dict[str, Any]) -> None:
    def num(v: Any, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    table = Table(title=escape(f"Cascade: {summary['verdicts']} {summary['unit']}, target agreement "
                               f"{quote(summary['target_agreement'])}, delta {quote(summary['delta'])}"))
    # short headers: the judge's name takes the room (it folds rather than being cut)
    table.add_column("tier", justify="right")
    table.add_column("judge", overflow="fold")
    for col in ("asked", "decided", "share", "agree", "calls", "stored", "alone"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in summary["tiers"]:
        table.add_row(str(row["tier"]), escape(row["judge"]), str(row["asked"]), str(row["decided"]),
                      num(row["share"], ".2f"), num(row.get("agreement"), ".3f"), _calls(row),
                      str(row.get("from_store", "-")), str(row["alone"]))
    err.print(table)
    unit = summary["unit"]
    err.print(escape(f"asked / alone: {unit} sent to the tier / {unit} it would judge alone; calls: model calls "
                     "made (a pair: both orders; rec N: N lookups in a recorded judge's file, no model), "
                     "stored: judgments read from the store; agree: with the labels "
                     "given"), highlight=False)
    agree = summary["agreement_on_machine_verdicts"]
    err.print(escape(f"decided by a model: {summary['machine_decided']} (coverage "
                     f"{num(summary['machine_coverage'], '.2f')})"
                     + (f"; agreement with the labels given {agree:.3f}" if agree is not None else "")
                     + f". Guarantee: {summary['guarantee']}"), highlight=False)
    for row in summary["tiers"]:
        warning = marginal_warning(row.get("guarantee") or {}, f"tier {row['tier']}'s threshold")
        if warning is not None:
            err.print(escape(warning), highlight=False)


def _calls(row: dict[str, Any]) -> str:
    """A tier's model calls, or a recorded tier's lookups (``rec N``: no model was asked)."""
    if row.get("recorded_lookups"):
        return f"rec {row['recorded_lookups']}"
    return str(row.get("model_calls", "-"))


def _existing(value: str) -> Path:
    """A ``--calibration`` file, which must exist (under --calibration-by the values are DOMAIN=FILE)."""
    path = Path(value)
    if not path.is_file():
        raise click.BadParameter(f"file {value!r} does not exist" + (" (DOMAIN=FILE needs --calibration-by FIELD)"
                                                                      if "=" in value else ""),
                                 param_hint="'--calibration'")
    return path


def _calibrated(name: str) -> str:
    """``--mode``: a mode with a calibration (a plug-in is loaded, and so registers its units)."""
    try:
        get_mode(name)
    except ConfigError as exc:
        raise click.BadParameter(str(exc)) from None
    if not calibrates(name):
        raise click.BadParameter(f"the {name} mode has no calibration (a mode declares its units with "
                                 "Mode(calibration=...))")
    return name


def _template_fits(judging: JudgeOptions, mode: str | None) -> None:
    """``--template`` is the pairwise template here: refuse it where the mode asks no pairwise question."""
    if judging.pairwise_template is not None and mode is not None and "pairwise" not in get_mode(mode).templates:
        raise click.UsageError(f"--template replaces the pairwise template; the {mode} mode does not use it")
