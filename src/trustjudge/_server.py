"""``trustjudge serve``: an HTTP API (FastAPI) over one :class:`~trustjudge.Judge`.

Endpoints (JSON in, JSON out)::

    GET  /healthz      liveness and judge name (never needs a key; no paths or other server details)
    POST /v1/score     {"items": [...], "scale": 10, "protocol": null}      -> {"records": [score records]}
    POST /v1/compare   {"items": [...], "delta": 0.0, "protocol": null}      -> {"records": [compare records]}
    POST /v1/criteria  {"items": [...], "criteria": [...], "reweight": false}  -> {"records": [criteria records]}
    POST /v1/criteria/compare {"items": [...], "criteria", "graded": false} -> {"records": [per-criterion pairs]}
    POST /v1/checklist {"items": [...], "checklist": [...], "labels": null}   -> {"records": [checklist records]}
    POST /v1/claims    {"items": [...], "k": null, "match": false}           -> {"records": [claims records]}
    POST /v1/audit     {"items": [...], "scales": [5, 100], "delta", "ks", "bootstrap", "seed"} -> audit report
    POST /v1/rank      {"items": [...], "scale", "method", "bootstrap", ...}  -> ranking of the systems
    GET  /v1/stats     request, batch and model-call counters

compare, checklist and claims also take a `calibration` (a calibration file's JSON object), with optional
`target_agreement`, `risk_delta` and `calibration_override`: each record's verdicts gain a `calibrated` block
and the response a `calibration` summary (a calibration that does not fit: 422 naming why).

Items have the schema of one JSONL line (README, "Input") and are validated by the library
(:func:`trustjudge.items_from_dicts`). Records are exactly the dicts the CLI writes.

Errors: every error body has a ``detail``. A 422 lists problems as
``{"type", "loc", "msg", "item", "field"}``: ``loc`` is the JSON path in the request
(``["body", "items", 3, "responses", 0, "text"]``; list indexes 0-based), ``item`` the 0-based index
of the bad item (``null`` when the problem is not one item's) and ``field`` the library's field name
(``responses[0].text``). Request-schema problems (``"scale": 7``) use the same shape with ``item``
and ``field`` null. Other errors are ``{"detail": "message"}``: 400 bad option, 401 missing or
wrong key, 408 body not sent in time, 413 body, item count or judgments over the limit, 501 ranking
unavailable, 503 backend failure or store full, 500 anything unexpected (the traceback goes to the
server log only).

Batching: the judge runs in one worker thread (torch models are not thread-safe). Requests wait in
a queue; each time the worker is free it takes every request waiting at that moment (after an
optional ``batch_wait_s`` pause) and merges those of the same task (kind and options) into one judge call
(one engine run, sharing prompt batches and the store), then hands each request its own slice of the
records. Slices are cut by position (the judge emits records in input order), so concurrent
requests may reuse item ids freely.

Run ``python -m trustjudge._server --write-openapi docs/openapi.json`` to regenerate the committed
OpenAPI schema.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import hmac
import importlib
import json
import logging
import queue
import re
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, SkipValidation
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._items import Item, items_from_dicts, parse_checklist, parse_criteria
from ._calibration import Selection
from ._judge import Judge
from ._prompts import YES_NO, LabelSet, Protocol
from ._schema import (
    ChecklistRecord,
    ClaimsRecord,
    CompareRecord,
    CriteriaCompareRecord,
    CriteriaRecord,
    ScoreRecord,
)
from ._tasks import Task
from ._trust import Calibration, annotate
from ._trust import summary as trust_summary
from ._store import Store
from .backends import Backend
from .errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    InputError,
    PrerequisiteError,
    StoreError,
    TrustJudgeError,
)

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_ITEMS", "DEFAULT_MAX_JUDGMENTS", "JudgeWorker", "WorkerStats",
           "create_app", "uvicorn_options"]

log = logging.getLogger("trustjudge.server")

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_ITEMS = 1000
DEFAULT_MAX_JUDGMENTS = 10_000
DEFAULT_BODY_TIMEOUT_S = 30.0
DRAIN_LIMIT_BYTES = 64 * 1024 * 1024
API_VERSION = "1.0.0"
OPEN_PATHS = frozenset({"/healthz"})
MAX_BOOTSTRAP = 10_000

Scale = Literal[5, 10, 100]


# -- request and response bodies --------------------------------------------------------------------
# The item models only document the schema (SkipValidation below): the library validates items, so
# the HTTP API accepts exactly what a JSONL file accepts and reports problems the same way.


class CriterionIn(BaseModel):
    """A rubric criterion."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="Unique within the item (or suite).")
    description: str = Field(description="What the criterion asks.")
    weight: float = Field(1.0, ge=0.0, description="Weight in the aggregate.")
    levels: list[str] | None = Field(None, description="Descriptions of the levels 1..N, lowest first (2-10); "
                                                       "default: the request's scale.")


class CheckIn(BaseModel):
    """A yes/no checklist question."""

    model_config = ConfigDict(extra="forbid")
    id: str | None = Field(None, description="Default: the check's 1-based position.")
    text: str = Field(description="The question asked about the response.")
    weight: float = Field(1.0, ge=0.0, description="Weight in the expected satisfaction.")


class ClaimIn(BaseModel):
    """A claim a response makes, given instead of extracted by the judge (/v1/claims)."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="The claim.")
    human: str | None = Field(None, description="Human verification label: SUPPORTED, PARTIAL, UNSUPPORTED or "
                                                "UNKNOWN (any case), for the audit.")


class ResponseIn(BaseModel):
    """One response to judge."""

    model_config = ConfigDict(extra="allow")
    id: str | None = Field(None, description="Unique within the item; default: the response's 0-based index.")
    text: str = Field(description="The response text (may be empty: then it is unscored, `empty_response`).")
    system: str | None = Field(None, description="The system that wrote it (used by /v1/rank).")
    human_score: float | None = Field(None, description="Optional human score, for the audit.")
    checklist: list[CheckIn | str] | None = Field(None, description="Checks asked of this response only.")
    human_criteria: dict[str, float] | None = Field(None, description="Human score per criterion name.")
    human_checks: dict[str, bool | float | str] | None = Field(
        None, description="Human label per check id: true/false, a number in [0, 1], or a label name.")
    claims: list[ClaimIn | str] | None = Field(
        None, description="The response's claims (/v1/claims), verified as given; default: extracted by the judge.")


class PairIn(BaseModel):
    """Two responses of an item to compare."""

    model_config = ConfigDict(extra="allow")
    first: str = Field(description="Response id shown first.")
    second: str = Field(description="Response id shown second.")
    human: str | None = Field(None, description="Human preference: first/second/tie (also A/B/C, 1/2/0).")
    annotators: list[str] | None = Field(None, description="Each annotator's preference.")


class ItemIn(BaseModel):
    """A question with its responses: the schema of one JSONL line (nested or flat pairwise form)."""

    model_config = ConfigDict(extra="allow")
    id: str | None = Field(None, description="Item id (required in the nested form).")
    question: str
    context: str | None = Field(None, description="Optional input or context (`input` is a synonym).")
    input: str | None = None
    reference: str | None = Field(None, description="Optional reference answer.")
    responses: list[ResponseIn] | None = Field(None, description="Nested form: one or more responses.")
    pairs: list[PairIn] | None = Field(None, description="Pairs to compare; default: every pair of responses.")
    response_a: str | None = Field(None, description="Flat pairwise form: first response.")
    response_b: str | None = Field(None, description="Flat pairwise form: second response.")
    system_a: str | None = None
    system_b: str | None = None
    label: str | None = Field(None, description="Flat pairwise form: human preference (A/B/C, ...).")
    profile: str | None = Field(None, description="Who the answer is for (grounding, quoted into the prompt).")
    knowledge: str | None = Field(None, description="Knowledge the judgment must be grounded in.")
    evidence: list[str] | str | None = Field(None, description="Passages the judgment is grounded in, in order.")
    criteria: list[CriterionIn] | None = Field(None, description="Rubric criteria of this item (/v1/criteria).")
    checklist: list[CheckIn | str] | None = Field(None, description="Checks asked of every response "
                                                                    "(/v1/checklist).")
    gold_claims: list[str] | None = Field(None, description="Reference claims to match against (/v1/claims with "
                                                            "match); default: claims extracted from the reference.")


Items = SkipValidation[list[ItemIn]]
_ITEMS_DOC = "Items with the schema of one JSONL line; validated by the library (422 names item and field)."


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Calibrated(_Body):
    """The calibration fields of /v1/compare, /v1/checklist and /v1/claims (the modes with calibration units)."""

    calibration: dict[str, Any] | None = Field(
        None, description="A calibration file's JSON object (`trustjudge calibrate` in this route's mode) to apply: "
                          "every verdict also gets a `calibrated` block (probabilities, verdict, confidence; the raw "
                          "fields stay) and the response a `calibration` summary, with zero extra model calls. One "
                          "fitted for another mode, judge, template or protocol is refused (422 naming why).")
    calibration_override: bool = Field(
        False, description="Accept a calibration fitted for another judge, template, protocol or checklist labels "
                           "(every record then lists what was overridden; a mode or class mismatch never is).")
    target_agreement: float | None = Field(
        None, gt=0.0, lt=1.0, description="With calibration: keep only the verdicts confident enough that agreement "
                                           "with humans on the kept ones is >= this with probability >= 1 - "
                                           "risk_delta; the rest get `abstained` with the reason. A target the "
                                           "calibration set cannot support is a 422 before any judging.")
    risk_delta: float = Field(0.1, gt=0.0, lt=1.0, description="With target_agreement: the allowed probability "
                                                                "that the guarantee fails.")


class ScoreRequest(_Body):
    """Score every response of every item."""

    items: Items = Field(description=_ITEMS_DOC)
    scale: Scale = Field(10, description="Rating scale 1..N.")
    protocol: Protocol | None = Field(None, description="direct or cot; default: the server's protocol.")


class CompareRequest(_Calibrated):
    """Compare pairs of responses in both presentation orders."""

    items: Items = Field(description=_ITEMS_DOC + " Each needs two or more responses.")
    delta: float = Field(0.0, ge=0.0, description="Tie margin for likelihood and ppl aggregation.")
    protocol: Protocol | None = Field(None, description="direct or cot; default: the server's protocol.")


class CriteriaRequest(_Body):
    """Judge every response on every criterion (the item's, else the request's) and aggregate by weight."""

    items: Items = Field(description=_ITEMS_DOC)
    criteria: SkipValidation[list[CriterionIn]] | None = Field(
        None, description="Criteria for items that carry none (validated like an item's: 422 names the field).")
    reweight: bool = Field(False, description="Aggregate over the scored criteria when some are unscored "
                                              "(the record lists those left out); default: no aggregate.")
    scale: Literal[5, 10] = Field(5, description="Scale of criteria without level descriptions.")
    protocol: Protocol | None = Field(None, description="direct or cot; default: the server's protocol.")


class CriteriaCompareRequest(_Body):
    """Compare the responses of each item on every criterion, in both presentation orders."""

    items: Items = Field(description=_ITEMS_DOC + " Each needs two or more responses.")
    criteria: SkipValidation[list[CriterionIn]] | None = Field(None, description="Criteria for items that carry none.")
    graded: bool = Field(False, description="5-way verdicts (A>>B .. B>>A) with an expected margin.")
    reweight: bool = Field(False, description="Aggregate over the scored criteria when some are unscored.")
    protocol: Protocol | None = Field(None, description="direct or cot; default: the server's protocol.")


class ClaimsRequest(_Calibrated):
    """Extract (or take) each response's claims, verify them against the item's evidence, and optionally match
    them against gold claims."""

    items: Items = Field(description=_ITEMS_DOC + " Items need evidence, knowledge or a reference.")
    k: int | None = Field(None, ge=1, description="K of E[F1@K] (null: not computed).")
    unknown: bool = Field(False, description="Add UNKNOWN to the verification labels (reported apart).")
    match: bool = Field(False, description="Match against the items' gold_claims (else claims of the reference).")
    min_overlap: float = Field(0.0, ge=0.0, le=1.0, description="Matching prefilter: least word overlap judged.")


class ChecklistRequest(_Calibrated):
    """Ask every response every check of its checklist (the item's and its own, else the request's)."""

    items: Items = Field(description=_ITEMS_DOC)
    checklist: SkipValidation[list[CheckIn | str]] | None = Field(
        None, description="Checks for responses whose item carries none.")
    labels: str | None = Field(None, description='The label set, e.g. "FULL=1,PARTIAL=0.5,NO=0"; default '
                                                 '"YES=1,NO=0".')
    reweight: bool = Field(False, description="Aggregate over the scored checks when some are unscored.")
    protocol: Protocol | None = Field(None, description="direct or cot; default: the server's protocol.")


class AuditRequest(_Body):
    """Judge what the store lacks, then audit consistency and agreement with human labels."""

    items: Items = Field(description=_ITEMS_DOC)
    scales: list[Scale] = Field([5, 100], min_length=1, description="Pointwise scales to judge and audit.")
    delta: float = Field(0.0, ge=0.0, description="Score tolerance of the conflict ratio.")
    ks: list[int] = Field([3, 4, 5], min_length=1, description="Subset sizes k (>= 3) for NTR_k.")
    bootstrap: int = Field(1000, ge=0, le=MAX_BOOTSTRAP, description="Bootstrap resamples (0: no intervals).")
    seed: int = Field(0, description="Bootstrap seed.")
    protocol: Protocol | None = Field(None, description="direct or cot; default: the server's protocol.")


class RankRequest(_Body):
    """Judge the items (pairwise and pointwise) and rank the systems behind the responses."""

    items: Items = Field(description=_ITEMS_DOC + " Responses need `system`; items need two or more responses.")
    scale: Scale = Field(10, description="Scale of the mean-score ranking.")
    delta: float = Field(0.0, ge=0.0, description="Tie margin of the pairwise verdicts.")
    method: Literal["single", "two_pass", "likelihood", "ppl"] = Field(
        "likelihood", description="Aggregation whose verdicts give the hard fit, Elo and win rates.")
    score_method: Literal["discrete", "geval", "expected", "trustjudge"] = "trustjudge"
    ties: Literal["davidson", "rao-kupper"] = "davidson"
    bootstrap: int = Field(200, ge=0, le=MAX_BOOTSTRAP, description="Bootstrap replicates over items (0: none).")
    seed: int = 0
    protocol: Protocol | None = Field(None, description="direct or cot; default: the server's protocol.")


class ScoreResponse(BaseModel):
    """Score records in input order, item by item."""

    records: list[ScoreRecord]


class CompareResponse(BaseModel):
    """Compare records in input order."""

    records: list[CompareRecord]
    calibration: dict[str, Any] | None = Field(None, description="With a request calibration: coverage, the "
                                                            "guarantee and the calibration set it rests on.")


class CriteriaResponse(BaseModel):
    """Criteria records in input order, one per response."""

    records: list[CriteriaRecord]


class CriteriaCompareResponse(BaseModel):
    """Per-criterion pairwise records in input order, one per pair."""

    records: list[CriteriaCompareRecord]


class ClaimsResponse(BaseModel):
    """Claims records in input order, one per response."""

    records: list[ClaimsRecord]
    calibration: dict[str, Any] | None = Field(None, description="With a request calibration: coverage, the "
                                                            "guarantee and the calibration set it rests on.")


class ChecklistResponse(BaseModel):
    """Checklist records in input order, one per response."""

    records: list[ChecklistRecord]
    calibration: dict[str, Any] | None = Field(None, description="With a request calibration: coverage, the "
                                                            "guarantee and the calibration set it rests on.")


Prepared = tuple[Calibration, Selection | None]


async def _prepare_calibration(judge: Judge, body: _Calibrated, task: Task) -> Prepared | None:
    """The request's calibration checked against the judge and the task, and its selection (422 naming the
    field when the file is bad, does not fit, or cannot support the target); None without one."""
    if body.calibration is None:
        if body.target_agreement is not None:
            raise InputError("needs a calibration to choose the threshold on", line=0, field="target_agreement")
        return None
    data = body.calibration

    def prepare() -> Prepared:  # scipy, and the backend's fingerprint: off the event loop
        try:
            cal = Calibration.from_dict(data, "calibration")
        except ConfigError as exc:
            raise InputError(str(exc), line=0, field="calibration") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"calibration: bad parameters ({exc})", line=0, field="calibration") from None
        try:
            selection = cal.selection(body.target_agreement, body.risk_delta) \
                if body.target_agreement is not None else None
        except ConfigError as exc:
            raise InputError(str(exc), line=0, field="target_agreement") from None
        try:
            return judge.check_calibration(cal, override=body.calibration_override, task=task), selection
        except ConfigError as exc:
            raise InputError(str(exc), line=0, field="calibration") from None

    return await asyncio.to_thread(prepare)


async def _respond(records: list[dict[str, Any]], prepared: Prepared | None) -> JSONResponse:
    """The records, annotated with the calibration and followed by its summary when the request gave one."""
    if prepared is None:
        return _records(records)
    cal, selection = prepared

    def apply() -> dict[str, Any]:
        annotated = annotate(cal.mode, records, cal, selection)
        return {"records": annotated, "calibration": trust_summary(cal.mode, annotated, cal, selection)}

    return JSONResponse(await asyncio.to_thread(apply))


class Health(BaseModel):
    """Liveness and what the server judges with."""

    status: Literal["ok"]
    judge: str


class Stats(BaseModel):
    """Counters since the server started."""

    requests: int = Field(description="Score/compare/audit requests the worker ran.")
    engine_runs: int = Field(description="Judge calls made (one per merged batch of requests).")
    merged_requests: int = Field(description="Requests that shared a judge call with another request.")
    judgments: int = Field(description="Records returned.")
    model_calls: int
    from_store: int


class ProblemOut(BaseModel):
    """One validation problem."""

    type: str
    loc: list[str | int] = Field(
        description='JSON path in the request, e.g. ["body", "items", 3, "responses", 0, "text"].')
    msg: str
    item: int | None = Field(None, description="0-based index of the bad item, if one item is at fault.")
    field: str | None = Field(None, description="The library's field name, e.g. `responses[0].text`.")


class ValidationErrorOut(BaseModel):
    """422: what is wrong with the request."""

    detail: list[ProblemOut]


class ErrorOut(BaseModel):
    """Any other error."""

    detail: str


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Bad option"},
    401: {"model": ErrorOut, "description": "Missing or wrong API key (when the server has keys)"},
    413: {"model": ErrorOut, "description": "Body, item count or judgment count over the server's limit"},
    422: {"model": ValidationErrorOut, "description": "Invalid request or item"},
    503: {"model": ErrorOut, "description": "The judge backend failed"},
}


# -- the judge worker ---------------------------------------------------------------------------------


@dataclass
class WorkerStats:
    """Counters of a :class:`JudgeWorker` (written by the worker thread only)."""

    requests: int = 0
    engine_runs: int = 0
    merged_requests: int = 0
    judgments: int = 0


@dataclass
class _Request:
    """One queued request: a task over items (``None`` for an audit, with its options)."""

    task: Task | None
    items: list[Item]
    options: dict[str, Any]
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)

    @property
    def group(self) -> Any:
        if self.task is None:  # an audit is an aggregate over its own items: never merged
            return ("audit", id(self))
        return self.task  # frozen: equal tasks (kind and options) merge


class JudgeWorker:
    """Runs every judgment of a server in one thread, merging concurrent requests into one judge call.

    Args:
        judge: The server's judge; every request's task runs on it (one backend, one store).
        batch_wait_s: How long the worker waits after the first request of a batch for others to
            arrive (0: merge only what is already waiting).
    """

    def __init__(self, judge: Judge, batch_wait_s: float = 0.0) -> None:
        self.judge = judge
        self._wait = max(0.0, batch_wait_s)
        self._queue: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.stats = WorkerStats()

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the judge worker is stopped")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="trustjudge-judge", daemon=True)
                self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Finish the requests already queued, then end the thread."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout)

    async def submit(self, task: Task | None, items: list[Item], *, audit: dict[str, Any] | None = None) -> Any:
        """Queue one request and wait for its result.

        Args:
            task: What to judge (requests of equal tasks merge), or ``None`` for an audit.
            items: Validated items.
            audit: :meth:`Judge.audit` keyword arguments (scales, delta, ks, bootstrap, seed, protocol).

        Returns:
            The request's records as dicts, or the audit report dict.
        """
        self._start()
        request = _Request(task, items, audit or {})
        self._queue.put(request)
        return await asyncio.wrap_future(request.future)

    def _loop(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                return
            if self._wait:
                time.sleep(self._wait)
            requests = [first]
            while True:
                try:
                    request = self._queue.get_nowait()
                except queue.Empty:
                    break
                if request is None:
                    stopping = True
                    break
                requests.append(request)
            groups: dict[Any, list[_Request]] = {}
            for request in requests:
                if request.future.set_running_or_notify_cancel():  # False: the client went away
                    groups.setdefault(request.group, []).append(request)
            for group in groups.values():
                self._run_group(group)

    def _run_group(self, group: list[_Request]) -> None:
        try:
            results = self._run(group)
        except Exception as exc:  # noqa: BLE001 - handed to the waiting requests; the handlers map it to a status
            if len(group) > 1 and not isinstance(exc, BackendUnavailable):
                # One request's problem must not fail the requests merged with it: run each apart
                # (what the merged run finished is in the store, so nothing is judged twice).
                for task in group:
                    self._run_group([task])
                return
            for task in group:
                task.future.set_exception(exc)
            return
        for task, result in zip(group, results):
            task.future.set_result(result)

    def _run(self, group: list[_Request]) -> list[Any]:
        head = group[0]
        self.stats.requests += len(group)
        self.stats.engine_runs += 1
        if len(group) > 1:
            self.stats.merged_requests += len(group)
        if head.task is None:
            return [self.judge.audit(head.items, **head.options).report.to_dict()]
        task = head.task
        merged = [item for request in group for item in request.items]
        counts = [sum(task.count(it) for it in request.items) for request in group]
        expected = [it.id for it in merged for _ in range(task.count(it))]
        records = [r.to_dict() for r in self.judge.run(task, merged)]
        if [r["item_id"] for r in records] != expected:
            # slicing by position relies on input order: never hand out someone else's records
            raise RuntimeError("judge records are not in input order; cannot split a merged batch")
        self.stats.judgments += len(records)
        results: list[Any] = []
        start = 0
        for n in counts:
            results.append(records[start:start + n])
            start += n
        return results


# -- security and size limits ---------------------------------------------------------------------


class _Guard:
    """ASGI middleware: API keys, then the body size limit, before any route reads the body.

    The body is read here (so that a chunked body over the limit is refused as it streams) and
    replayed to the app.
    """

    def __init__(self, app: ASGIApp, *, keys: Sequence[str], max_body_bytes: int,
                 body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S) -> None:
        self.app = app
        self.keys = tuple(k.encode() for k in keys)
        self.max_body = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def _receive(self, receive: Receive) -> Message | None:
        """The next body message, or ``None`` when the client sends nothing for ``body_timeout_s``."""
        try:
            return await asyncio.wait_for(receive(), self.body_timeout_s)
        except asyncio.TimeoutError:
            return None

    async def _refuse(self, response: JSONResponse, scope: Scope, receive: Receive, send: Send,
                      more: bool = True) -> None:
        """Answer with ``response`` after reading what is left of the body (up to a cap), so that the
        client reads the answer instead of a connection reset."""
        drained = 0
        while more and drained <= DRAIN_LIMIT_BYTES:
            message = await self._receive(receive)
            if message is None or message["type"] == "http.disconnect":
                break
            drained += len(message.get("body", b""))
            more = bool(message.get("more_body", False))
        if more:  # still sending: the connection cannot be reused
            response.headers["connection"] = "close"
        await response(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        given: list[bytes] = []
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    given.append(token.strip())
            elif name == b"x-api-key":
                given.append(value.strip())
        ok = False
        for token in given:
            for key in self.keys:  # no early exit: timing does not tell which key nearly matched
                ok |= hmac.compare_digest(token, key)
        return ok

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.keys and scope["path"] not in OPEN_PATHS and not self._authorised(scope):
            await JSONResponse({"detail": "missing or wrong API key: send 'Authorization: Bearer <key>' "
                                          "or 'X-API-Key: <key>'"}, status_code=401,
                               headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        too_big = JSONResponse({"detail": f"request body over the limit of {self.max_body:,} bytes"},
                               status_code=413)
        length = dict(scope.get("headers", ())).get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await JSONResponse({"detail": "invalid Content-Length"}, status_code=400)(scope, receive, send)
                return
            if declared > self.max_body:
                await self._refuse(too_big, scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self._receive(receive)
            if message is None:
                slow = JSONResponse({"detail": f"request body not received within {self.body_timeout_s:g} s"},
                                    status_code=408, headers={"connection": "close"})
                await slow(scope, receive, send)
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await self._refuse(too_big, scope, receive, send, bool(message.get("more_body", False)))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                message, body = body, None
                return message
            return await receive()

        await self.app(scope, replay, send)


# -- errors -----------------------------------------------------------------------------------------

_FIELD_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")

# The one place where library errors become HTTP statuses (InputError: 422, handled on its own).
_STATUS: tuple[tuple[type[TrustJudgeError], int], ...] = (
    (ConfigError, 400),
    (BackendError, 503),
    (PrerequisiteError, 503),
    (StoreError, 503),
    (TrustJudgeError, 500),
)


def _field_path(name: str | None) -> list[str | int]:
    if not name:
        return []
    return [int(index) if index else part for part, index in _FIELD_PART.findall(name)]


def _problem(exc: InputError) -> dict[str, Any]:
    if exc.line == 0:  # a field of the request body itself (a request's criteria or checklist)
        return {"type": "invalid_field", "loc": ["body", *_field_path(exc.field)], "msg": exc.reason, "item": None,
                "field": exc.field}
    item = exc.line - 1 if exc.line is not None else None
    loc: list[str | int] = ["body", "items"]
    if item is not None:
        loc += [item, *_field_path(exc.field)]
    return {"type": "invalid_item", "loc": loc, "msg": exc.reason, "item": item, "field": exc.field}


def _install_error_handlers(app: FastAPI) -> None:
    async def on_input_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, InputError)
        return JSONResponse({"detail": [_problem(exc)]}, status_code=422)

    async def on_request_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = [{"type": str(e.get("type", "value_error")), "loc": list(e.get("loc", ())),
                     "msg": str(e.get("msg", "")), "item": None, "field": None} for e in exc.errors()]
        return JSONResponse({"detail": problems}, status_code=422)

    async def on_trustjudge_error(request: Request, exc: Exception) -> JSONResponse:
        status = next(code for cls, code in _STATUS if isinstance(exc, cls))
        if status >= 500:
            log.error("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
        return JSONResponse({"detail": str(exc)}, status_code=status)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette re-raises after this handler, so the traceback reaches the server log, not the client.
        return JSONResponse({"detail": "internal server error (see the server log)"}, status_code=500)

    app.add_exception_handler(InputError, on_input_error)
    app.add_exception_handler(RequestValidationError, on_request_validation)
    app.add_exception_handler(TrustJudgeError, on_trustjudge_error)
    app.add_exception_handler(Exception, on_unexpected)


# -- the app ----------------------------------------------------------------------------------------


def _pairs(item: Item) -> int:
    n = len(item.responses)
    return len(item.pairs) if item.pairs is not None else n * (n - 1) // 2


def _limit_judgments(items: list[Item], max_judgments: int, *, score_scales: int = 0, compare: bool = False) -> None:
    """413 when a request needs more judgments (prompts) than ``max_judgments``: pairwise work grows with
    the square of an item's responses, so the item limit alone does not bound a request."""
    total = score_scales * sum(len(it.responses) for it in items)
    if compare:
        total += sum(2 * _pairs(it) for it in items if len(it.responses) >= 2)
    if total > max_judgments:
        raise HTTPException(413, f"{total:,} judgments (prompts) is over the limit of {max_judgments:,} per "
                                 "request: send fewer items or responses per item")


def _records(records: list[dict[str, Any]]) -> JSONResponse:
    """The records exactly as the library's ``to_dict()`` gives them (and the CLI writes them); the
    response model documents them but does not re-serialise them (which would add absent fields)."""
    return JSONResponse({"records": records})


def _limit_task(task: Task, items: list[Item], max_judgments: int) -> None:
    """413 when a task needs more judgments than ``max_judgments``; 422 when it cannot judge an item."""
    total = 0
    for index, item in enumerate(items, start=1):
        try:
            task.check(item)
        except InputError as exc:
            raise InputError(exc.reason, line=index, field=exc.field) from None
        total += task.size(item)
    if total > max_judgments:
        raise HTTPException(413, f"{total:,} judgments (prompts) is over the limit of {max_judgments:,} per "
                                 "request: send fewer items, responses, criteria or checks")


def _validate(raw: Any, max_items: int, min_responses: int = 1) -> list[Item]:
    if not isinstance(raw, list):
        raise InputError(f"items must be a list of item objects, got {type(raw).__name__}")
    if len(raw) > max_items:
        raise HTTPException(413, f"{len(raw):,} items is over the limit of {max_items:,} per request")
    if not raw:
        raise InputError("items must hold at least one item")
    items = items_from_dicts(raw, source="request")
    seen: set[str] = set()
    for index, item in enumerate(items, start=1):
        if len(item.responses) < min_responses:
            raise InputError(f"needs at least {min_responses} responses, has {len(item.responses)}",
                             line=index, field="responses")
        if item.id in seen:
            raise InputError(f"duplicate item id {item.id!r}", line=index, field="id")
        seen.add(item.id)
    return items


def create_app(judge_name: str | Backend, *, store_path: str | Path | Store | None = None,
               api_keys: Sequence[str] = (), max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               max_items: int = DEFAULT_MAX_ITEMS, protocol: Protocol = "direct", batch_wait_s: float = 0.0,
               preload: bool = True, max_judgments: int = DEFAULT_MAX_JUDGMENTS,
               body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S, **judge_options: Any) -> FastAPI:
    """Build the HTTP API around one judge.

    Args:
        judge_name: A judge name (``hf/smollm2-135m``, ``mock/hash``, ...) or a backend instance.
        store_path: The judgment store (path, :class:`Store`, or ``None`` for the default file).
        api_keys: When non-empty, every request but ``/healthz`` needs one of these keys.
        max_body_bytes: Largest request body accepted (413 above).
        max_items: Most items accepted in one request (413 above).
        max_judgments: Most judgments (prompts) one request may need (413 above): a pair counts two,
            an audit counts every scale.
        body_timeout_s: A client that sends no part of its body for this long gets 408.
        protocol: Default protocol; a request may ask for the other.
        batch_wait_s: Pause of the worker after the first request of a batch, to merge more requests.
        preload: Load the judge's backend now (a bad judge fails here, not on the first request).
        **judge_options: Further :class:`Judge` options (batch_size, temperature, seed, ...).

    Returns:
        The FastAPI app; ``app.state.worker`` is its :class:`JudgeWorker` (``.stats`` counts requests
        and judge calls), ``app.state.judge`` its judge.

    Raises:
        ConfigError: A bad option, limit or judge name.
    """
    if max_body_bytes < 1 or max_items < 1 or max_judgments < 1 or not body_timeout_s > 0:
        raise ConfigError("max_body_bytes, max_items, max_judgments and body_timeout_s must be positive")
    reserved = {"scale", "delta", "store"} & set(judge_options)
    if reserved:
        raise ConfigError(f"{', '.join(sorted(reserved))}: set per request or with store_path, not as judge options")
    judge = Judge(judge_name, store=store_path, protocol=protocol, **judge_options)
    if preload:
        try:
            _ = judge.backend
        except BaseException:
            judge.close()
            raise
    worker = JudgeWorker(judge, batch_wait_s)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await asyncio.to_thread(worker.stop)
            judge.close()

    app = FastAPI(title="trustjudge", version=API_VERSION, lifespan=lifespan,
                  description="LLM-as-a-judge with distribution-sensitive scores and likelihood-aware verdicts. "
                              "Items use the JSONL schema of the README; records are the CLI's records.")
    app.state.judge = judge
    app.state.worker = worker
    app.state.max_items = max_items
    app.state.max_judgments = max_judgments
    app.add_middleware(_Guard, keys=tuple(api_keys), max_body_bytes=max_body_bytes, body_timeout_s=body_timeout_s)
    _install_error_handlers(app)
    default_protocol = protocol

    @app.get("/healthz", response_model=Health, tags=["service"])
    async def healthz() -> dict[str, Any]:
        """Liveness; needs no API key."""
        return {"status": "ok", "judge": judge.name}

    @app.get("/v1/stats", response_model=Stats, responses={401: _ERRORS[401]}, tags=["service"])
    async def stats() -> dict[str, Any]:
        """Request, batch and model-call counters since the server started."""
        engine = judge._engine
        return {**asdict(worker.stats), "model_calls": engine.stats.model_calls if engine else 0,
                "from_store": engine.stats.from_store if engine else 0}

    @app.post("/v1/score", response_model=ScoreResponse, response_model_exclude_unset=True,
              responses=_ERRORS, tags=["judge"])
    async def score(body: ScoreRequest) -> JSONResponse:
        """Score every response under every method (discrete, geval, expected, trustjudge)."""
        items = _validate(body.items, max_items)
        _limit_judgments(items, max_judgments, score_scales=1)
        records = await worker.submit(judge.score_task(body.scale, body.protocol or default_protocol), items)
        return _records(records)

    @app.post("/v1/compare", response_model=CompareResponse, response_model_exclude_unset=True,
              responses=_ERRORS, tags=["judge"])
    async def compare(body: CompareRequest) -> JSONResponse:
        """Compare pairs in both orders under every aggregation (single, two_pass, likelihood, ppl)."""
        items = _validate(body.items, max_items, min_responses=2)
        _limit_judgments(items, max_judgments, compare=True)
        task = judge.compare_task(body.protocol or default_protocol, body.delta)
        prepared = await _prepare_calibration(judge, body, task)
        return await _respond(await worker.submit(task, items), prepared)

    @app.post("/v1/criteria", response_model=CriteriaResponse, response_model_exclude_unset=True,
              responses=_ERRORS, tags=["judge"])
    async def criteria(body: CriteriaRequest) -> JSONResponse:
        """Judge each response on each criterion (every scoring method per criterion) and aggregate by
        weight, with the aggregate's spread."""
        items = _validate(body.items, max_items)
        suite = parse_criteria(body.criteria, "request", 0) if body.criteria is not None else ()
        task = judge.criteria_task(suite, reweight=body.reweight, scale=body.scale,
                                   protocol=body.protocol or default_protocol)
        _limit_task(task, items, max_judgments)
        return _records(await worker.submit(task, items))

    @app.post("/v1/criteria/compare", response_model=CriteriaCompareResponse, responses=_ERRORS, tags=["judge"])
    async def criteria_compare(body: CriteriaCompareRequest) -> JSONResponse:
        """Compare every pair on every criterion in both orders (likelihood-combined), with the weighted
        aggregate; graded verdicts give an expected margin."""
        items = _validate(body.items, max_items, min_responses=2)
        suite = parse_criteria(body.criteria, "request", 0) if body.criteria is not None else ()
        task = judge.criteria_compare_task(suite, graded=body.graded, reweight=body.reweight,
                                           protocol=body.protocol or default_protocol)
        _limit_task(task, items, max_judgments)
        return _records(await worker.submit(task, items))

    @app.post("/v1/claims", response_model=ClaimsResponse, responses=_ERRORS, tags=["judge"])
    async def claims(body: ClaimsRequest) -> JSONResponse:
        """Claim-level precision (and recall with match): P(supported) per claim, the distribution of the number
        supported, E[F1@K], coverage of gold claims, the Hungarian expected F1."""
        items = _validate(body.items, max_items)
        task = judge.claims_task(k=body.k, unknown=body.unknown, match=body.match, min_overlap=body.min_overlap)
        _limit_task(task, items, max_judgments)
        prepared = await _prepare_calibration(judge, body, task)
        return await _respond(await worker.submit(task, items), prepared)

    @app.post("/v1/checklist", response_model=ChecklistResponse, response_model_exclude_unset=True,
              responses=_ERRORS, tags=["judge"])
    async def checklist(body: ChecklistRequest) -> JSONResponse:
        """Ask each response each check: P(pass) per check, expected weighted satisfaction, P(all pass) and
        the distribution of the number passed."""
        items = _validate(body.items, max_items)
        suite = parse_checklist(body.checklist, "request", 0) if body.checklist is not None else ()
        labels = LabelSet.parse(body.labels) if body.labels is not None else YES_NO
        task = judge.checklist_task(suite, labels=labels, reweight=body.reweight,
                                    protocol=body.protocol or default_protocol)
        _limit_task(task, items, max_judgments)
        prepared = await _prepare_calibration(judge, body, task)
        return await _respond(await worker.submit(task, items), prepared)

    @app.post("/v1/audit", response_model=dict[str, Any], responses=_ERRORS, tags=["judge"])
    async def audit(body: AuditRequest) -> dict[str, Any]:
        """Judge what the store lacks, then audit consistency and agreement (``AuditReport.to_dict()``)."""
        if min(body.ks) < 3:
            raise InputError(f"ks must be >= 3, got {min(body.ks)}")
        items = _validate(body.items, max_items)
        _limit_judgments(items, max_judgments, score_scales=len(set(body.scales)), compare=True)
        options = {"scales": list(dict.fromkeys(body.scales)), "delta": body.delta, "ks": body.ks,
                   "bootstrap": body.bootstrap, "seed": body.seed, "protocol": body.protocol or default_protocol}
        report: dict[str, Any] = await worker.submit(None, items, audit=options)
        return report

    @app.post("/v1/rank", response_model=dict[str, Any],
              responses={**_ERRORS, 501: {"model": ErrorOut, "description": "Ranking not available"}},
              tags=["judge"])
    async def rank(body: RankRequest) -> dict[str, Any]:
        """Rank the systems behind the responses (Bradley-Terry, Elo, win rate, mean score)."""
        try:
            ranking = importlib.import_module("trustjudge._ranking")
        except ImportError as exc:
            raise HTTPException(501, f"ranking is not available in this trustjudge build ({exc})") from None
        items = _validate(body.items, max_items, min_responses=2)
        _limit_judgments(items, max_judgments, score_scales=1, compare=True)
        use = body.protocol or default_protocol
        compared, scored = await asyncio.gather(
            worker.submit(judge.compare_task(use, body.delta), items),
            worker.submit(judge.score_task(body.scale, use), items))

        def fit() -> dict[str, Any]:
            result = ranking.rank(compared, scored, method=body.method, bootstrap=body.bootstrap, seed=body.seed,
                                  score_method=body.score_method, score_scale=body.scale, ties=body.ties)
            out: dict[str, Any] = result.to_dict()
            return out

        try:
            # pure numpy/scipy: off the event loop, and off the judge thread so judging goes on
            return await asyncio.to_thread(fit)
        except ValueError as exc:
            raise InputError(f"cannot rank these items: {exc}") from None

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            schema.setdefault("components", {})["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "Needed only when the server was started with API keys."},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key",
                           "description": "Same keys as bearer."},
            }
            for path, operations in schema.get("paths", {}).items():
                if path not in OPEN_PATHS:
                    for operation in operations.values():
                        operation["security"] = [{"bearer": []}, {"apiKey": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _header_deadline_protocol(timeout_s: float) -> type:
    """uvicorn's h11 protocol with a deadline on request headers: a client that opens a connection and
    sends no complete request head within ``timeout_s`` (slow or no headers) is disconnected. uvicorn
    has no such timeout of its own (its keep-alive timer stops at the first byte)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _cycle_seen: Any = None

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            if self.cycle is self._cycle_seen or self.cycle is None or self.cycle.response_complete:
                self.transport.close()  # no new request head arrived in time

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and self.cycle is not self._cycle_seen:
                self._cycle_seen = self.cycle  # a complete request head: the body has its own timeout
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadlineProtocol


def uvicorn_options(*, timeout_s: float = DEFAULT_BODY_TIMEOUT_S, max_connections: int = 64) -> dict[str, Any]:
    """The uvicorn options ``trustjudge serve`` runs with (``uvicorn.run(app, host=..., **options)``): request
    heads must arrive within ``timeout_s`` (bodies: ``create_app(body_timeout_s=...)``), idle keep-alive
    connections close after it, and at most ``max_connections`` connections are served at once (503 beyond)."""
    return {"workers": 1, "http": _header_deadline_protocol(timeout_s), "limit_concurrency": max_connections,
            "timeout_keep_alive": max(1, int(timeout_s))}


def openapi_json() -> str:
    """The OpenAPI schema of the API (for a ``mock/hash`` judge), as committed in ``docs/openapi.json``."""
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app("mock/hash", store_path=Path(tmp) / "openapi.sqlite")
        try:
            return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"
        finally:
            app.state.judge.close()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m trustjudge._server --write-openapi PATH``: write (or print) the OpenAPI schema."""
    parser = argparse.ArgumentParser(prog="python -m trustjudge._server", description=main.__doc__)
    parser.add_argument("--write-openapi", metavar="PATH", help="write the schema here (default: print it)")
    args = parser.parse_args(argv)
    text = openapi_json()
    if args.write_openapi:
        Path(args.write_openapi).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write_openapi).write_text(text, encoding="utf-8")
        print(f"wrote {args.write_openapi}")
    else:
        print(text, end="")


if __name__ == "__main__":
    main()
