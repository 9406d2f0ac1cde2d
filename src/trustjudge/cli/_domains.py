"""``select --calibration-by FIELD``: a calibration per domain, chosen per item by an item field
(:mod:`trustjudge._domains`). ``--calibration`` is then a JSON map file of domain -> calibration file, or repeated
as ``DOMAIN=cal.json``; each domain's guarantee is printed on its own line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from ..audit import _ledger
from ..audit._domains import DomainCalibrations, select_by_domain
from ..audit._trust import abstained_items
from ..io._outputs import check_outputs
from ..modes._registry import get_mode
from ._calibrated import domain_lines, domain_verifications, judged_once, with_verifications, write_selected
from ._common import err, progress
from ._inputs import digest, item_dict, read_items
from ._options import JudgeOptions


def domain_calibrations(field: str, given: tuple[str, ...]) -> DomainCalibrations:
    """``--calibration`` values under ``--calibration-by``: one map file, or ``DOMAIN=PATH`` each."""
    if len(given) == 1 and "=" not in given[0]:
        return DomainCalibrations.load(given[0], field)
    pairs: dict[str, str] = {}
    for value in given:
        domain, sep, path = value.partition("=")
        if not sep or not domain or not path:
            raise click.BadParameter(f"with --calibration-by, give DOMAIN=PATH (or one JSON map file), got {value!r}",
                                     param_hint="--calibration")
        if domain in pairs:
            raise click.BadParameter(f"domain {domain!r} given twice", param_hint="--calibration")
        pairs[domain] = path
    return DomainCalibrations.of_files(field, pairs)


def select_domains(items: Path, fmt: str, skip_invalid: bool, quiet: bool, judging: JudgeOptions, field: str,
                   given: tuple[str, ...], target: float | None, delta: float, override: bool,
                   outputs: dict[str, Path | None], other: str | None = None, force_delta: bool = False) -> None:
    """``select --calibration-by FIELD``: judge ITEMS, each verdict calibrated by its item's domain's file
    (``other``: a --cascade or --scale given too, refused)."""
    if other is not None:
        raise click.UsageError("--calibration-by takes neither --cascade nor --scale")
    if outputs["--abstained-out"] is not None and target is None:
        raise click.UsageError("--abstained-out needs --target-agreement (nothing abstains without a target)")
    cals = domain_calibrations(field, given)
    for domain, cal in cals.calibrations.items():
        judged_once(cal, f"domain {domain!r} ({cals.files.get(domain)})")
    judging.guard(items, outputs)
    check_outputs(outputs, inputs=[Path(f) for f in cals.files.values()])
    cals.selections(target, delta, force_delta)  # refuse a target some domain cannot support before any judging
    todo = read_items(items, skip_invalid, get_mode(cals.mode).min_responses, fmt)
    j = judging.make()
    j.source = str(items)
    try:
        with progress(quiet) as bar:
            task = bar.add_task(f"select {cals.mode} by {field} ({j.name})", total=None)
            records, summary = select_by_domain(j, todo, cals, target=target, delta=delta, override=override,
                                                progress=lambda n: bar.advance(task, n), force_delta=force_delta)
        verifications = domain_verifications(cals, digest(items))  # each domain's remembered check on ITEMS
        of_item = {it.id: cals.domain_of(it) for it in todo}
        for domain, found in verifications.items():
            cal = cals.calibrations[domain]
            mine = [r for r in records if of_item.get(str(r.get("item_id"))) == domain]
            _ledger.stamp(cals.mode, mine, cal.map.classes, cal.levels, found)
        with_verifications(summary, verifications)
        write_selected(outputs, records, summary,
                       lambda: abstained_items(cals.mode, records, {it.id: item_dict(it) for it in todo}))
        if not quiet:
            _print(summary, j.stats)
    finally:
        j.close()


def _print(summary: dict[str, Any], stats: Any) -> None:
    cov = summary["coverage"]
    err.print(escape(f"select {summary['mode']} by {summary['calibration_by']}: {summary['verdicts']} verdicts, kept "
                     f"{summary['kept']}" + (f" (coverage {cov:.2f})" if cov is not None else "")
                     + f"; model calls {stats.model_calls}, from store {stats.from_store}"), highlight=False)
    for line in domain_lines(summary)[1:]:
        err.print(escape(line), highlight=False)
