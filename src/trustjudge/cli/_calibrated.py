"""``--calibration`` on compare, checklist, claims, score, criteria and report: calibrated verdicts added as
records stream out.

In two steps, so that nothing is judged in vain: :func:`load` reads the file, checks its mode and that the
calibration set supports the target (before any item is read or judge built); :meth:`Calibrator.start`
checks it against the judge that was built (fingerprint, template, protocol, labels). Each record is then
annotated as it is written (:meth:`Calibrator.annotate`, zero model calls) and counted for the summary.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape

from .._judge import Judge, task_for_calibration
from ..audit import _estimators as E
from ..audit import _ledger
from ..audit._calibration import Selection
from ..audit._domains import NO_CALIBRATION, DomainCalibrations, DomainTally, annotate_by_domain
from ..audit._evaluation import evaluation
from ..audit._levels import guarantee_text, marginal_warning
from ..audit._trust import Calibration, Tally, annotate
from ..audit._verify import known_hashes
from ..errors import ConfigError
from ..io._items import Item
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
    domains: DomainCalibrations | None = None
    """``--calibration-by``: the calibration of each domain (``calibration`` is then the first of them)."""
    selections: Mapping[str, Selection | None] | None = None


def load(options: CalibrationOptions, mode: str) -> Loaded | None:
    """The calibration file of ``--calibration`` (None without it), refused when it is of another mode or when
    its calibration set cannot support ``--target-agreement``; call it before reading items or judging."""
    if options.path is None:
        return None
    if options.by is not None:
        return _load_domains(options, mode)
    cal = Calibration.load(options.path)
    judged_once(cal, str(options.path))
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


def _load_domains(options: CalibrationOptions, mode: str) -> Loaded:
    """``--calibration MAP --calibration-by FIELD``: every domain's file read and checked as :func:`load` checks
    one, each named in its error."""
    assert options.path is not None and options.by is not None
    domains = DomainCalibrations.load(options.path, options.by)
    if domains.mode != mode:
        raise ConfigError(f"{options.path}: its domains' calibrations are of {domains.mode} verdicts; `trustjudge "
                          f"{mode}` judges {mode} verdicts")
    for domain, cal in domains.calibrations.items():
        judged_once(cal, f"domain {domain!r} ({domains.files.get(domain)})")
        try:
            cal.check_tolerance(options.tolerance)
        except ConfigError as exc:
            raise ConfigError(f"domain {domain!r} ({domains.files.get(domain)}): {exc}") from None
    selections = domains.selections(options.target, options.delta, options.force_delta)
    return Loaded(options, next(iter(domains.calibrations.values())), None, domains, selections)


def judged_once(cal: Calibration, where: str) -> None:
    """Refuse, before any judging, an ensemble or panel calibration where each unit is judged once (a judging
    command's ``--calibration``, a per-domain run)."""
    E.judged_once(cal, where, "this run", "select with `trustjudge select --calibration FILE` (one calibration, no "
                  "--calibration-by; zero calls where the store holds the judgments)")


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
    def start(cls, loaded: Loaded, judge: Judge, task: Task,
              items_sha256: str | None = None) -> Calibrator | DomainCalibrator:
        """Check the loaded calibration against ``judge`` judging ``task`` (a ConfigError naming the mismatch,
        unless ``--calibration-override``); ``items_sha256``: the run's items, to find what a verification
        sample concluded on them (:mod:`~trustjudge.audit._ledger`). With ``--calibration-by``: a
        :class:`DomainCalibrator`."""
        if loaded.domains is not None:
            return DomainCalibrator.start(loaded, judge, task, items_sha256)
        try:
            checked = judge.check_calibration(loaded.calibration, override=loaded.options.override, task=task)
        except ConfigError as exc:
            raise ConfigError(f"{loaded.options.path}: {exc}") from None
        assert loaded.options.path is not None
        return cls(loaded.options.path, task.kind, checked, loaded.selection,
                   remembered(loaded.options.path, checked, items_sha256))

    def watch(self, items: Iterator[Item]) -> Iterator[Item]:
        """The run's items, as they go to the judge (one calibration: nothing to note)."""
        return items

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
        summary = _written(self.summary(), summary_out)
        if not quiet:
            err.print(escape(describe(summary)), highlight=False)
        warning = marginal_warning(summary.get("guarantee") or {})
        if warning is not None:  # even with -q: the guarantee printed, or written, is at its weakest
            err.print(escape(warning), highlight=False)
        return summary


@dataclass
class DomainCalibrator:
    """:class:`Calibrator` with a calibration per domain (``--calibration-by``): each record is annotated by its
    item's domain's calibration, each domain counted and its remembered check said apart."""

    calibrations: DomainCalibrations
    selections: Mapping[str, Selection | None]
    verifications: dict[str, dict[str, Any] | None]
    """What ``check-sample`` last concluded for each domain's calibration on this run's items."""
    domain_of: dict[str, str | None] = field(default_factory=dict)
    tally: DomainTally = field(init=False)

    def __post_init__(self) -> None:
        self.tally = DomainTally(self.calibrations, self.selections)

    @classmethod
    def start(cls, loaded: Loaded, judge: Judge, task: Task, items_sha256: str | None = None) -> DomainCalibrator:
        assert loaded.domains is not None and loaded.selections is not None
        domains, checked = loaded.domains, {}
        for domain, cal in domains.calibrations.items():
            try:
                checked[domain] = judge.check_calibration(cal, override=loaded.options.override, task=task)
            except ConfigError as exc:
                raise ConfigError(f"domain {domain!r} ({domains.files.get(domain)}): {exc}") from None
        cals = DomainCalibrations(domains.field, checked, domains.files)
        return cls(cals, loaded.selections, domain_verifications(cals, items_sha256))

    def watch(self, items: Iterator[Item]) -> Iterator[Item]:
        """The run's items, each one's domain noted as it goes to the judge (its records follow it)."""
        for item in items:
            self.domain_of[item.id] = self.calibrations.domain_of(item)
            yield item

    def annotate(self, row: dict[str, Any]) -> dict[str, Any]:
        domain = self.domain_of.get(str(row.get("item_id")))
        out = annotate_by_domain([row], [domain], self.calibrations, self.selections)[0]
        cal = self.calibrations.calibrations.get(domain) if domain is not None else None
        if cal is not None and domain is not None:
            _ledger.stamp(cal.mode, [out], cal.map.classes, cal.levels, self.verifications.get(domain))
        self.tally.add(out, domain)
        return out

    def summary(self) -> dict[str, Any]:
        return with_verifications(self.tally.result(), self.verifications)

    def evaluation(self, annotated: list[dict[str, Any]]) -> dict[str, Any]:
        raise ConfigError("--report draws one calibration's reliability: with --calibration-by give --audit")

    def finish(self, summary_out: Path | None, quiet: bool) -> dict[str, Any]:
        summary = _written(self.summary(), summary_out)
        if not quiet:
            for line in domain_lines(summary):
                err.print(escape(line), highlight=False)
        for domain, s in summary["domains"].items():
            warning = marginal_warning(s.get("guarantee") or {}, f"domain {domain}'s threshold")
            if warning is not None:
                err.print(escape(warning), highlight=False)
        return summary


def domain_verifications(cals: DomainCalibrations, items_sha256: str | None) -> dict[str, dict[str, Any] | None]:
    """Each domain's remembered check on the items with ``items_sha256`` (the ledger beside its file)."""
    return {d: remembered(Path(cals.files[d]), c, items_sha256) if d in cals.files else None
            for d, c in cals.calibrations.items()}


def with_verifications(summary: dict[str, Any], verifications: Mapping[str, dict[str, Any] | None]) -> dict[str, Any]:
    """A per-domain summary with each domain's remembered check (and its notice) in its block."""
    for domain, found in verifications.items():
        if found is not None and domain in summary["domains"]:
            summary["domains"][domain]["verification"] = {**found, "notice": _ledger.notice(found)}
    return summary


def domain_lines(summary: dict[str, Any]) -> list[str]:
    """A per-domain summary as lines: the totals, each domain's :func:`describe`, the domains without one."""
    cov = summary["coverage"]
    lines = [f"calibrated by {summary['calibration_by']}: {summary['verdicts']} verdicts, kept {summary['kept']}"
             + (f" (coverage {cov:.3f})" if cov is not None else "")]
    lines += [f"domain {domain}: {describe(s)}" for domain, s in summary["domains"].items()]
    missing = summary["abstained"].get(NO_CALIBRATION)
    if missing:
        names = ", ".join("(no field)" if d is None else repr(d) for d in summary["domains_without_calibration"])
        lines.append(f"{missing} verdicts abstained ({NO_CALIBRATION}): domains {names} have no calibration; "
                     "nothing is guaranteed for them")
    return lines


def remembered(path: Path, calibration: Calibration, items_sha256: str | None) -> dict[str, Any] | None:
    """The latest verification of ``calibration`` (the file at ``path``) on the items with ``items_sha256``; for a
    non-plain one, also a check recorded under its version-1 hash (the same calibration set, before the hash covered
    the estimator: the file refitted at zero calls keeps its checks)."""
    if items_sha256 is None:
        return None
    ledger = _ledger.ledger_path(path)
    found = (_ledger.lookup(ledger, h, items_sha256) for h in known_hashes(calibration))
    return next((entry for entry in found if entry is not None), None)


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


def _written(summary: dict[str, Any], summary_out: Path | None) -> dict[str, Any]:
    """``summary``, written to ``--summary`` first where one was given."""
    if summary_out is not None:
        with atomic_output(summary_out, "--summary") as fh:
            fh.write(json.dumps(summary, indent=2) + "\n")
    return summary
