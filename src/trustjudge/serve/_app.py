"""The app: :func:`create_app` wires one judge, its worker, the guard and the error handlers to the routes:
one ``POST`` route per registered mode that names a route (:func:`mode_route`, built from the mode), the
audit and ranking routes, ``/healthz`` and ``/v1/stats``."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import math
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse

from .._judge import Judge, task_for_calibration
from ..audit._calibration import Selection
from ..audit._estimators import judged_once
from ..audit._trust import Calibration, annotate, judge_scaled
from ..audit._trust import summary as trust_summary
from ..backends import Backend
from ..engine._store import Store
from ..errors import ConfigError, InputError
from ..modes._base import Task
from ..modes._prompts import Protocol
from ..modes._registry import MODES, Mode, get_mode
from ._bodies import AuditRequest, Calibrated, Health, ModeBodies, RankRequest, Stats, mode_bodies
from ._domains import SERVICE_INSTEAD, calibration_json, prepare_domains, respond_domains
from ._errors import ERRORS, ErrorOut, install_error_handlers
from ._guard import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_ITEMS,
    DEFAULT_MAX_JUDGMENTS,
    DEFAULT_MAX_LABELS,
    DEFAULT_MAX_PER_ADDRESS,
    DEFAULT_MAX_PROMPT_BYTES,
    DEFAULT_REQUEST_DEADLINE_S,
    OPEN_PATHS,
    Guard,
    InProgress,
    Limits,
    check_cost,
    validate_items,
)
from ._verification import verification_routes
from ._worker import JudgeWorker

__all__ = ["API_VERSION", "create_app", "mode_route"]

log = logging.getLogger("trustjudge.server")

API_VERSION = "1.0.0"
SERVICE_PATHS = frozenset({"/healthz", "/v1/stats", "/v1/audit", "/v1/rank", "/openapi.json", "/docs",
                           "/docs/oauth2-redirect", "/redoc"})
"""The service's own paths: no mode's route may take one."""


# -- calibration ----------------------------------------------------------------------------------------

Prepared = tuple[Calibration, Selection | None]


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""What a server-side calibration's name may be (``trustjudge serve --calibration NAME=PATH``)."""


def load_calibrations(calibrations: Mapping[str, str | Path | Calibration] | None) -> dict[str, Calibration]:
    """The server's named calibrations, read now (a bad name or file is a ConfigError naming it)."""
    out: dict[str, Calibration] = {}
    for name, source in (calibrations or {}).items():
        if not NAME.fullmatch(name):
            raise ConfigError(f"calibration name {name!r}: use letters, digits, '_', '.' or '-' (at most 64, "
                              "starting with a letter or digit)")
        cal = source if isinstance(source, Calibration) else Calibration.load(source)
        out[name] = cal
    return out


def check_named(judge: Judge, named: Mapping[str, Calibration], paths: Mapping[str, Any] | None = None) -> None:
    """Refuse, at start, a named calibration fitted for another judge, template or protocol than this server's
    judge with its default options (a score calibration: on its own scale, which a request sets) (a ConfigError
    naming the calibration and its file)."""
    for name, cal in named.items():
        where = f"calibration {name!r}" + (f" ({paths[name]})" if paths and name in paths else "")
        judged_once(cal, where, "the service", SERVICE_INSTEAD)
        try:
            judge.check_calibration(cal, task=_own_scale(judge, cal))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None


def _own_scale(judge: Judge, cal: Calibration) -> Task | None:
    """The score task on a score calibration's own levels where they are an integer range (a request names its
    scale, so the server's default scale says nothing about the calibration); None: the mode's default task."""
    levels = cal.levels or []
    if not judge_scaled(cal.mode) or len(levels) < 2 or not all(float(v).is_integer() for v in levels) \
            or levels != [levels[0] + k for k in range(len(levels))]:
        return None
    return task_for_calibration(judge.task(cal.mode, scale=f"{int(levels[0])}-{int(levels[-1])}"))


async def _prepare_calibration(judge: Judge, body: Calibrated, task: Task,
                               named: Mapping[str, Calibration]) -> Prepared | None:
    """The request's calibration (sent, or named from the server's) checked against the judge and the task,
    and its selection (422 naming the field when the file is bad, unknown, does not fit, or cannot support
    the target); None without one."""
    field = "calibration_name" if body.calibration_name is not None else "calibration"
    tolerance: float | None = getattr(body, "tolerance", None)  # score and criteria routes only
    if body.calibration is not None and body.calibration_name is not None:
        raise InputError("give a calibration or the name of one the server holds, not both", line=0,
                         field="calibration_name")
    if body.calibration is None and body.calibration_name is None:
        if body.target_agreement is not None:
            raise InputError("needs a calibration (or a calibration_name) to choose the threshold on", line=0,
                             field="target_agreement")
        if tolerance is not None:
            raise InputError("needs a calibration (or a calibration_name): it must be the tolerance the calibration "
                             "was fitted with", line=0, field="tolerance")
        return None
    if body.calibration_name is not None and body.calibration_name not in named:
        held = f"it holds {', '.join(sorted(named))}" if named else "it was started without any"
        raise InputError(f"no calibration named {body.calibration_name!r} on this server ({held}: "
                         "`trustjudge serve --calibration NAME=PATH`)", line=0, field="calibration_name")
    data = body.calibration
    name = body.calibration_name

    def prepare() -> Prepared:  # scipy, and the backend's fingerprint: off the event loop
        cal = named[name] if name is not None else calibration_json(data or {}, "calibration", "calibration: ")
        try:
            judged_once(cal, f"calibration {name!r}" if name else "calibration", "the service", SERVICE_INSTEAD)
        except ConfigError as exc:
            raise InputError(str(exc), line=0, field=field) from None
        try:
            selection = cal.selection(body.target_agreement, body.risk_delta, body.force_delta) \
                if body.target_agreement is not None else None
        except ConfigError as exc:
            raise InputError(str(exc), line=0, field="target_agreement") from None
        try:
            checked = judge.check_calibration(cal, override=body.calibration_override, task=task)
        except ConfigError as exc:
            raise InputError(f"calibration {name!r}: {exc}" if name else str(exc), line=0, field=field) from None
        try:
            checked.check_tolerance(tolerance)  # as the CLI's --tolerance: never overridable
        except ConfigError as exc:
            raise InputError(f"calibration {name!r}: {exc}" if name else str(exc), line=0,
                             field="tolerance") from None
        return checked, selection

    return await asyncio.to_thread(prepare)


async def _respond(records: list[dict[str, Any]], prepared: Prepared | None,
                   name: str | None = None) -> JSONResponse:
    """The records, annotated with the calibration and followed by its summary when the request gave one
    (``name``: the server's calibration it named)."""
    if prepared is None:
        return _records(records)
    cal, selection = prepared

    def apply() -> dict[str, Any]:
        annotated = annotate(cal.mode, records, cal, selection)
        summary = trust_summary(cal.mode, annotated, cal, selection)
        if name is not None:
            summary["calibration"]["name"] = name
        return {"records": annotated, "calibration": summary}

    return JSONResponse(await asyncio.to_thread(apply))


def _records(records: list[dict[str, Any]]) -> JSONResponse:
    """The records exactly as the library's ``to_dict()`` gives them (and the CLI writes them); the
    response model documents them but does not re-serialise them (which would add absent fields)."""
    return JSONResponse({"records": records})


# -- the routes -----------------------------------------------------------------------------------------


def _served_modes(names: Sequence[str] | None) -> list[Mode]:
    """The modes to serve: those named, else every registered mode with a route (a plug-in that cannot be
    loaded is left out, with its error in the log)."""
    if names is not None:
        return [get_mode(name) for name in names]
    served = []
    for name in MODES:
        try:
            mode = get_mode(name)
        except ConfigError as exc:
            log.error("mode %r is not served: %s", name, exc)
            continue
        if mode.route is not None:
            served.append(mode)
    return served


def _check_routes(modes: Sequence[Mode]) -> None:
    taken: dict[str, str] = {}
    for mode in modes:
        route = mode.route
        if route is None:
            raise ConfigError(f"mode {mode.name!r} has no route (Mode.route): it cannot be served")
        if not route.startswith("/") or any(c in route for c in "{}?#% ") or "//" in route:
            raise ConfigError(f"mode {mode.name!r}: route {route!r} must be a plain path such as '/v1/{mode.name}'")
        if route in SERVICE_PATHS:
            raise ConfigError(f"mode {mode.name!r}: route {route!r} is one of the service's own routes")
        if route in taken:
            raise ConfigError(f"modes {taken[route]!r} and {mode.name!r} both claim the route {route!r}")
        taken[route] = mode.name


def mode_route(app: FastAPI, bodies: ModeBodies, *, judge: Judge, worker: JudgeWorker, limits: Limits,
               max_items: int, calibrations: Mapping[str, Calibration] | None = None) -> None:
    """Add the ``POST`` route of ``bodies.mode`` to ``app``: items validated by the library, the mode's task
    built from the request's options (:meth:`Mode.task_of`), its cost checked, then judged by the worker (and
    calibrated where the request sends a calibration or names one of ``calibrations``)."""
    mode = bodies.mode
    assert mode.route is not None
    named = dict(calibrations or {})

    async def judge_mode(body: Any) -> JSONResponse:
        items = validate_items(body.items, max_items, min_responses=mode.min_responses)
        task = mode.task_of(judge, bodies.options(body))
        if bodies.calibrated and (body.calibration is not None or body.calibration_name is not None
                                  or body.domain_calibrations is not None):
            task = task_for_calibration(task)  # a score or criteria calibration reads the distributions
        check_cost(limits, items, task)
        domains = await prepare_domains(judge, body, task, named) if bodies.calibrated else None  # calibration_by
        if domains is not None:
            return await respond_domains(await worker.submit(task, items), items, domains)
        prepared = await _prepare_calibration(judge, body, task, named) if bodies.calibrated else None
        name = body.calibration_name if bodies.calibrated else None
        return await _respond(await worker.submit(task, items), prepared, name)

    # FastAPI reads the body's model from the signature: the one built for this mode.
    judge_mode.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=bodies.request)],
        return_annotation=JSONResponse)
    summary = mode.summary or f"Judge in the {mode.name} mode."
    app.add_api_route(mode.route, judge_mode, methods=["POST"], response_model=bodies.response,
                      responses=ERRORS, tags=["judge"], name=mode.name.replace("-", "_"),
                      summary=mode.name.replace("-", " ").replace("_", " ").title(),
                      description=" ".join(part for part in (summary, bodies.note) if part))


def _install_openapi(app: FastAPI) -> None:
    """The schema with the security schemes (needed only where the server has keys) on every guarded path."""

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


def _check_limits(max_body_bytes: int, max_items: int, max_judgments: int, max_prompt_bytes: int, max_labels: int,
                  max_connections: int, max_requests_per_address: int, body_timeout_s: float,
                  request_deadline_s: float, judge_options: Mapping[str, Any]) -> None:
    """Refuse a limit that is not positive, and judge options that a request sets (:func:`create_app`)."""
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


def _preload(judge: Judge, named: Mapping[str, Calibration],
             calibrations: Mapping[str, str | Path | Calibration] | None) -> None:
    """Load the judge's backend and check the named calibrations against it now; a failure closes the judge."""
    try:
        _ = judge.backend
        check_named(judge, named, {k: v for k, v in (calibrations or {}).items() if not isinstance(v, Calibration)})
    except BaseException:
        judge.close()
        raise


def _lifespan(judge: Judge, worker: JudgeWorker) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: on shutdown, the worker stops and the judge closes."""
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await asyncio.to_thread(worker.stop)
            judge.close()

    return lifespan


def _service_routes(app: FastAPI, judge: Judge, worker: JudgeWorker, in_progress: InProgress,
                    named: Mapping[str, Calibration]) -> None:
    """``/healthz`` and ``/v1/stats``."""
    @app.get("/healthz", response_model=Health, tags=["service"])
    async def healthz() -> dict[str, Any]:
        """Liveness; needs no API key."""
        return {"status": "ok", "judge": judge.name}

    @app.get("/v1/stats", response_model=Stats, responses={401: ERRORS[401]}, tags=["service"])
    async def stats() -> dict[str, Any]:
        """Request, batch and model-call counters since the server started."""
        engine = judge._engine
        return {**asdict(worker.stats), "model_calls": engine.stats.model_calls if engine else 0,
                "from_store": engine.stats.from_store if engine else 0, "in_progress": in_progress.active,
                "calibrations": {name: {"mode": cal.mode, "judge": cal.judge, "method": cal.map.method, "n": cal.n,
                                        "data_hash": cal.data_hash} for name, cal in named.items()}}


def _judge_routes(app: FastAPI, judge: Judge, worker: JudgeWorker, limits: Limits, max_items: int,
                  default_protocol: Protocol) -> None:
    """``/v1/audit`` and ``/v1/rank``."""
    @app.post("/v1/audit", response_model=dict[str, Any], responses=ERRORS, tags=["judge"])
    async def audit(body: AuditRequest) -> dict[str, Any]:
        """Judge what the store lacks, then audit consistency and agreement (``AuditReport.to_dict()``)."""
        if min(body.ks) < 3:
            raise InputError(f"ks must be >= 3, got {min(body.ks)}")
        items = validate_items(body.items, max_items)
        use = body.protocol or default_protocol
        scales = list(dict.fromkeys(body.scales))
        check_cost(limits, items, *(judge.score_task(points, use) for points in scales), judge.compare_task(use))
        options = {"scales": scales, "delta": body.delta, "ks": body.ks,
                   "bootstrap": body.bootstrap, "seed": body.seed, "protocol": use}
        report: dict[str, Any] = await worker.submit(None, items, audit=options)
        return report

    @app.post("/v1/rank", response_model=dict[str, Any],
              responses={**ERRORS, 501: {"model": ErrorOut, "description": "Ranking not available"}},
              tags=["judge"])
    async def rank(body: RankRequest) -> dict[str, Any]:
        """Rank the systems behind the responses (Bradley-Terry, Elo, win rate, mean score)."""
        try:
            ranking = importlib.import_module("trustjudge.audit._ranking")
        except ImportError as exc:
            raise HTTPException(501, f"ranking is not available in this trustjudge build ({exc})") from None
        items = validate_items(body.items, max_items, min_responses=2)
        use = body.protocol or default_protocol
        pairwise, pointwise = judge.compare_task(use, body.delta), judge.score_task(body.scale, use)
        check_cost(limits, items, pairwise, pointwise)
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


def create_app(judge_name: str | Backend, *, store_path: str | Path | Store | None = None,
               api_keys: Sequence[str] = (), max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               max_items: int = DEFAULT_MAX_ITEMS, protocol: Protocol = "direct", batch_wait_s: float = 0.0,
               preload: bool = True, max_judgments: int = DEFAULT_MAX_JUDGMENTS,
               max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES, max_labels: int = DEFAULT_MAX_LABELS,
               body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S, request_deadline_s: float = DEFAULT_REQUEST_DEADLINE_S,
               max_connections: int = DEFAULT_MAX_CONNECTIONS, max_requests_per_address: int = DEFAULT_MAX_PER_ADDRESS,
               modes: Sequence[str] | None = None,
               calibrations: Mapping[str, str | Path | Calibration] | None = None, **judge_options: Any) -> FastAPI:
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
        modes: The modes to serve, by name (each must have a route); default: every mode registered (or
            installed as a plug-in) by now whose :attr:`Mode.route` is set.
        calibrations: Calibrations a request may name (``calibration_name``), by name: a file's path or a
            :class:`Calibration`. Read now; with ``preload``, each is checked against the judge now too (one
            fitted for another judge, template or protocol refuses to start). A request can name only
            these: it never makes the server read a file.
        **judge_options: Further :class:`Judge` options (batch_size, temperature, seed, ...).

    Returns:
        The FastAPI app; ``app.state.worker`` is its :class:`JudgeWorker` (``.stats`` counts requests
        and judge calls), ``app.state.judge`` its judge, ``app.state.in_progress`` its
        :class:`InProgress` requests, ``app.state.calibrations`` its named calibrations.

    Raises:
        ConfigError: A bad option, limit or judge name.
    """
    _check_limits(max_body_bytes, max_items, max_judgments, max_prompt_bytes, max_labels, max_connections,
                  max_requests_per_address, body_timeout_s, request_deadline_s, judge_options)
    served = _served_modes(modes)
    _check_routes(served)
    routes = [mode_bodies(mode) for mode in served]
    named = load_calibrations(calibrations)
    judge = Judge(judge_name, store=store_path, protocol=protocol, **judge_options)
    if preload:
        _preload(judge, named, calibrations)
    worker = JudgeWorker(judge, batch_wait_s)
    lifespan = _lifespan(judge, worker)

    app = FastAPI(title="trustjudge", version=API_VERSION, lifespan=lifespan,
                  description="LLM-as-a-judge with distribution-sensitive scores and likelihood-aware verdicts. "
                              "Items use the JSONL schema of the README; records are the CLI's records.")
    app.state.judge, app.state.worker, app.state.calibrations = judge, worker, named
    limits = Limits(max_items, max_judgments, max_prompt_bytes, max_labels)
    app.state.limits = limits
    app.state.in_progress = in_progress = InProgress()
    app.add_middleware(Guard, keys=tuple(api_keys), max_body_bytes=max_body_bytes, body_timeout_s=body_timeout_s,
                       request_deadline_s=request_deadline_s, max_requests=max_connections,
                       max_per_address=max_requests_per_address, in_progress=in_progress)
    install_error_handlers(app)
    _service_routes(app, judge, worker, in_progress, named)
    for bodies in routes:
        mode_route(app, bodies, judge=judge, worker=worker, limits=limits, max_items=max_items, calibrations=named)
    _judge_routes(app, judge, worker, limits, max_items, protocol)
    verification_routes(app, named)
    _install_openapi(app)
    return app
