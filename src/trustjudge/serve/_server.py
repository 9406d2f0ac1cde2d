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
and ``field`` null; a non-finite number anywhere in the body (``NaN``, ``Infinity``, ``1e999``) is a 422
of type ``non_finite_number``. Other errors are ``{"detail": "message"}``: 400 bad option, 401 missing or
wrong key, 408 body not sent in time, 413 body, items, judgments, prompt bytes or labels over the limit
(the message names the limit and its ``trustjudge serve`` option), 429 too many requests in progress from
one address, 501 ranking unavailable, 503 backend failure, store full or server busy, 500 anything
unexpected (the traceback goes to the server log only).

What one request may cost is checked before anything is judged: its items, its judgments (prompts), the
bytes of text quoted into those prompts (a text counts once per prompt it is in) and the labels they read
(:meth:`trustjudge.modes._base.Task.cost`).

Batching: the judge runs in one worker thread (torch models are not thread-safe). Requests wait in
a queue; the worker takes every request waiting (after an optional ``batch_wait_s`` pause when it was
idle) and merges those of the same task (kind and options) into one job (sharing prompt batches and
the store), then hands each request its own slice of the records. Slices are cut by position (the
judge emits records in input order), so concurrent requests may reuse item ids freely. Jobs take
turns, one chunk of about ``chunk_size`` judgments each (:class:`JudgeWorker`), so a small request is
not held behind a long one.

Run ``python -m trustjudge.serve._server --write-openapi docs/openapi.json`` to regenerate the committed
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
import math
import queue
import re
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, SkipValidation
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..io._items import Item, items_from_dicts, parse_checklist, parse_criteria
from ..audit._calibration import Selection
from .._judge import Judge
from ..modes._prompts import YES_NO, LabelSet, Protocol
from ..modes._records import (
    ChecklistRecord,
    ClaimsRecord,
    CompareRecord,
    CriteriaCompareRecord,
    CriteriaRecord,
    ScoreRecord,
)
from ..modes._base import Cost, Task
from ..audit._trust import Calibration, annotate
from ..audit._trust import summary as trust_summary
from ..engine._store import Store
from ..backends import Backend
from ..errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    InputError,
    PrerequisiteError,
    StoreError,
    TrustJudgeError,
)

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_CONNECTIONS", "DEFAULT_MAX_ITEMS", "DEFAULT_MAX_JUDGMENTS",
           "DEFAULT_MAX_LABELS", "DEFAULT_MAX_PER_ADDRESS", "DEFAULT_MAX_PROMPT_BYTES", "DEFAULT_REQUEST_DEADLINE_S",
           "InProgress", "JudgeWorker", "WorkerStats", "create_app", "uvicorn_options"]

log = logging.getLogger("trustjudge.server")

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_ITEMS = 1000
DEFAULT_MAX_JUDGMENTS = 10_000
# Quoted text summed over a request's prompts: 8 bodies' worth (about 16M tokens). The review's 6.3 MB
# checklist (7 passages of 0.9 MB quoted into 300 prompts) asked 1.9 GB and held the judge for 322 s.
DEFAULT_MAX_PROMPT_BYTES = 64 * 1024 * 1024
# Labels read over a request's judgments: the judgment limit times the largest built-in label set (1-100),
# so only a request's own label set (checklist "labels") can reach it first.
DEFAULT_MAX_LABELS = 1_000_000
DEFAULT_BODY_TIMEOUT_S = 30.0
DEFAULT_REQUEST_DEADLINE_S = 60.0
DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_MAX_PER_ADDRESS = 16
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
    source: str | None = Field(None, description="The id of the item's source the claim cites (a key of the item's "
                                                 "sources): it is verified against that text alone.")


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
    sources: dict[str, str] | None = Field(None, description="Cited sources by id (/v1/claims): a claim citing one "
                                                             "is verified against its text.")


Items = SkipValidation[list[ItemIn]]
_ITEMS_DOC = "Items with the schema of one JSONL line; validated by the library (422 names item and field)."


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


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
    in_progress: int = Field(description="Requests in progress (receiving their body, waiting or judged), this one "
                                         "included.")


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
    408: {"model": ErrorOut, "description": "Body not sent in time (--timeout idle, --request-deadline in all)"},
    413: {"model": ErrorOut, "description": "Body, items, judgments, prompt bytes or labels over the server's "
                                            "limit (the message names it)"},
    422: {"model": ValidationErrorOut, "description": "Invalid request or item (a non-finite number included)"},
    429: {"model": ErrorOut, "description": "Too many requests in progress from this address"},
    503: {"model": ErrorOut, "description": "The judge backend failed, the store is full, or the server is busy"},
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


@dataclass
class _Job:
    """The work of one group of merged requests: ``steps`` runs one chunk per ``next()`` and returns
    each request's result when done."""

    group: list[_Request]
    steps: Generator[None, None, list[Any]]


class JudgeWorker:
    """Runs every judgment of a server in one thread, merging concurrent requests into one judge call.

    Requests take turns: each one's items are cut into chunks of about the judge's ``chunk_size``
    judgments (whole items, or parts of a larger item: :meth:`Task.parts`), and the worker runs one chunk
    of each request in progress in turn, taking
    in new requests between chunks. A one-item score therefore waits for at most one chunk of each
    request ahead of it, not for the whole of a long audit (head-of-line blocking).

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
        jobs: deque[_Job] = deque()
        stopping = False
        while True:
            arrived: list[_Request] = []
            if not jobs:
                if stopping:
                    return
                first = self._queue.get()  # idle: wait for work
                if first is None:
                    return
                if self._wait:
                    time.sleep(self._wait)
                arrived.append(first)
            while True:  # take in whatever arrived meanwhile (between two chunks when busy)
                try:
                    request = self._queue.get_nowait()
                except queue.Empty:
                    break
                if request is None:
                    stopping = True
                else:
                    arrived.append(request)
            groups: dict[Any, list[_Request]] = {}
            for request in arrived:
                if request.future.set_running_or_notify_cancel():  # False: the client went away
                    groups.setdefault(request.group, []).append(request)
            for group in groups.values():
                self._begin(group, jobs, first=False)
            if jobs:
                job = jobs.popleft()
                if self._advance(job, jobs):
                    jobs.append(job)  # the back of the line: every other request runs a chunk first

    def _begin(self, group: list[_Request], jobs: deque[_Job], *, first: bool) -> None:
        """Start a job for ``group`` (it does no judging before its first turn) and line it up."""
        job = _Job(group, self._steps(group))
        if self._advance(job, jobs):
            if first:
                jobs.appendleft(job)
            else:
                jobs.append(job)

    def _advance(self, job: _Job, jobs: deque[_Job]) -> bool:
        """Run the job's next step; hand out its results when it is done. Whether it has more to do."""
        try:
            next(job.steps)
            return True
        except StopIteration as done:
            for request, result in zip(job.group, done.value):
                request.future.set_result(result)
        except Exception as exc:  # noqa: BLE001 - handed to the waiting requests; the handlers map it to a status
            if len(job.group) > 1 and not isinstance(exc, BackendUnavailable):
                # One request's problem must not fail the requests merged with it: run each apart, first
                # (what the merged run finished is in the store, so nothing is judged twice).
                for request in reversed(job.group):
                    self._begin([request], jobs, first=True)
            else:
                for request in job.group:
                    request.future.set_exception(exc)
        return False

    def _chunks(self, task: Task, items: Sequence[Item]) -> Iterator[list[Item]]:
        """About ``chunk_size`` judgments at a time, one turn of the worker: whole items, and an item
        larger than that in parts (:meth:`Task.parts`: responses, or pairs, at a time)."""
        budget = self.judge.chunk_size
        chunk: list[Item] = []
        size = 0
        for item in items:
            for part in task.parts(item, budget) if task.size(item) > budget else (item,):
                chunk.append(part)
                size += task.size(part)
                if size >= budget:
                    yield chunk
                    chunk, size = [], 0
        if chunk:
            yield chunk

    def _steps(self, group: list[_Request]) -> Generator[None, None, list[Any]]:
        """The group's work, pausing (``yield``) before each chunk: the worker's turns."""
        yield  # nothing runs before the job's first turn
        head = group[0]
        self.stats.requests += len(group)
        self.stats.engine_runs += 1
        if len(group) > 1:
            self.stats.merged_requests += len(group)
        if head.task is None:
            # An audit judges in turns what its report needs, then builds the report from the store.
            options = head.options
            protocol = options.get("protocol")
            phases: list[tuple[Task, list[Item]]] = [
                (self.judge.score_task(points, protocol), head.items) for points in options.get("scales", (5, 100))]
            phases.append((self.judge.compare_task(protocol), [it for it in head.items if len(it.responses) >= 2]))
            for n, (task, items) in enumerate(phases):
                for k, chunk in enumerate(self._chunks(task, items)):
                    if n or k:
                        yield
                    for _ in self.judge.run(task, chunk):
                        pass
            return [self.judge.audit(head.items, **options).report.to_dict()]
        task = head.task
        merged = [item for request in group for item in request.items]
        counts = [sum(task.count(it) for it in request.items) for request in group]
        expected = [it.id for it in merged for _ in range(task.count(it))]
        records: list[dict[str, Any]] = []
        for k, chunk in enumerate(self._chunks(task, merged)):
            if k:
                yield
            records.extend(r.to_dict() for r in self.judge.run(task, chunk))
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


@dataclass
class InProgress:
    """Requests in progress (receiving their body, waiting or judged), in all and per client address.

    Written by the middleware on the server's one event loop only: no lock needed."""

    active: int = 0
    by_address: dict[str, int] = field(default_factory=dict)


class _Guard:
    """ASGI middleware, before any route reads the body: API keys, the requests in progress (in all and
    per client address), the body's size and deadline, and non-finite numbers in the JSON.

    The body is read here (so that a chunked body over the limit is refused as it streams) and
    replayed to the app. Only requests count against the limits on requests in progress: a connection
    still sending its request head, or idle between requests, is not counted (the head deadline of
    :func:`uvicorn_options` and uvicorn's keep-alive timeout close those), so slow clients cannot make
    ``/healthz`` or anyone else's request fail. ``/healthz`` is never refused for load.
    """

    def __init__(self, app: ASGIApp, *, keys: Sequence[str], max_body_bytes: int,
                 body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
                 request_deadline_s: float = DEFAULT_REQUEST_DEADLINE_S,
                 max_requests: int = DEFAULT_MAX_CONNECTIONS, max_per_address: int = DEFAULT_MAX_PER_ADDRESS,
                 in_progress: InProgress | None = None) -> None:
        self.app = app
        self.keys = tuple(k.encode() for k in keys)
        self.max_body = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.request_deadline_s = request_deadline_s
        self.max_requests = max_requests
        self.max_per_address = max_per_address
        self.load = in_progress if in_progress is not None else InProgress()

    async def _receive(self, receive: Receive, deadline: float) -> Message | None:
        """The next body message, or ``None`` when the client sends nothing for ``body_timeout_s`` or the
        body's deadline passes."""
        wait = min(self.body_timeout_s, deadline - asyncio.get_running_loop().time())
        if wait <= 0:
            return None
        try:
            return await asyncio.wait_for(receive(), wait)
        except asyncio.TimeoutError:
            return None

    def _too_slow(self, deadline: float) -> JSONResponse:
        if asyncio.get_running_loop().time() >= deadline:
            detail = (f"request body not received within the deadline of {self.request_deadline_s:g} s "
                      "(--request-deadline)")
        else:
            detail = f"request body not received: nothing sent for {self.body_timeout_s:g} s (--timeout)"
        return JSONResponse({"detail": detail}, status_code=408, headers={"connection": "close"})

    async def _refuse(self, response: JSONResponse, scope: Scope, receive: Receive, send: Send, deadline: float,
                      more: bool = True) -> None:
        """Answer with ``response`` after reading what is left of the body (up to a cap and the body's
        deadline), so that the client reads the answer instead of a connection reset."""
        drained = 0
        while more and drained <= DRAIN_LIMIT_BYTES:
            message = await self._receive(receive, deadline)
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
        if scope["path"] in OPEN_PATHS:
            await self._serve(scope, receive, send)
            return
        client = scope.get("client")
        address = str(client[0]) if client else ""
        busy = None
        load = self.load
        if load.active >= self.max_requests:
            busy = JSONResponse({"detail": f"server busy: {load.active:,} requests in progress, the limit "
                                           f"(--max-connections) is {self.max_requests:,}; retry later"},
                                status_code=503)
        elif load.by_address.get(address, 0) >= self.max_per_address:
            busy = JSONResponse({"detail": f"too many requests from {address}: {load.by_address[address]:,} in "
                                           "progress, the limit per client address (--max-requests-per-address) "
                                           f"is {self.max_per_address:,}; retry later"}, status_code=429)
        if busy is not None:
            # Answered at once without reading the body (reading it would hold the connection as long as a
            # request in progress, uncounted): the connection closes after the answer.
            busy.headers.update({"retry-after": "1", "connection": "close"})
            await busy(scope, receive, send)
            return
        load.active += 1
        load.by_address[address] = load.by_address.get(address, 0) + 1
        try:
            await self._serve(scope, receive, send)
        finally:
            load.active -= 1
            left = load.by_address[address] - 1
            if left:
                load.by_address[address] = left
            else:
                del load.by_address[address]

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the body (size limit, deadline, finite numbers), then run the app on it."""
        deadline = asyncio.get_running_loop().time() + self.request_deadline_s
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
                await self._refuse(too_big, scope, receive, send, deadline)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self._receive(receive, deadline)
            if message is None:
                await self._too_slow(deadline)(scope, receive, send)
                return
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await self._refuse(too_big, scope, receive, send, deadline, bool(message.get("more_body", False)))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        data = b"".join(chunks)
        problem = _non_finite(data)
        if problem is not None:
            await JSONResponse({"detail": [problem]}, status_code=422)(scope, receive, send)
            return
        body: Message | None = {"type": "http.request", "body": data, "more_body": False}

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                message, body = body, None
                return message
            return await receive()

        await self.app(scope, replay, send)


class _NonFinite:
    """Stands for a non-finite number while a body is parsed."""

    def __init__(self, text: str) -> None:
        self.text = text


def _finite_float(text: str) -> float | _NonFinite:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def _float_sized_int(text: str) -> int | _NonFinite:
    """An integer a float can hold (a number field takes either), else a non-finite number."""
    if len(text) > 400:  # far beyond a float, and int() of a long text is slow
        return _NonFinite(text)
    value = int(text)
    return value if abs(value) <= _FLOAT_MAX else _NonFinite(text)


_FLOAT_MAX = int(sys.float_info.max)


def _non_finite(body: bytes) -> dict[str, Any] | None:
    """The 422 problem naming the first non-finite number in a JSON body (``NaN``, ``Infinity``,
    ``-Infinity``, or a number a float cannot hold, such as ``1e999`` or a 400-digit integer), or ``None``.
    Python's JSON parser, which the routes use, reads the first four as floats; JSON has no such numbers."""
    if not body:
        return None
    try:
        orjson.loads(body)  # fast, and refuses NaN, Infinity and numbers out of a float's range
        return None
    except orjson.JSONDecodeError:
        pass  # one of those, or something else it refuses (a lone surrogate, a huge integer, not JSON)
    try:
        doc = json.loads(body, parse_constant=_NonFinite, parse_float=_finite_float, parse_int=_float_sized_int)
    except (ValueError, RecursionError):
        return None  # not JSON: the route reports that
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), doc)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, _NonFinite):
            break
        if isinstance(value, dict):
            stack.extend(((*path, k), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(value))))
    else:
        return None
    item = path[1] if len(path) >= 2 and path[0] == "items" and isinstance(path[1], int) else None
    rest = path[2:] if item is not None else path
    name = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest).lstrip(".") or None
    return {"type": "non_finite_number", "loc": ["body", *path],
            "msg": f"must be a finite number, got {_shown(value.text)}", "item": item, "field": name}


def _shown(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


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


@dataclass(frozen=True)
class _Limits:
    """What one request may cost (413 beyond, naming the limit and its ``trustjudge serve`` option)."""

    items: int
    judgments: int
    prompt_bytes: int
    labels: int


def _limit(limits: _Limits, items: list[Item], *tasks: Task) -> None:
    """Before anything is judged: 422 when a task cannot judge an item; 413 when the request's judgments,
    prompt bytes or labels (summed over ``tasks``: an audit judges every scale and the pairs) are over the
    limits. Pairwise work grows with the square of an item's responses and grounding is quoted into every
    judgment of its item, so neither the item nor the body limit bounds a request."""
    total = Cost()
    for task in tasks:
        for index, item in enumerate(items, start=1):
            try:
                task.check(item)
            except InputError as exc:
                raise InputError(exc.reason, line=index, field=exc.field) from None
            total += task.cost(item)
    if total.judgments > limits.judgments:
        raise HTTPException(413, f"{total.judgments:,} judgments (prompts) is over the limit of {limits.judgments:,} "
                                 "per request (--max-judgments): send fewer items, responses, criteria or checks")
    if total.prompt_bytes > limits.prompt_bytes:
        raise HTTPException(413, f"{total.prompt_bytes:,} prompt bytes is over the limit of {limits.prompt_bytes:,} "
                                 "per request (--max-request-prompt-bytes): each text counts once per prompt it is "
                                 "quoted in, and an item's question, context, reference, profile, knowledge and "
                                 "evidence are quoted in every one of its judgments; send fewer responses, checks "
                                 "or criteria per item, or shorter texts")
    if total.labels > limits.labels:
        raise HTTPException(413, f"{total.labels:,} labels is over the limit of {limits.labels:,} per request "
                                 "(--max-request-labels): every judgment reads each label of its label set; use "
                                 "fewer labels or judgments")


def _records(records: list[dict[str, Any]]) -> JSONResponse:
    """The records exactly as the library's ``to_dict()`` gives them (and the CLI writes them); the
    response model documents them but does not re-serialise them (which would add absent fields)."""
    return JSONResponse({"records": records})


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
               max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES, max_labels: int = DEFAULT_MAX_LABELS,
               body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S, request_deadline_s: float = DEFAULT_REQUEST_DEADLINE_S,
               max_connections: int = DEFAULT_MAX_CONNECTIONS, max_requests_per_address: int = DEFAULT_MAX_PER_ADDRESS,
               **judge_options: Any) -> FastAPI:
    """Build the HTTP API around one judge.

    Args:
        judge_name: A judge name (``hf/smollm2-135m``, ``mock/hash``, ...) or a backend instance.
        store_path: The judgment store (path, :class:`Store`, or ``None`` for the default file).
        api_keys: When non-empty, every request but ``/healthz`` needs one of these keys.
        max_body_bytes: Largest request body accepted (413 above).
        max_items: Most items accepted in one request (413 above).
        max_judgments: Most judgments (prompts) one request may need (413 above): a pair counts two,
            an audit counts every scale.
        max_prompt_bytes: Most bytes of quoted text one request may send the judge, summed over its
            judgments (413 above; :class:`~trustjudge.modes._base.Cost`): a passage quoted into 300 prompts
            counts 300 times.
        max_labels: Most labels one request's judgments may read in total (413 above): a 1-100 score
            reads 100, a pair 6.
        body_timeout_s: A client that sends no part of its body for this long gets 408.
        request_deadline_s: A client that has not sent its whole body this long after its request head
            gets 408, however steadily it trickles.
        max_connections: Most requests in progress at once (receiving, waiting or judged; 503 above).
            Connections still sending their request head, or idle, are not counted.
        max_requests_per_address: Most requests in progress from one client address (429 above).
        protocol: Default protocol; a request may ask for the other.
        batch_wait_s: Pause of the worker after the first request of a batch, to merge more requests.
        preload: Load the judge's backend now (a bad judge fails here, not on the first request).
        **judge_options: Further :class:`Judge` options (batch_size, temperature, seed, ...).

    Returns:
        The FastAPI app; ``app.state.worker`` is its :class:`JudgeWorker` (``.stats`` counts requests
        and judge calls), ``app.state.judge`` its judge, ``app.state.in_progress`` its
        :class:`InProgress` requests.

    Raises:
        ConfigError: A bad option, limit or judge name.
    """
    counts = {"max_body_bytes": max_body_bytes, "max_items": max_items, "max_judgments": max_judgments,
              "max_prompt_bytes": max_prompt_bytes, "max_labels": max_labels, "max_connections": max_connections,
              "max_requests_per_address": max_requests_per_address}
    bad = [name for name, value in counts.items() if not value >= 1]
    bad += [name for name, value in (("body_timeout_s", body_timeout_s), ("request_deadline_s", request_deadline_s))
            if not (value > 0 and math.isfinite(value))]
    if bad:
        raise ConfigError(f"{', '.join(bad)} must be positive")
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
    limits = _Limits(max_items, max_judgments, max_prompt_bytes, max_labels)
    app.state.limits = limits
    app.state.in_progress = in_progress = InProgress()
    app.add_middleware(_Guard, keys=tuple(api_keys), max_body_bytes=max_body_bytes, body_timeout_s=body_timeout_s,
                       request_deadline_s=request_deadline_s, max_requests=max_connections,
                       max_per_address=max_requests_per_address, in_progress=in_progress)
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
                "from_store": engine.stats.from_store if engine else 0, "in_progress": in_progress.active}

    @app.post("/v1/score", response_model=ScoreResponse, response_model_exclude_unset=True,
              responses=_ERRORS, tags=["judge"])
    async def score(body: ScoreRequest) -> JSONResponse:
        """Score every response under every method (discrete, geval, expected, trustjudge)."""
        items = _validate(body.items, max_items)
        task = judge.score_task(body.scale, body.protocol or default_protocol)
        _limit(limits, items, task)
        return _records(await worker.submit(task, items))

    @app.post("/v1/compare", response_model=CompareResponse, response_model_exclude_unset=True,
              responses=_ERRORS, tags=["judge"])
    async def compare(body: CompareRequest) -> JSONResponse:
        """Compare pairs in both orders under every aggregation (single, two_pass, likelihood, ppl)."""
        items = _validate(body.items, max_items, min_responses=2)
        task = judge.compare_task(body.protocol or default_protocol, body.delta)
        _limit(limits, items, task)
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
        _limit(limits, items, task)
        return _records(await worker.submit(task, items))

    @app.post("/v1/criteria/compare", response_model=CriteriaCompareResponse, responses=_ERRORS, tags=["judge"])
    async def criteria_compare(body: CriteriaCompareRequest) -> JSONResponse:
        """Compare every pair on every criterion in both orders (likelihood-combined), with the weighted
        aggregate; graded verdicts give an expected margin."""
        items = _validate(body.items, max_items, min_responses=2)
        suite = parse_criteria(body.criteria, "request", 0) if body.criteria is not None else ()
        task = judge.criteria_compare_task(suite, graded=body.graded, reweight=body.reweight,
                                           protocol=body.protocol or default_protocol)
        _limit(limits, items, task)
        return _records(await worker.submit(task, items))

    @app.post("/v1/claims", response_model=ClaimsResponse, responses=_ERRORS, tags=["judge"])
    async def claims(body: ClaimsRequest) -> JSONResponse:
        """Claim-level precision (and recall with match): P(supported) per claim, the distribution of the number
        supported, E[F1@K], coverage of gold claims, the Hungarian expected F1."""
        items = _validate(body.items, max_items)
        task = judge.claims_task(k=body.k, unknown=body.unknown, match=body.match, min_overlap=body.min_overlap)
        _limit(limits, items, task)
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
        _limit(limits, items, task)
        prepared = await _prepare_calibration(judge, body, task)
        return await _respond(await worker.submit(task, items), prepared)

    @app.post("/v1/audit", response_model=dict[str, Any], responses=_ERRORS, tags=["judge"])
    async def audit(body: AuditRequest) -> dict[str, Any]:
        """Judge what the store lacks, then audit consistency and agreement (``AuditReport.to_dict()``)."""
        if min(body.ks) < 3:
            raise InputError(f"ks must be >= 3, got {min(body.ks)}")
        items = _validate(body.items, max_items)
        use = body.protocol or default_protocol
        scales = list(dict.fromkeys(body.scales))
        _limit(limits, items, *(judge.score_task(points, use) for points in scales), judge.compare_task(use))
        options = {"scales": scales, "delta": body.delta, "ks": body.ks,
                   "bootstrap": body.bootstrap, "seed": body.seed, "protocol": use}
        report: dict[str, Any] = await worker.submit(None, items, audit=options)
        return report

    @app.post("/v1/rank", response_model=dict[str, Any],
              responses={**_ERRORS, 501: {"model": ErrorOut, "description": "Ranking not available"}},
              tags=["judge"])
    async def rank(body: RankRequest) -> dict[str, Any]:
        """Rank the systems behind the responses (Bradley-Terry, Elo, win rate, mean score)."""
        try:
            ranking = importlib.import_module("trustjudge.audit._ranking")
        except ImportError as exc:
            raise HTTPException(501, f"ranking is not available in this trustjudge build ({exc})") from None
        items = _validate(body.items, max_items, min_responses=2)
        use = body.protocol or default_protocol
        pairwise, pointwise = judge.compare_task(use, body.delta), judge.score_task(body.scale, use)
        _limit(limits, items, pairwise, pointwise)
        compared, scored = await asyncio.gather(worker.submit(pairwise, items), worker.submit(pointwise, items))

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


def uvicorn_options(*, timeout_s: float = DEFAULT_BODY_TIMEOUT_S) -> dict[str, Any]:
    """The uvicorn options ``trustjudge serve`` runs with (``uvicorn.run(app, host=..., **options)``): request
    heads must arrive within ``timeout_s`` (bodies: ``create_app(body_timeout_s=..., request_deadline_s=...)``)
    and idle keep-alive connections close after it.

    uvicorn's own ``limit_concurrency`` is not used: it counts every open connection, those still sending
    their request head included, so 16 clients that never finish a head made 58% of ``/healthz`` requests
    get 503. The app counts requests instead (``create_app(max_connections=...)``)."""
    return {"workers": 1, "http": _header_deadline_protocol(timeout_s), "timeout_keep_alive": max(1, int(timeout_s))}


def openapi_json() -> str:
    """The OpenAPI schema of the API (for a ``mock/hash`` judge), as committed in ``docs/openapi.json``."""
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app("mock/hash", store_path=Path(tmp) / "openapi.sqlite")
        try:
            return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"
        finally:
            app.state.judge.close()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m trustjudge.serve._server --write-openapi PATH``: write (or print) the OpenAPI schema."""
    parser = argparse.ArgumentParser(prog="python -m trustjudge.serve._server", description=main.__doc__)
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
