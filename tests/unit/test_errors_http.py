"""Domain errors become HTTP answers in one place (``knowledge_service/errors_http.py``)."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from knowledge_service.errors_http import service_error
from shared.domain.errors import (
    DocumentNotFound,
    EnqueueConflict,
    EnqueueContention,
    PendingVersionNotFound,
    ServiceError,
    TaskNotFound,
)

_app = FastAPI()
_app.add_exception_handler(ServiceError, service_error)
_raised: list[ServiceError] = []


@_app.get("/boom")
async def _boom() -> None:
    raise _raised[-1]


_client = TestClient(_app, raise_server_exceptions=False)


@pytest.mark.parametrize(("exc", "code", "detail"), [
    (DocumentNotFound(), 404, "not found"),
    (TaskNotFound(), 404, "not found"),
    (PendingVersionNotFound(), 404, "the document has no pending version"),
    (EnqueueConflict("task generation is 5, not 4", "FAILED"), 409,
     {"reason": "task generation is 5, not 4", "status": "FAILED"}),
    (EnqueueContention("try again \ud800"), 409, "try again \ufffd"),  # always encodable
])
def test_service_errors_map_to_status_codes(exc: ServiceError, code: int, detail: object) -> None:
    _raised.append(exc)
    r = _client.get("/boom")
    assert r.status_code == code
    assert json.loads(r.content)["detail"] == detail
