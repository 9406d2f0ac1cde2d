"""What a request may hold and cost: API keys, requests in progress (in all and per client address), the
body's size and deadline, non-finite numbers, and the items, judgments, prompt bytes and labels one request
may ask (every refusal names its limit and the ``trustjudge serve`` option that sets it)."""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import HTTPException
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import InputError
from ..io._items import Item, items_from_dicts
from ..modes._base import Cost, Task

__all__ = ["DEFAULT_BODY_TIMEOUT_S", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_CONNECTIONS", "DEFAULT_MAX_ITEMS",
           "DEFAULT_MAX_JUDGMENTS", "DEFAULT_MAX_LABELS", "DEFAULT_MAX_PER_ADDRESS", "DEFAULT_MAX_PROMPT_BYTES",
           "DEFAULT_REQUEST_DEADLINE_S", "OPEN_PATHS", "Guard", "InProgress", "Limits", "check_cost",
           "validate_items"]

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
OPEN_PATHS = frozenset({"/healthz"})


@dataclass
class InProgress:
    """Requests in progress (receiving their body, waiting or judged), in all and per client address.

    Written by the middleware on the server's one event loop only: no lock needed."""

    active: int = 0
    by_address: dict[str, int] = field(default_factory=dict)


class Guard:
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


# -- what one request may cost ----------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """What one request may cost (413 beyond, naming the limit and its ``trustjudge serve`` option)."""

    items: int
    judgments: int
    prompt_bytes: int
    labels: int


def check_cost(limits: Limits, items: list[Item], *tasks: Task) -> None:
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


def validate_items(raw: Any, max_items: int, min_responses: int = 1) -> list[Item]:
    """A request's items, validated by the library (422 naming item and field; 413 over ``max_items``)."""
    if not isinstance(raw, list):
        raise InputError(f"items must be a list of item objects, got {type(raw).__name__}")
    if len(raw) > max_items:
        raise HTTPException(413, f"{len(raw):,} items is over the limit of {max_items:,} per request")
    if not raw:
        raise InputError("items must hold at least one item")
    items = items_from_dicts(raw, source="request", sources="data")  # no server-side paths or URLs
    seen: set[str] = set()
    for index, item in enumerate(items, start=1):
        if len(item.responses) < min_responses:
            raise InputError(f"needs at least {min_responses} responses, has {len(item.responses)}",
                             line=index, field="responses")
        if item.id in seen:
            raise InputError(f"duplicate item id {item.id!r}", line=index, field="id")
        seen.add(item.id)
    return items
