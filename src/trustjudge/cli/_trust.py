"""``trustjudge calibrate`` and ``trustjudge select``: calibrated probabilities and selective verdicts.

``calibrate`` judges labelled items in a mode (only what the store lacks) and writes a calibration file
naming the judge, template and protocol it is valid for. ``select`` judges items in that file's mode, adds
each verdict's calibrated probabilities and confidence, and with ``--target-agreement`` keeps only the
verdicts whose confidence passes the threshold that guarantees the agreement (see
:mod:`trustjudge._calibration`); ``--abstained-out`` writes the items behind the rest, ready for labels.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from .._outputs import atomic_output, check_outputs, record_output
from .._items import Item
from .._trust import MODES, Calibration, abstained_items
from ._common import err, progress
from ._inputs import read_items
from ._options import Finite, JudgeOptions, input_options, judge_options


@click.command("calibrate")
@input_options
@judge_options("compare")
@click.option("--mode", type=click.Choice(MODES), default="compare", show_default=True,
              help="What to calibrate: pairwise verdicts, checklist checks or claim verifications.")
@click.option("--method", type=click.Choice(["platt", "temperature", "isotonic", "vector"]), default=None,
              help="Two classes (checklist): platt (default), temperature or isotonic; several classes: vector.")
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Write the calibration file (JSON) here.")
def calibrate(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, mode: str,
              method: str | None, out: Path) -> None:
    """Fit a calibration map on ITEMS' human labels (zero model calls for what the store holds)."""
    judging.guard(items, {"--out": out})
    _template_fits(judging, mode)
    todo = read_items(items, skip_invalid, 2 if mode == "compare" else 1, fmt)
    j = judging.make()
    j.source = str(items)
    try:
        with progress(quiet) as bar:
            task = bar.add_task(f"calibrate {mode} ({j.name})", total=None)
            cal = j.calibrate(todo, mode, method=method, progress=lambda n: bar.advance(task, n))
        cal.save(out)
        s = j.stats
        if not quiet:
            err.print(escape(f"calibration ({cal.map.method}, {cal.n} labelled verdicts) written to {out}; model calls "
                      f"{s.model_calls}, from store {s.from_store}; store: {j.store.path}"), highlight=False)
    finally:
        j.close()


@click.command("select")
@input_options
@judge_options("compare")
@click.option("--calibration", "calibration_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A calibration file from `trustjudge calibrate` (its mode is the mode judged).")
@click.option("--target-agreement", type=Finite(min=0.0, max=1.0), default=None,
              help="Keep only verdicts confident enough that agreement with humans on the kept ones is at least "
                   "this, with probability >= 1 - delta (e.g. 0.8).")
@click.option("--delta", "risk_delta", type=Finite(min=0.0, max=1.0), default=0.1, show_default=True,
              help="With --target-agreement: the allowed probability that the guarantee fails.")
@click.option("--calibration-override", is_flag=True,
              help="Use the calibration file although it was fitted for another judge, template or protocol "
                   "(every record says so).")
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the annotated records here (JSON lines; default: standard output).")
@click.option("--summary", "summary_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the run's summary (coverage, guarantee) as JSON here.")
@click.option("--abstained-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the items behind abstained verdicts here (items JSONL, ready for human labels).")
def select(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, calibration_path: Path,
           target_agreement: float | None, risk_delta: float, calibration_override: bool, out: Path | None,
           summary_out: Path | None, abstained_out: Path | None) -> None:
    """Judge ITEMS with calibrated probabilities, and with --target-agreement keep only guaranteed verdicts."""
    outputs = {"--out": out, "--summary": summary_out, "--abstained-out": abstained_out}
    judging.guard(items, outputs)
    check_outputs(outputs, inputs=[calibration_path])
    _template_fits(judging, None)
    cal = Calibration.load(calibration_path)
    _template_fits(judging, cal.mode)
    if abstained_out is not None and target_agreement is None:
        raise click.UsageError("--abstained-out needs --target-agreement (nothing abstains without a target)")
    if target_agreement is not None:
        cal.selection(target_agreement, risk_delta)  # refuse an unsupported target before any judging
    todo = read_items(items, skip_invalid, 2 if cal.mode == "compare" else 1, fmt)
    j = judging.make()
    j.source = str(items)
    try:
        with progress(quiet) as bar:
            task = bar.add_task(f"select {cal.mode} ({j.name})", total=None)
            records, summary = j.select(todo, cal, target=target_agreement, delta=risk_delta,
                                        override=calibration_override, progress=lambda n: bar.advance(task, n))
        with record_output(out, "--out") as stream:
            for rec in records:
                stream.write(json.dumps(rec) + "\n")
        if summary_out is not None:
            with atomic_output(summary_out, "--summary") as fh:
                fh.write(json.dumps(summary, indent=2) + "\n")
        if abstained_out is not None:
            raw = {it.id: it for it in todo}
            by_id = {k: _item_dict(v) for k, v in raw.items()}
            with atomic_output(abstained_out, "--abstained-out") as fh:
                for item in abstained_items(cal.mode, records, by_id):
                    fh.write(json.dumps(item) + "\n")
        s = j.stats
        if not quiet:
            cov = summary["coverage"]
            agree = summary["agreement_on_kept"]
            g = summary.get("guarantee")
            err.print(escape(f"select {cal.mode}: {summary['verdicts']} verdicts, kept {summary['kept']}"
                      + (f" (coverage {cov:.2f})" if cov is not None else "")
                      + (f"; agreement with the labels given {agree:.3f}" if agree is not None else "")
                      + (f"; guaranteed agreement >= {g['target_agreement']:g} with probability >= "
                         f"{1 - g['delta']:g} (threshold {g['threshold']:.4f}, on {g['calibration_n']} calibration "
                         "verdicts)" if g else "")
                      + f"; model calls {s.model_calls}, from store {s.from_store}"), highlight=False)
            if out is not None:
                err.print(escape(f"records written to {out}"), highlight=False)
    finally:
        j.close()


def _template_fits(judging: JudgeOptions, mode: str | None) -> None:
    """``--template`` is the pairwise template here: refuse it where the mode asks no pairwise question."""
    if judging.pairwise_template is not None and mode not in (None, "compare"):
        raise click.UsageError(f"--template replaces the pairwise template; the {mode} mode does not use it")


def _item_dict(item: Item) -> dict[str, Any]:
    """An item as the items format writes it (the fields labelling needs)."""
    d = asdict(item)
    out: dict[str, Any] = {"id": d["id"], "question": d["question"]}
    for key in ("context", "reference", "profile", "knowledge", "evidence", "checklist", "gold_claims"):
        if d.get(key):
            out[key] = d[key]
    out["responses"] = [{k: v for k, v in r.items() if v not in (None, (), [], {})} for r in d["responses"]]
    return out
