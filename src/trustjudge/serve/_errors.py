"""Error responses: the schemas of error bodies, the one map from library errors to HTTP statuses, and the
handlers that write them (every body has a ``detail``; a 422 lists ``{type, loc, msg, item, field}``)."""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from ..errors import BackendError, ConfigError, InputError, PrerequisiteError, StoreError, TrustJudgeError

__all__ = ["ERRORS", "ErrorOut", "ProblemOut", "ValidationErrorOut", "install_error_handlers", "problem"]

log = logging.getLogger("trustjudge.server")


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


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Bad option"},
    401: {"model": ErrorOut, "description": "Missing or wrong API key (when the server has keys)"},
    408: {"model": ErrorOut, "description": "Body not sent in time (--timeout idle, --request-deadline in all)"},
    413: {"model": ErrorOut, "description": "Body, items, judgments, prompt bytes or labels over the server's "
                                            "limit (the message names it)"},
    422: {"model": ValidationErrorOut, "description": "Invalid request or item (a non-finite number included)"},
    429: {"model": ErrorOut, "description": "Too many requests in progress from this address"},
    503: {"model": ErrorOut, "description": "The judge backend failed, the store is full, or the server is busy"},
}

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


def problem(exc: InputError) -> dict[str, Any]:
    if exc.line == 0:  # a field of the request body itself (a request's criteria or checklist)
        return {"type": "invalid_field", "loc": ["body", *_field_path(exc.field)], "msg": exc.reason, "item": None,
                "field": exc.field}
    item = exc.line - 1 if exc.line is not None else None
    loc: list[str | int] = ["body", "items"]
    if item is not None:
        loc += [item, *_field_path(exc.field)]
    return {"type": "invalid_item", "loc": loc, "msg": exc.reason, "item": item, "field": exc.field}


def install_error_handlers(app: FastAPI) -> None:
    """Map library errors, request-schema problems and anything unexpected to error bodies on ``app``."""
    async def on_input_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, InputError)
        return JSONResponse({"detail": [problem(exc)]}, status_code=422)

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
