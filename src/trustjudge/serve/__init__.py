"""``trustjudge serve``: an HTTP API (FastAPI) over one :class:`~trustjudge.Judge`.

Endpoints (JSON in, JSON out)::

    GET  /healthz      liveness and judge name (never needs a key; no paths or other server details)
    POST <mode route>  {"items": [...], <the mode's options>}               -> {"records": [the mode's records]}
    POST /v1/audit     {"items": [...], "scales": [5, 100], "delta", "ks", "bootstrap", "seed"} -> audit report
    POST /v1/rank      {"items": [...], "scale", "method", "bootstrap", ...}  -> ranking of the systems
    GET  /v1/stats     request, batch and model-call counters

Every registered mode whose :attr:`~trustjudge.Mode.route` is set gets its route, built from the mode
(:func:`~trustjudge.serve._bodies.mode_bodies`): the request takes the items and each field of the mode's
options dataclass (typed from its annotation, described by its ``metadata["help"]``, with its ``choices`` and
bounds), the response gives the mode's records. The built-in ones: ``/v1/score``, ``/v1/compare``,
``/v1/criteria``, ``/v1/criteria/compare``, ``/v1/checklist``, ``/v1/claims``; a plug-in mode with a route
gets its own with no change here. compare, checklist and claims also take a `calibration` (a calibration
file's JSON object) or a `calibration_name` (one the server holds: ``create_app(calibrations=...)``,
``trustjudge serve --calibration NAME=PATH``; a request never names a file), with optional
`target_agreement`, `risk_delta` and `calibration_override`: each record's verdicts gain a `calibrated` block
and the response a `calibration` summary (a calibration that does not fit, or an unknown name: 422 naming
the field).

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

The modules, by job: ``_app`` (create_app, the routes), ``_bodies`` (request and response models, a mode's
built from it), ``_worker`` (the judge worker), ``_guard`` (keys, body, deadline and per-address limits, what
a request may cost), ``_errors`` (error bodies and handlers), ``_uvicorn`` (how uvicorn runs), ``_openapi``
(the committed schema: ``python -m trustjudge.serve --write-openapi docs/openapi.json``).
"""

from ._app import API_VERSION, create_app, mode_route
from ._bodies import ModeBodies, mode_bodies
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
    InProgress,
)
from ._openapi import openapi_json
from ._uvicorn import uvicorn_options
from ._worker import JudgeWorker, WorkerStats

__all__ = ["API_VERSION", "DEFAULT_BODY_TIMEOUT_S", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_CONNECTIONS",
           "DEFAULT_MAX_ITEMS", "DEFAULT_MAX_JUDGMENTS", "DEFAULT_MAX_LABELS", "DEFAULT_MAX_PER_ADDRESS",
           "DEFAULT_MAX_PROMPT_BYTES", "DEFAULT_REQUEST_DEADLINE_S", "InProgress", "JudgeWorker", "ModeBodies",
           "WorkerStats", "create_app", "mode_bodies", "mode_route", "openapi_json", "uvicorn_options"]
