"""HTTP error responses the framework would otherwise get wrong.

FastAPI's default 422 handler echoes the offending input (``jsonable_encoder(exc.errors())``);
a JSON string may legally hold a lone surrogate (``"\\ud800"``), which UTF-8 cannot encode, so
that handler itself raised and the client got a 500. This one returns the same shape with
every string made encodable (lone surrogates become U+FFFD).

Domain errors raised by use cases (``shared.errors.ServiceError``) are mapped to HTTP here, in
one place (:func:`service_error`).
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from shared.errors import EnqueueConflict, EnqueueContention, NotFoundError, ServiceError

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


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """422 ``{"detail": [...]}`` as FastAPI writes it, safe for any input."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(status_code=422, content={"detail": encodable(jsonable_encoder(exc.errors()))})


def _status_of(exc: ServiceError) -> int:
    """The one place domain errors become HTTP status codes."""
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, EnqueueConflict | EnqueueContention):
        return 409  # a concurrent request changed the task first: re-read and decide
    return 400


async def service_error(request: Request, exc: Exception) -> JSONResponse:
    """A use case's refusal (:class:`shared.errors.ServiceError`) as ``{"detail": ...}``."""
    assert isinstance(exc, ServiceError)
    detail: Any = str(exc)
    if isinstance(exc, EnqueueConflict):
        detail = {"reason": exc.reason, "status": exc.status}
    return JSONResponse(status_code=_status_of(exc), content={"detail": encodable(detail)})
