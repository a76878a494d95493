"""The one table from domain errors to HTTP answers (status, body, headers) — what the e2e
tests pin, checked here without a server."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from knowledge_service.errors_http import EXCEPTION_HANDLERS, STATUS_FOR, status_for
from shared.domain.errors import (
    DatabaseUnavailableError,
    DocumentNotFound,
    EnqueueConflict,
    EnqueueContention,
    InFlightLimitExceeded,
    KnowledgeBaseNotFound,
    MalformedUploadError,
    MissingFileError,
    ServiceError,
    StorageUnavailableError,
    TaskNotFound,
    UnsupportedUploadError,
    UploadTooLargeError,
)


def client_raising(exc: Exception) -> TestClient:
    app = FastAPI()
    for cls, handler in EXCEPTION_HANDLERS.items():
        app.add_exception_handler(cls, handler)

    @app.get("/boom")
    async def boom() -> None:
        raise exc

    return TestClient(app, raise_server_exceptions=False)


CASES: list[tuple[Exception, int, object, dict[str, str]]] = [
    (TaskNotFound(), 404, "not found", {}),
    (DocumentNotFound(), 404, "not found", {}),
    (KnowledgeBaseNotFound(), 404, "not found", {}),
    (EnqueueConflict("task is RUNNING", "RUNNING"), 409, {"reason": "task is RUNNING", "status": "RUNNING"}, {}),
    (EnqueueContention("busy"), 409, "busy", {}),
    (InFlightLimitExceeded(20, 30), 429,
     "too many tasks in flight (limit 20 per user); retry when some have finished", {"retry-after": "30"}),
    (InFlightLimitExceeded(20, 30, before_body=True), 429,
     "too many tasks in flight (limit 20 per user); retry when some have finished",
     {"retry-after": "30", "connection": "close"}),
    (UploadTooLargeError("upload exceeds the limit of 5 bytes"), 413, "upload exceeds the limit of 5 bytes",
     {"connection": "close"}),
    (UnsupportedUploadError("nope"), 415, "nope", {"connection": "close"}),
    (MalformedUploadError("bad"), 400, "bad", {"connection": "close"}),
    (MissingFileError("file"), 422,
     [{"type": "missing", "loc": ["body", "file"], "msg": "Field required", "input": None}], {"connection": "close"}),
    (StorageUnavailableError("down"), 503, "object storage unavailable", {"connection": "close"}),
    (DatabaseUnavailableError("database unavailable: ConnectionRefusedError: secret host detail"), 503,
     "database unavailable", {"retry-after": "5", "connection": "close"}),
]


@pytest.mark.parametrize(("exc", "status", "detail", "headers"), CASES, ids=lambda v: type(v).__name__)
def test_domain_error_maps_to_its_http_answer(exc: Exception, status: int, detail: object,
                                              headers: dict[str, str]) -> None:
    r = client_raising(exc).get("/boom")
    assert r.status_code == status
    assert r.json() == {"detail": detail, "error_code": getattr(exc, "error_code", None)}
    for name, value in headers.items():
        assert r.headers[name] == value


def test_an_unlisted_service_error_is_a_400_and_a_lone_surrogate_is_encodable() -> None:
    class Odd(ServiceError):
        pass

    assert status_for(Odd("x")) == 400
    r = client_raising(UnsupportedUploadError("name \ud800 bad")).get("/boom")
    assert r.status_code == 415 and json.loads(r.text)["detail"] == "name \ufffd bad"


def test_a_415_body_carries_its_error_code() -> None:
    r = client_raising(UnsupportedUploadError("file type .exe is not allowed; allowed: pdf")).get("/boom")
    assert r.json() == {"detail": "file type .exe is not allowed; allowed: pdf", "error_code": "unsupported_type"}
    r = client_raising(UnsupportedUploadError("password-protected", error_code="encrypted")).get("/boom")
    assert (r.status_code, r.json()["error_code"]) == (415, "encrypted")


def test_every_mapped_class_is_a_service_error() -> None:
    assert all(issubclass(cls, ServiceError) for cls, _ in STATUS_FOR)


def test_every_error_body_carries_an_error_code() -> None:
    """Issue 18: FastAPI's and Starlette's own errors too (authentication's 401, an unknown path,
    a wrong method, a validation 422, an HTTPException a route raises), and every domain class
    has its own code."""
    from fastapi import Depends, HTTPException, Query

    def auth() -> None:
        raise HTTPException(401, "invalid or missing bearer token", headers={"WWW-Authenticate": "Bearer"})

    app = FastAPI()
    for cls, handler in EXCEPTION_HANDLERS.items():
        app.add_exception_handler(cls, handler)

    @app.get("/private", dependencies=[Depends(auth)])
    async def private() -> None: ...

    @app.get("/typed")
    async def typed(n: int = Query(ge=1)) -> int:
        if n > 10:
            raise HTTPException(422, [{"type": "less_than_equal", "loc": ["query", "n"], "msg": "n <= 10"}])
        return n

    c = TestClient(app, raise_server_exceptions=False)
    answers = {
        "401": c.get("/private"), "404": c.get("/nowhere"), "405": c.post("/typed"),
        "422": c.get("/typed?n=0"), "422-raised": c.get("/typed?n=11"),
    }
    assert {k: (r.status_code, r.json()["error_code"]) for k, r in answers.items()} == {
        "401": (401, "unauthorized"), "404": (404, "not_found"), "405": (405, "method_not_allowed"),
        "422": (422, "validation_error"), "422-raised": (422, "validation_error"),
    }
    assert answers["401"].headers["www-authenticate"] == "Bearer"
    assert answers["422"].json()["detail"][0]["loc"] == ["query", "n"]
    assert {getattr(cls, "error_code", "") for cls, _ in STATUS_FOR}.isdisjoint({"", "refused"})
