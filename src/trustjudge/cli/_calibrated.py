"""``--calibration`` on compare, checklist, claims, score, criteria and report: calibrated verdicts added as
records stream out.

In two steps, so that nothing is judged in vain: :func:`load` reads the file, checks its mode and that the
calibration set supports the target (before any item is read or judge built); :meth:`Calibrator.start`
checks it against the judge that was built (fingerprint, template, protocol, labels). Each record is then
annotated as it is written (:meth:`Calibrator.annotate`, zero model calls) and counted for the summary.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape

from .._judge import Judge, task_for_calibration
from ..audit import _ledger
from ..audit._calibration import Selection
from ..audit._evaluation import evaluation
from ..audit._levels import guarantee_text, marginal_warning
from ..audit._trust import Calibration, Tally, annotate
from ..errors import ConfigError
from ..io._outputs import atomic_output, record_output
from ..modes._base import Task
from ._common import err
from ._options import CalibrationOptions


@dataclass(frozen=True)
class Loaded:
    """A calibration file read and its selection chosen, not yet checked against a judge."""

    options: CalibrationOptions
    calibration: Calibration
    selection: Selection | None


def load(options: CalibrationOptions, mode: str) -> Loaded | None:
    """The calibration file of ``--calibration`` (None without it), refused when it is of another mode or when
    its calibration set cannot support ``--target-agreement``; call it before reading items or judging."""
    if options.path is None:
        return None
    cal = Calibration.load(options.path)
    if cal.mode != mode:
        raise ConfigError(f"{options.path}: a calibration of {cal.mode} verdicts; `trustjudge {mode}` judges {mode} "
                          f"verdicts (apply it with `trustjudge {cal.mode}`, or fit one with "
                          f"`trustjudge calibrate --mode {mode}`)")
    try:
        cal.check_tolerance(options.tolerance)
    except ConfigError as exc:
        raise ConfigError(f"{options.path}: {exc}") from None
    selection = None
    if options.target is not None:
        try:
            selection = cal.selection(options.target, options.delta, options.force_delta)
        except ConfigError as exc:
            raise ConfigError(f"{options.path}: {exc}") from None
    return Loaded(options, cal, selection)


def task_for(loaded: Loaded | None, task: Task) -> Task:
    """``task`` as the calibration reads it: a score or criteria calibration reads each distribution over the
    levels, so the records keep it (as with ``--distribution``)."""
    return task_for_calibration(task) if loaded is not None else task


@dataclass
class Calibrator:
    """Annotates the records of one run with a checked calibration and keeps the summary's totals."""

    path: Path
    mode: str
    calibration: Calibration
    selection: Selection | None
    verification: dict[str, Any] | None = None
    """What ``check-sample`` last concluded for this calibration on this run's items (the ledger beside the file)."""
    tally: Tally = field(init=False)

    def __post_init__(self) -> None:
        self.tally = Tally(self.mode, self.calibration, self.selection)

    @classmethod
    def start(cls, loaded: Loaded, judge: Judge, task: Task, items_sha256: str | None = None) -> Calibrator:
        """Check the loaded calibration against ``judge`` judging ``task`` (a ConfigError naming the mismatch,
        unless ``--calibration-override``); ``items_sha256``: the run's items, to find what a verification
        sample concluded on them (:mod:`~trustjudge.audit._ledger`)."""
        try:
            checked = judge.check_calibration(loaded.calibration, override=loaded.options.override, task=task)
        except ConfigError as exc:
            raise ConfigError(f"{loaded.options.path}: {exc}") from None
        assert loaded.options.path is not None
        return cls(loaded.options.path, task.kind, checked, loaded.selection,
                   remembered(loaded.options.path, checked, items_sha256))

    def annotate(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` with its verdicts' ``calibrated`` blocks (the raw fields unchanged), counted."""
        out = annotate(self.mode, [row], self.calibration, self.selection)[0]
        _ledger.stamp(self.mode, [out], self.calibration.map.classes, self.calibration.levels, self.verification)
        self.tally.add(out)
        return out

    def summary(self) -> dict[str, Any]:
        result = self.tally.result()
        result["calibration"]["file"] = str(self.path)
        if self.verification is not None:
            result["verification"] = {**self.verification, "notice": _ledger.notice(self.verification)}
        return result

    def evaluation(self, annotated: list[dict[str, Any]]) -> dict[str, Any]:
        """What the report draws (reliability before/after, the selective-risk curve) on these records."""
        return evaluation(self.mode, annotated, self.calibration, self.selection)

    def finish(self, summary_out: Path | None, quiet: bool) -> dict[str, Any]:
        """Write ``--summary`` and, unless ``quiet``, print the summary line; returns the summary."""
        summary = self.summary()
        if summary_out is not None:
            with atomic_output(summary_out, "--summary") as fh:
                fh.write(json.dumps(summary, indent=2) + "\n")
        if not quiet:
            err.print(escape(describe(summary)), highlight=False)
        warning = marginal_warning(summary.get("guarantee") or {})
        if warning is not None:  # even with -q: the guarantee printed, or written, is at its weakest
            err.print(escape(warning), highlight=False)
        return summary


def remembered(path: Path, calibration: Calibration, items_sha256: str | None) -> dict[str, Any] | None:
    """The latest verification of ``calibration`` (the file at ``path``) on the items with ``items_sha256``."""
    if items_sha256 is None:
        return None
    return _ledger.lookup(_ledger.ledger_path(path), calibration.data_hash, items_sha256)


def describe(summary: dict[str, Any]) -> str:
    """The summary as one line: coverage, the guarantee and the calibration set it rests on."""
    cal = summary["calibration"]
    parts = [f"calibrated ({cal['method']}, {cal['n']} labelled {summary['mode']} verdicts of {cal['judge']}, "
             f"{cal.get('file', 'calibration')} data {cal['data_hash']}"
             + (f"; tolerance {cal['tolerance']:g}" if cal.get("tolerance") is not None else "")
             + (f"; overridden: {', '.join(cal['overridden'])}" if cal.get("overridden") else "") + ")"]
    cov = summary["coverage"]
    parts.append(f"{summary['verdicts']} verdicts, kept {summary['kept']}"
                 + (f" (coverage {cov:.3f})" if cov is not None else ""))
    abstained = summary.get("abstained") or {}
    if abstained:
        parts.append("abstained: " + ", ".join(f"{k} {v}" for k, v in abstained.items()))
    g = summary.get("guarantee")
    if g:
        parts.append(guarantee_text(g))
        warning = (summary.get("shift") or {}).get("warning")
        if warning:
            parts.append(f"WARNING: {warning}")
    if summary.get("verification"):
        parts.append(f"VERIFICATION: {summary['verification']['notice']}")
    if summary.get("agreement_on_kept") is not None:
        parts.append(f"agreement with the labels given {summary['agreement_on_kept']:.3f} on "
                     f"{summary['labelled_kept']} kept")
    return "; ".join(parts)


def write_selected(outputs: Mapping[str, Path | None], records: Iterable[dict[str, Any]], summary: dict[str, Any],
                   to_label: Callable[[], Iterable[dict[str, Any]]]) -> None:
    """What ``select`` writes: the records to ``--out`` (standard output without it), the summary to
    ``--summary`` and the items left to people, ``to_label()`` (made only when asked), to ``--abstained-out``."""
    with record_output(outputs["--out"], "--out") as stream:
        for rec in records:
            stream.write(json.dumps(rec) + "\n")
    if outputs["--summary"] is not None:
        with atomic_output(outputs["--summary"], "--summary") as fh:
            fh.write(json.dumps(summary, indent=2) + "\n")
    if outputs["--abstained-out"] is not None:
        with atomic_output(outputs["--abstained-out"], "--abstained-out") as fh:
            for item in to_label():
                fh.write(json.dumps(item) + "\n")
