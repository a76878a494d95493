"""What the upload routes document in OpenAPI (they read the raw stream, so FastAPI cannot
derive it from their parameters)."""

from __future__ import annotations

from typing import Any

from knowledge_service.upload.multipart import FILE_FIELD
from shared.domain.formats import hint

OPENAPI_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": [FILE_FIELD],
                    "properties": {
                        FILE_FIELD: {
                            "type": "string", "format": "binary",
                            "description": f"{hint()} (typed by content; GET /api/v1/formats); at most "
                                           "MAX_UPLOAD_BYTES",
                        },
                    },
                }
            }
        },
    }
}
_ERROR_BODY = {"application/json": {"schema": {
    "type": "object", "required": ["detail"], "properties": {"detail": {"type": "string"}},
}}}
_UNSUPPORTED_BODY = {"application/json": {"schema": {
    "type": "object", "required": ["detail", "error_code"],
    "properties": {"detail": {"type": "string"},
                   "error_code": {"type": "string", "enum": ["unsupported_type", "encrypted"]}},
}}}
#: The refusals the upload routes document (``{"detail": "..."}``).
OPENAPI_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "malformed multipart body", "content": _ERROR_BODY},
    413: {"description": "file larger than MAX_UPLOAD_BYTES (nothing stored)", "content": _ERROR_BODY},
    415: {"description": "type not accepted (GET /api/v1/formats), content disagreeing with the name, or a "
                         "password-protected file (error_code encrypted); nothing stored",
          "content": _UNSUPPORTED_BODY},
    429: {"description": "too many tasks in flight for this user; see Retry-After", "content": _ERROR_BODY},
    503: {"description": "object storage or database unavailable (nothing kept; for the database, see Retry-After)",
          "content": _ERROR_BODY},
}
#: What every other ``/api/v1`` route may answer when the database cannot be reached.
OPENAPI_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"description": "database unavailable; see Retry-After", "content": _ERROR_BODY},
}
