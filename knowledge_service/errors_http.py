"""HTTP error responses: the one table from domain errors to status codes, and the 422 fix.

Use cases raise :mod:`shared.domain.errors` ``ServiceError`` subclasses; :data:`EXCEPTION_HANDLERS`
turns them into ``{"detail": ..., "error_code": ...}`` answers (:data:`STATUS_FOR`; the code is
the class's ``error_code``, e.g. ``knowledge_base_not_found``, ``in_flight_limit``, a 415's
``unsupported_type`` or ``encrypted``), and an unavailable dependency
(``StorageUnavailableError``, ``DatabaseUnavailableError``) into a 503, never a 500. Nothing else
in the API builds an error status. Every error body carries ``error_code``: FastAPI's and
Starlette's own (401 from authentication, 404 of an unknown path, 405, a validation 422) get
:data:`HTTP_ERROR_CODES`' code for their status.

FastAPI's default 422 handler echoes the offending input (``jsonable_encoder(exc.errors())``);
a JSON string may legally hold a lone surrogate (``"\\ud800"``), which UTF-8 cannot encode, so
that handler itself raised and the client got a 500. This one returns the same shape with
every string made encodable (lone surrogates become U+FFFD).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from shared.domain.errors import (
    DatabaseUnavailableError,
    EnqueueConflict,
    EnqueueContention,
    InFlightLimitExceeded,
    MalformedUploadError,
    MissingFileError,
    NotFoundError,
    ServiceError,
    StorageUnavailableError,
    UnsupportedUploadError,
    UploadRejectedError,
    UploadTooLargeError,
)

log = logging.getLogger(__name__)

#: ``Retry-After`` (seconds) of a 503 for an unavailable database: a restart or fail-over, or a
#: dropped connection, is usually over within seconds.
DATABASE_RETRY_AFTER_S = 5

_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings...) with lone surrogates replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encodable(v) for v in value]
    return value


#: ``error_code`` of an error FastAPI or Starlette raised (HTTPException), by status.
HTTP_ERROR_CODES: dict[int, str] = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
    409: "conflict", 413: "upload_too_large", 415: "unsupported_type", 422: "validation_error",
    429: "too_many_requests",
}


def http_error_code(status_code: int) -> str:
    """:data:`HTTP_ERROR_CODES`' code, else ``http_<status>``."""
    return HTTP_ERROR_CODES.get(status_code, f"http_{status_code}")


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """422 ``{"detail": [...], "error_code": "validation_error"}``, the detail as FastAPI writes
    it, safe for any input."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(status_code=422, content={"detail": encodable(jsonable_encoder(exc.errors())),
                                                  "error_code": "validation_error"})


async def http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's/FastAPI's ``HTTPException`` (authentication's 401 with its ``WWW-Authenticate``,
    an unknown path's 404, 405, ...) as FastAPI answers it, plus ``error_code``."""
    assert isinstance(exc, StarletteHTTPException)
    headers = getattr(exc, "headers", None)
    if exc.status_code in (204, 304) or exc.status_code < 200:  # no body allowed
        return Response(status_code=exc.status_code, headers=headers)
    return _error(exc.status_code, encodable(exc.detail), headers, error_code=http_error_code(exc.status_code))


# ------------------------------------------------------------------ domain errors → HTTP
#: The one table from use-case errors to HTTP status codes (most specific class first).
STATUS_FOR: tuple[tuple[type[ServiceError], int], ...] = (
    (NotFoundError, 404),
    (EnqueueConflict, 409),
    (EnqueueContention, 409),  # a concurrent request changed the task first: re-read and decide
    (InFlightLimitExceeded, 429),
    (UploadTooLargeError, 413),
    (UnsupportedUploadError, 415),
    (MissingFileError, 422),
    (MalformedUploadError, 400),
    (UploadRejectedError, 400),
)


def status_for(exc: ServiceError) -> int:
    """The HTTP status of a use-case error (:data:`STATUS_FOR`; 400 for an unlisted one)."""
    for cls, code in STATUS_FOR:
        if isinstance(exc, cls):
            return code
    return 400


def _error(status_code: int, detail: Any, headers: dict[str, str] | None = None, *, error_code: str) -> JSONResponse:
    return JSONResponse(status_code=status_code, content={"detail": detail, "error_code": error_code},
                        headers=headers)


async def service_error(request: Request, exc: Exception) -> JSONResponse:
    """``{"detail": ..., "error_code": exc.error_code}`` with the status of :func:`status_for`."""
    assert isinstance(exc, ServiceError)
    code = status_for(exc)
    if isinstance(exc, EnqueueConflict):
        return _error(code, encodable({"reason": exc.reason, "status": exc.status}), error_code=exc.error_code)
    if isinstance(exc, InFlightLimitExceeded):
        headers = {"Retry-After": str(exc.retry_after_s)}
        if exc.before_body:  # refused before an upload body was read: do not drain it
            headers["Connection"] = "close"
        return _error(code, encodable(str(exc)), headers, error_code=exc.error_code)
    if isinstance(exc, UploadRejectedError):
        log.info("upload refused", extra={"status": code, "reason": str(exc)})
        # Close the connection: the rest of the body is not read (nor drained for ever).
        return _error(code, encodable(exc.detail), {"Connection": "close"}, error_code=exc.error_code)
    return _error(code, encodable(str(exc)), error_code=exc.error_code)


async def storage_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """503 when the object store is down in the middle of a request (an upload, mostly)."""
    log.error("object storage unavailable", extra={"error": str(exc)})
    return _error(503, "object storage unavailable", {"Connection": "close"}, error_code="storage_unavailable")


async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """503 with ``Retry-After`` when PostgreSQL cannot be reached or the connection dropped
    (``shared.adapters.postgres.pool`` translates the driver's errors). The connection is closed: an upload's body
    may not have been read."""
    log.error("database unavailable", extra={"error": str(exc), "path": request.url.path})
    return _error(503, "database unavailable",
                  {"Retry-After": str(DATABASE_RETRY_AFTER_S), "Connection": "close"},
                  error_code="database_unavailable")


#: What ``create_app`` registers: exception class → handler.
EXCEPTION_HANDLERS: dict[type[Exception], Callable[[Request, Exception], Awaitable[Response]]] = {
    RequestValidationError: validation_error,
    StarletteHTTPException: http_exception,
    ServiceError: service_error,
    StorageUnavailableError: storage_unavailable,
    DatabaseUnavailableError: database_unavailable,
}
