"""The verification sample on the service (issue 34): ``POST /v1/verification/sample`` draws a seeded, stratified
sample of the calibrated records a judging route returned (as ``trustjudge sample`` does, through
:func:`~trustjudge.audit._sample.verification_sample`: records the calibration did not annotate are a 422), and
``POST /v1/verification/check`` tests the labelled sample exactly (as ``trustjudge check-sample``). Zero model
calls; nothing is remembered on the server (the client keeps the sample and its result)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from pydantic import Field

from ..audit import _sample as V
from ..audit._trust import Calibration
from ..errors import ConfigError, InputError
from ._bodies import Body
from ._domains import calibration_json
from ._errors import ERRORS

MAX_RECORDS = 100_000
"""Most records one sample request may send."""


class SampleRequest(Body):
    records: list[dict[str, Any]] = Field(
        ..., max_length=MAX_RECORDS,
        description="The records a calibrated route returned with target_agreement (each verdict's `calibrated` "
                    "block says whether it was kept): they are re-annotated under the calibration (zero calls) "
                    "and a verdict or kept flag it does not give is a 422 naming the record and field.")
    calibration: dict[str, Any] | None = Field(None, description="The calibration the records were annotated by.")
    calibration_name: str | None = Field(None, description="Or the name of one the server holds.")
    target_agreement: float = Field(..., gt=0.0, lt=1.0, description="The target the records were annotated at.")
    risk_delta: float = Field(0.1, gt=0.0, lt=1.0, description="The risk level they were annotated at.")
    size: int | None = Field(None, ge=1, description="Kept verdicts to sample (default: from precision).")
    precision: float = Field(0.05, gt=0.0, lt=1.0,
                             description="Without size: the half-width wanted of the one-sided interval.")
    abstained_size: int | None = Field(None, ge=0,
                                       description="Abstained verdicts to sample (default: a quarter of size).")
    seed: int = Field(0, ge=0, description="The same records, seed and sizes always draw the same sample.")


class Label(Body):
    key: list[str | int] = Field(..., min_length=2, description="A sampled verdict's `key`, as the sample gave it.")
    human: str | float | None = Field(..., description="Its human label: a class name (on a scale, a score); "
                                                       "null: not labelled.")


class CheckRequest(Body):
    sample: dict[str, Any] = Field(..., description="The object /v1/verification/sample returned.")
    labels: list[Label] = Field(..., max_length=MAX_RECORDS, description="The labels of the sampled verdicts.")


def _calibration(body: SampleRequest, named: Mapping[str, Calibration]) -> Calibration:
    if (body.calibration is None) == (body.calibration_name is None):
        raise InputError("give the calibration the records were annotated by, or the name of one the server holds "
                         "(one of the two)", line=0, field="calibration")
    if body.calibration_name is not None:
        if body.calibration_name not in named:
            raise InputError(f"no calibration named {body.calibration_name!r} on this server", line=0,
                             field="calibration_name")
        return named[body.calibration_name]
    return calibration_json(body.calibration or {}, "calibration", "calibration: ")


def verification_routes(app: FastAPI, named: Mapping[str, Calibration]) -> None:
    """``/v1/verification/sample`` and ``/v1/verification/check``."""
    @app.post("/v1/verification/sample", response_model=dict[str, Any], responses=ERRORS, tags=["verification"])
    async def sample(body: SampleRequest) -> dict[str, Any]:
        """Draw a verification sample of calibrated records (zero model calls): label its units, then check it."""
        cal = _calibration(body, named)

        def draw() -> dict[str, Any]:
            try:
                drawn = V.verification_sample(body.records, cal, target=body.target_agreement, delta=body.risk_delta,
                                              size=body.size, precision=body.precision,
                                              abstained_size=body.abstained_size, seed=body.seed)
            except ConfigError as exc:
                raise InputError(str(exc), line=0, field="records") from None
            return drawn.key()

        return await asyncio.to_thread(draw)  # scipy: off the event loop

    @app.post("/v1/verification/check", response_model=dict[str, Any], responses=ERRORS, tags=["verification"])
    async def check(body: CheckRequest) -> dict[str, Any]:
        """Test the labelled sample exactly: holds, refuted or undecided (label_more)."""
        try:
            key = V.checked_key(body.sample, "sample")
        except ConfigError as exc:
            raise InputError(str(exc), line=0, field="sample") from None
        sampled = {tuple(u["key"]) for u in key["units"]}
        labels: dict[tuple[Any, ...], Any] = {}
        for i, label in enumerate(body.labels):
            if tuple(label.key) not in sampled:
                raise InputError(f"labels[{i}]: {label.key!r} is not a sampled verdict's key", line=0, field="labels")
            labels[tuple(label.key)] = label.human
        try:
            return V.check(key, labels)
        except ConfigError as exc:
            raise InputError(str(exc), line=0, field="labels") from None
