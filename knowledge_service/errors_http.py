"""HTTP error responses: domain errors written out as answers, and the 422 fix.

Use cases, the authentication and the routes raise :mod:`shared.domain.errors` ``ServiceError``
subclasses, which carry their answer: ``http_status``, ``error_code`` (e.g.
``knowledge_base_not_found``, ``in_flight_limit``, a 415's ``unsupported_type`` or ``encrypted``),
the body's detail and the headers; :data:`EXCEPTION_HANDLERS` turns them into
``{"detail": ..., "error_code": ...}`` answers, and an unavailable dependency
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

from shared.domain.errors import DatabaseUnavailableError, ServiceError, StorageUnavailableError, UploadRejectedError

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


def _error(status_code: int, detail: Any, headers: dict[str, str] | None = None, *, error_code: str) -> JSONResponse:
    return JSONResponse(status_code=status_code, content={"detail": detail, "error_code": error_code},
                        headers=headers)


async def service_error(request: Request, exc: Exception) -> JSONResponse:
    """``{"detail": exc.response_detail(), "error_code": exc.error_code}``, status
    ``exc.http_status``, headers ``exc.response_headers()``."""
    assert isinstance(exc, ServiceError)
    if isinstance(exc, UploadRejectedError):
        log.info("upload refused", extra={"status": exc.http_status, "reason": str(exc)})
    return _error(exc.http_status, encodable(exc.response_detail()), exc.response_headers() or None,
                  error_code=exc.error_code)


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
