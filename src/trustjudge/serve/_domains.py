"""Per-domain calibrations on the service's calibrated routes (issue 34): ``calibration_by`` names the item
field that gives each item's domain, ``domain_calibrations`` each domain's calibration (a name the server holds,
or a calibration's JSON object); each verdict is annotated by its item's domain's, as ``select --calibration-by``
and the judging commands' ``--calibration-by`` do (:mod:`trustjudge.audit._domains`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi.responses import JSONResponse

from .._judge import Judge
from ..audit._calibration import Selection
from ..audit._domains import DomainCalibrations, annotate_by_domain, summary_by_domain
from ..audit._estimators import judged_once
from ..audit._trust import Calibration
from ..errors import ConfigError, InputError
from ..io._items import Item
from ..modes._base import Task

Prepared = tuple[DomainCalibrations, dict[str, Selection | None]]


SERVICE_INSTEAD = ("select with `trustjudge select --calibration FILE` (zero calls where the store holds the "
                   "judgments), or fit one without --confidence for the service")
"""How to apply an ensemble or panel calibration the service refuses (it judges each pair once)."""


def calibration_json(data: Mapping[str, Any], field: str, prefix: str = "") -> Calibration:
    """A calibration file's JSON object sent in a request; a 422 on ``field`` when it is not one (``prefix``
    heads the message of bad parameters)."""
    try:
        return Calibration.from_dict(data, field)
    except ConfigError as exc:
        raise InputError(str(exc), line=0, field=field) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{prefix}bad parameters ({exc})", line=0, field=field) from None


def _one(judge: Judge, body: Any, task: Task, named: Mapping[str, Calibration], domain: str, value: Any) -> Calibration:
    where = f"domain_calibrations.{domain}"
    if isinstance(value, str):
        if value not in named:
            held = f"it holds {', '.join(sorted(named))}" if named else "it was started without any"
            raise InputError(f"no calibration named {value!r} on this server ({held})", line=0, field=where)
        cal = named[value]
    else:
        cal = calibration_json(value, where)
    try:
        judged_once(cal, f"domain {domain!r}", "the service", SERVICE_INSTEAD)  # as the request's one calibration
    except ConfigError as exc:
        raise InputError(str(exc), line=0, field=where) from None
    try:
        checked = judge.check_calibration(cal, override=body.calibration_override, task=task)
        checked.check_tolerance(getattr(body, "tolerance", None))
    except ConfigError as exc:
        raise InputError(f"domain {domain!r}: {exc}", line=0, field=where) from None
    return checked


async def prepare_domains(judge: Judge, body: Any, task: Task, named: Mapping[str, Calibration]) -> Prepared | None:
    """The request's per-domain calibrations, checked against the judge and the task, and their selections (422
    naming the field when one is bad, unknown or cannot support the target); None when the request has none."""
    by, given = body.calibration_by, body.domain_calibrations
    if by is None and given is None:
        return None
    if by is None or not given:
        raise InputError("per-domain calibrations need both calibration_by (the item field naming the domain) and "
                         "domain_calibrations", line=0, field="calibration_by" if by is None else "domain_calibrations")
    if body.calibration is not None or body.calibration_name is not None:
        raise InputError("give calibration (or calibration_name) or per-domain calibrations, not both", line=0,
                         field="domain_calibrations")

    def prepare() -> Prepared:  # scipy, and the backend's fingerprint: off the event loop
        cals = {domain: _one(judge, body, task, named, domain, value) for domain, value in given.items()}
        try:
            domains = DomainCalibrations(by, cals)
        except ConfigError as exc:
            raise InputError(str(exc), line=0, field="domain_calibrations") from None
        try:
            return domains, domains.selections(body.target_agreement, body.risk_delta, body.force_delta)
        except ConfigError as exc:
            raise InputError(str(exc), line=0, field="target_agreement") from None

    return await asyncio.to_thread(prepare)


async def respond_domains(records: list[dict[str, Any]], items: Sequence[Item], prepared: Prepared) -> JSONResponse:
    """The records, each annotated by its item's domain's calibration, and the per-domain summary."""
    domains, selections = prepared

    def apply() -> dict[str, Any]:
        of_item = {it.id: domains.domain_of(it) for it in items}
        of_record = [of_item.get(str(r.get("item_id"))) for r in records]
        annotated = annotate_by_domain(records, of_record, domains, selections)
        return {"records": annotated, "calibration": summary_by_domain(annotated, of_record, domains, selections)}

    return JSONResponse(await asyncio.to_thread(apply))
