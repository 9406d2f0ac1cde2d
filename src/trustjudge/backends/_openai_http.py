"""The wire of the OpenAI-compatible backend: one :class:`Channel` per backend sends its HTTP requests.

A channel holds the ``httpx`` client and the worker pool, shares a concurrency limit and an optional rate
limit with every other channel to the same base URL, reads each answer against its total deadline (a server
that trickles its answer must not hold a judgment for minutes), turns HTTP statuses into the engine's
errors, and applies the engine's :class:`~trustjudge._retry.RetryPolicy` to each request:

- HTTP 429, 5xx, timeouts, connection errors that a fresh connection may cure and malformed JSON raise
  :class:`~trustjudge.errors.TransientBackendError` (with ``retry_after`` from a ``Retry-After`` header);
- connection refused, HTTP 401/403 and 404 on an endpoint every judgment needs raise
  :class:`~trustjudge.errors.BackendUnavailable`, which stops the run at once;
- a request the server left unanswered through the retry budget stops the run when the server has never
  answered this channel, or when the request before it went the same way (:data:`SILENT_LIMIT`); a server
  that has never answered gets one retry of a request it left unanswered, not the whole budget;
- other 4xx raise :class:`~trustjudge.errors.BackendError` with the server's message.
"""

from __future__ import annotations

import email.utils
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .._retry import RetryPolicy
from ..errors import BackendError, BackendUnavailable, TransientBackendError

CONNECT_TIMEOUT_S = 10.0
"""The most a request waits for its connection (within its ``timeout``)."""
SILENT_LIMIT = 2
"""Requests in a row left unanswered through the retry budget that stop the run (the first one does, on a
server that has never answered)."""

T = TypeVar("T")

_ENDPOINT_LOCK = threading.Lock()
_SEMAPHORES: dict[str, threading.BoundedSemaphore] = {}
_LIMITERS: dict[str, _RateLimiter] = {}


class _RateLimiter:
    """Spaces request starts at least ``60 / rpm`` seconds apart."""

    def __init__(self, rpm: float) -> None:
        self.interval = 60.0 / rpm
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


class ServerError(TransientBackendError):
    """HTTP 5xx: retried by the engine, but the probe reads 500/501 as "not supported"."""

    def __init__(self, message: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(message, retry_after=retry_after)
        self.status = status


class ClientError(BackendError):
    """HTTP 4xx other than 401/403/429 (and a 404 on an endpoint not every judgment needs), with its status."""

    def __init__(self, message: str, status: int, server_message: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.server_message = server_message


class MalformedResponse(TransientBackendError):
    """A malformed response, retried: a server or proxy fault, unless it happens every time."""


class NoAnswer(TransientBackendError):
    """No complete answer within the request's deadline (nor a connection within its connect timeout)."""


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _server_message(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:500]
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return str(err)[:500]
    return body.strip()[:500]


def json_object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (servers omit optional fields)."""
    return value if isinstance(value, dict) else {}


class Channel:
    """The HTTP requests of one backend to one server, with their limits, deadlines, retries and counts.

    Args:
        httpx: the ``httpx`` module (imported by the backend, which names the extra to install).
        root: the server without the ``/v1`` suffix; requests go to ``root + "/v1"`` (:attr:`base_url`)
            and, for the server's own endpoints, to ``root``.
        model: the model name the server knows (sent with every completion, named in a 404).
        key: the API key (a bearer token) or ``None``; ``key_env`` names where it came from, for a 401/403.
        concurrency: requests in flight per base URL (shared by every channel of that URL).
        timeout_s: each request's total deadline.
        requests_per_minute: optional cap on request starts per base URL.
        transport: an ``httpx`` transport (tests inject ``httpx.MockTransport``).
    """

    def __init__(self, httpx: Any, root: str, *, model: str, key: str | None, key_env: str | None,
                 concurrency: int, timeout_s: float, requests_per_minute: float | None,
                 transport: Any = None) -> None:
        self._httpx = httpx
        self.root = root
        self.base_url = root + "/v1"
        self.model = model
        self.key_env = key_env
        self.timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, CONNECT_TIMEOUT_S)),
            headers=headers, transport=transport,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="trustjudge-http")
        with _ENDPOINT_LOCK:
            self._semaphore = _SEMAPHORES.setdefault(self.base_url, threading.BoundedSemaphore(concurrency))
            self._limiter = None
            if requests_per_minute:
                self._limiter = _LIMITERS.setdefault(self.base_url, _RateLimiter(requests_per_minute))
        self._lock = threading.Lock()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.requests = 0
        self.retry: RetryPolicy | None = None
        """The engine's retry policy (``None``: each request is tried once)."""
        self._answered = False
        """Whether the server has sent this channel one complete answer (any status)."""
        self._silent = 0
        """Requests in a row that got no answer through the retry budget."""

    def retrying(self, fn: Callable[[], T]) -> T:
        """``fn()`` under the engine's retry policy; a request the server leaves unanswered through the
        budget stops the run (:class:`BackendUnavailable`) when the server never answered, or when the
        request before it went the same way: each judgment would otherwise wait the whole budget again."""
        if self.retry is None:
            return fn()
        try:
            return self.retry.call(fn, give_up=self._give_up)
        except NoAnswer as exc:
            with self._lock:
                self._silent += 1
                silent, answered = self._silent, self._answered
            if not answered or silent >= SILENT_LIMIT:
                what = ("has not answered any request" if not answered
                        else f"left {silent} requests in a row unanswered")
                raise BackendUnavailable(
                    f"the judge server {self.root} {what} ({exc}), retries included: the run is stopped. Is "
                    "it stuck or overloaded? A judge that needs longer per request takes a longer ?timeout= "
                    f"(now {self.timeout_s:g} s)") from exc
            raise

    def _give_up(self, exc: TransientBackendError, attempt: int) -> bool:
        """A server that has never answered gets one retry of a request it left unanswered."""
        return isinstance(exc, NoAnswer) and not self._answered and attempt >= 1

    def request(self, method: str, url: str, body: Mapping[str, Any] | None = None, *,
                fatal_404: bool = False) -> Any:
        """One HTTP call; errors become (Transient)BackendError, the JSON body is returned.

        Connection refused and HTTP 401/403 (and 404 with ``fatal_404``: an endpoint every judgment
        needs) raise :class:`BackendUnavailable`, which stops the run at once.
        """
        if self._limiter is not None:
            self._limiter.wait()
        with self._semaphore:
            status, headers, content = self._exchange(method, url, body)
        with self._lock:
            self._answered, self._silent = True, 0
        text = content.decode("utf-8", errors="replace")
        if status >= 500:
            raise ServerError(f"{url} returned HTTP {status}: {_server_message(text)}", status,
                              retry_after=_retry_after(headers))
        if status == 429:
            raise TransientBackendError(f"{url} returned HTTP 429: {_server_message(text)}",
                                        retry_after=_retry_after(headers))
        if status in (401, 403):
            key = f" (check {self.key_env})" if self.key_env else ""
            raise BackendUnavailable(f"{url} returned HTTP {status}: {_server_message(text)}{key}")
        if status == 404 and fatal_404:
            raise BackendUnavailable(f"{url} returned HTTP 404: {_server_message(text)} (check the URL "
                                     f"and the model name {self.model!r})")
        if status >= 400:
            said = _server_message(text)
            raise ClientError(f"{url} returned HTTP {status}: {said}", status, said)
        try:
            return json.loads(content)
        except (ValueError, RecursionError) as exc:  # RecursionError: nesting too deep for the decoder
            raise TransientBackendError(f"{url} returned malformed JSON: {text[:200]!r}") from exc

    def _exchange(self, method: str, url: str, body: Mapping[str, Any] | None) -> tuple[int, Mapping[str, str], bytes]:
        """Send one request and read its whole answer before its deadline: ``(status, headers, body)``.

        httpx's timeouts bound each wait on its own (a server sending a byte every few seconds never trips
        them), so the answer is read in pieces against the request's total deadline.
        """
        httpx = self._httpx
        deadline = time.monotonic() + self.timeout_s
        for attempt in range(2):
            try:
                with self._client.stream(method, url, json=body) as resp:
                    chunks = []
                    for chunk in resp.iter_bytes():
                        chunks.append(chunk)
                        if time.monotonic() > deadline:
                            raise NoAnswer(f"{url}: the answer was not complete within the {self.timeout_s:g} s "
                                           "timeout (it came too slowly)")
                    return resp.status_code, resp.headers, b"".join(chunks)
            except httpx.ConnectTimeout as exc:
                raise NoAnswer(f"{url}: no connection within {min(self.timeout_s, CONNECT_TIMEOUT_S):g} s") from exc
            except httpx.TimeoutException as exc:
                raise NoAnswer(f"{url}: no answer within the {self.timeout_s:g} s timeout "
                               f"({type(exc).__name__})") from exc
            except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as exc:
                # A pooled keep-alive connection that the server closed as it was reused: try once
                # more at once on a fresh connection (every request here is safe to repeat).
                if attempt == 0:
                    continue
                raise TransientBackendError(f"{url}: {type(exc).__name__}: {exc}") from exc
            except httpx.ConnectError as exc:
                # Nothing listens there (or the name does not resolve): no retry can help.
                raise BackendUnavailable(f"{url}: cannot connect ({exc}); is the judge server running "
                                         f"at {self.root}?") from exc
            except httpx.TransportError as exc:
                raise TransientBackendError(f"{url}: {type(exc).__name__}: {exc}") from exc
        raise AssertionError("unreachable")

    def complete(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """POST /v1/completions; check the response shape and count tokens."""
        data = self.request("POST", self.base_url + "/completions", {"model": self.model, **payload},
                            fatal_404=True)
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise TransientBackendError(f"{self.base_url}/completions returned no choices: {str(data)[:200]}")
        usage = json_object(data.get("usage"))
        with self._lock:
            self.requests += 1
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)
        return data

    def chat(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """POST /v1/chat/completions; check the response shape and count tokens."""
        url = self.base_url + "/chat/completions"
        data = self.request("POST", url, {"model": self.model, **payload}, fatal_404=True)
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise MalformedResponse(f"{url} returned no choices: {str(data)[:200]}")
        usage = json_object(data.get("usage"))
        with self._lock:
            self.requests += 1
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)
        return dict(data)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``[fn(item) for item in items]``, on the channel's worker pool when there is more than one."""
        if len(items) <= 1:
            return [fn(item) for item in items]
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()


__all__ = ["CONNECT_TIMEOUT_S", "SILENT_LIMIT", "Channel", "ClientError", "MalformedResponse", "NoAnswer",
           "ServerError", "json_object"]
