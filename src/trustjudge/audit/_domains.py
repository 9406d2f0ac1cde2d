"""Per-domain calibrations: one calibration file per domain, chosen per item by an item field (issue 34).

A guarantee holds where the new verdicts are exchangeable with the calibration set's. Data that mixes domains
(news and dialogue, code and prose) is better served by one calibration per domain than by one fitted on the
mix: each domain's threshold is then tested on that domain's labels, and its guarantee is said separately.
:class:`DomainCalibrations` maps each domain (the value of the item field ``field``, e.g. ``domain`` or
``subset``, as :attr:`~trustjudge.io._items.Item.fields` holds it) to its calibration;
:func:`select_by_domain` judges items and annotates each record with its domain's calibration (and, with a
target, its domain's selection), and :func:`apply_by_domain` does the same to records already judged (zero
model calls). A record whose item has no domain, or a domain with no calibration, has every verdict abstained
with the reason :data:`NO_CALIBRATION`; nothing is guaranteed for it. The summary has one block per domain
(coverage, guarantee, shift warning: :class:`~trustjudge.audit._trust.Tally`'s) under ``domains``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io._files import read_json_file
from ..io._items import Item
from ._calibration import Selection
from ._estimators import judged_once
from ._trust import Calibration, Tally, annotate, units

Judge = Any
"""A :class:`~trustjudge.Judge` (named loosely: the audit layer sits below it and only calls its methods)."""

NO_CALIBRATION = "no_calibration_for_domain"
"""Why a verdict of an item whose domain has no calibration is not kept."""


@dataclasses.dataclass(frozen=True)
class DomainCalibrations:
    """A calibration per domain, the domain of an item being the value of its field ``field``."""

    field: str
    calibrations: Mapping[str, Calibration]
    files: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Where each domain's calibration was read from (for the summary), where it was."""

    def __post_init__(self) -> None:
        if not self.field:
            raise ConfigError("per-domain calibrations need the item field that names the domain")
        if not self.calibrations:
            raise ConfigError("per-domain calibrations need at least one domain's calibration")
        modes = sorted({c.mode for c in self.calibrations.values()})
        if len(modes) > 1:
            raise ConfigError(f"the domains' calibrations are of different modes ({', '.join(modes)}): one run judges "
                              "one mode")

    @property
    def mode(self) -> str:
        return next(iter(self.calibrations.values())).mode

    @classmethod
    def load(cls, path: str | Path, field_name: str) -> DomainCalibrations:
        """Read a map file: a JSON object of domain -> calibration file (a path relative to the map's folder)."""
        path = Path(path)
        data = read_json_file(path, "the domain map")
        if not isinstance(data, dict) or not data:
            raise ConfigError(f"{path}: a domain map is a JSON object of domain -> calibration file")
        cals, files = {}, {}
        for domain, file in data.items():
            if not isinstance(file, str) or not file:
                raise ConfigError(f"{path}: field {domain!r} is not the path of a calibration file")
            where = Path(file) if Path(file).is_absolute() else path.parent / file
            cals[domain], files[domain] = Calibration.load(where), str(where)
        return cls(field_name, cals, files)

    @classmethod
    def of_files(cls, field_name: str, given: Mapping[str, str | Path]) -> DomainCalibrations:
        """Per-domain calibrations from ``{domain: calibration file}``."""
        return cls(field_name, {d: Calibration.load(p) for d, p in given.items()},
                   {d: str(p) for d, p in given.items()})

    def selections(self, target: float | None, delta: float,
                   force_delta: bool = False) -> dict[str, Selection | None]:
        """Each domain's selection for ``target`` (None without one); a domain that cannot support it is refused,
        named (a delta above 0.5 only with ``force_delta``)."""
        out: dict[str, Selection | None] = {}
        for domain, cal in self.calibrations.items():
            try:
                out[domain] = cal.selection(target, delta, force_delta) if target is not None else None
            except ConfigError as exc:
                raise ConfigError(f"domain {domain!r} ({self.files.get(domain, 'its calibration')}): {exc}") from None
        return out

    def domain_of(self, item: Item) -> str | None:
        """An item's domain: the value of its field (None when it has none); a number or a boolean by its JSON
        spelling (``true``, ``3``: what a domain map's key says), a list or an object refused naming the item."""
        value = item.fields.get(self.field)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, (bool, int, float)):
            return json.dumps(value)
        raise ConfigError(f"item {item.id!r}: field {self.field!r} is a {type(value).__name__}, not a domain name "
                          "(a string, a number or a boolean)")


def _blocks(mode: str, record: dict[str, Any], classes: Sequence[str], levels: Sequence[float] | None) -> list[Any]:
    out = []
    for unit in units(mode, [record], classes, levels):
        target: Any = record
        for step in unit.path:
            target = target[step]
        out.append(target)
    return out


def annotate_by_domain(records: Sequence[Mapping[str, Any]], domains: Sequence[str | None],
                       calibrations: DomainCalibrations,
                       selections: Mapping[str, Selection | None]) -> list[dict[str, Any]]:
    """Copies of ``records`` (``domains``: each one's domain), each verdict annotated by its domain's calibration
    and selection, with ``domain`` in its block; a domain without a calibration abstains (:data:`NO_CALIBRATION`)."""
    mode = calibrations.mode
    first = next(iter(calibrations.calibrations.values()))
    out = []
    for rec, domain in zip(records, domains):
        cal = calibrations.calibrations.get(domain) if domain is not None else None
        if cal is not None:
            row = annotate(mode, [dict(rec)], cal, selections.get(str(domain)))[0]
            for part in _blocks(mode, row, cal.map.classes, cal.levels):
                part["calibrated"]["domain"] = domain
        else:
            row = json.loads(json.dumps(rec))
            for part in _blocks(mode, row, first.map.classes, first.levels):
                part["calibrated"] = {"probabilities": None, "verdict": None, "confidence": None,
                                      "abstained": NO_CALIBRATION, "domain": domain}
        out.append(row)
    return out


class DomainTally:
    """The summary of a per-domain run, record by record: each domain's :class:`~trustjudge.audit._trust.Tally`
    and the verdicts of items whose domain has no calibration."""

    def __init__(self, calibrations: DomainCalibrations, selections: Mapping[str, Selection | None]) -> None:
        self.calibrations = calibrations
        self.tallies = {d: Tally(calibrations.mode, cal, selections.get(d))
                        for d, cal in calibrations.calibrations.items()}
        self.uncovered = 0
        self.seen: set[str | None] = set()

    def add(self, record: Mapping[str, Any], domain: str | None) -> None:
        if domain is not None and domain in self.tallies:
            self.tallies[domain].add(record)
            return
        first = next(iter(self.calibrations.calibrations.values()))
        self.uncovered += len(_blocks(self.calibrations.mode, dict(record), first.map.classes, first.levels))
        self.seen.add(domain)

    def result(self) -> dict[str, Any]:
        per = {d: t.result() for d, t in self.tallies.items()}
        for d, s in per.items():
            if d in self.calibrations.files:
                s["calibration"]["file"] = self.calibrations.files[d]
        verdicts = sum(s["verdicts"] for s in per.values()) + self.uncovered
        kept = sum(s["kept"] for s in per.values())
        abstained: dict[str, int] = {}
        for s in per.values():
            for reason, n in s["abstained"].items():
                abstained[reason] = abstained.get(reason, 0) + n
        if self.uncovered:
            abstained[NO_CALIBRATION] = self.uncovered
        return {"mode": self.calibrations.mode, "calibration_by": self.calibrations.field, "verdicts": verdicts,
                "kept": kept, "coverage": kept / verdicts if verdicts else None,
                "abstained": dict(sorted(abstained.items())), "domains": per,
                "domains_without_calibration": sorted(self.seen, key=lambda d: (d is not None, d or ""))}


def summary_by_domain(annotated: Sequence[Mapping[str, Any]], domains: Sequence[str | None],
                      calibrations: DomainCalibrations, selections: Mapping[str, Selection | None]) -> dict[str, Any]:
    """The run's totals and, under ``domains``, each domain's own summary (coverage, guarantee, shift)."""
    tally = DomainTally(calibrations, selections)
    for rec, domain in zip(annotated, domains):
        tally.add(rec, domain)
    return tally.result()


def select_by_domain(judge: Judge, items: Iterable[Item], calibrations: DomainCalibrations, *,
                     target: float | None = None, delta: float = 0.1, override: bool = False,
                     progress: Any = None, force_delta: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """:meth:`Judge.select` with a calibration per domain: judge ``items`` in the calibrations' mode and annotate
    each record with its item's domain's calibration (a domain without one: every verdict abstained)."""
    todo = list(items)
    for domain, cal in calibrations.calibrations.items():  # refused before any judging, not once all is judged
        judged_once(cal, f"domain {domain!r} ({calibrations.files.get(domain, 'its calibration')})",
                    "a per-domain run", "apply it with Judge.select and one calibration")
    checked = {d: judge.check_calibration(c, override=override) for d, c in calibrations.calibrations.items()}
    cals = DomainCalibrations(calibrations.field, checked, calibrations.files)
    selections = cals.selections(target, delta, force_delta)
    of_item = {it.id: cals.domain_of(it) for it in todo}
    task = judge.calibration_task(cals.mode)
    records = [r.to_dict() for r in judge.run(task, todo, progress=progress)]
    domains = [of_item.get(str(r.get("item_id"))) for r in records]
    annotated = annotate_by_domain(records, domains, cals, selections)
    return annotated, summary_by_domain(annotated, domains, cals, selections)


def apply_by_domain(judge: Judge, records: Iterable[Any], items: Iterable[Item], calibrations: DomainCalibrations, *,
                    target: float | None = None, delta: float = 0.1,
                    override: bool = False, force_delta: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """:meth:`Judge.apply_calibration` with a calibration per domain, on records already judged (zero model
    calls); ``items`` give each record's domain (by its ``item_id``)."""
    rows = [r if isinstance(r, dict) else r.to_dict() for r in records]
    checked = {d: judge.check_calibration(c, override=override) for d, c in calibrations.calibrations.items()}
    cals = DomainCalibrations(calibrations.field, checked, calibrations.files)
    selections = cals.selections(target, delta, force_delta)
    of_item = {it.id: cals.domain_of(it) for it in items}
    domains = [of_item.get(str(r.get("item_id"))) for r in rows]
    annotated = annotate_by_domain(rows, domains, cals, selections)
    return annotated, summary_by_domain(annotated, domains, cals, selections)
