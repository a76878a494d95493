"""Domain errors carry their HTTP answers (status, body, headers) — what the e2e tests pin,
checked here without a server; one error root; no HTTP error raised outside the domain tree."""

from __future__ import annotations

import ast
import inspect
import json

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import shared.domain.errors as errors_module
from knowledge_service.errors_http import EXCEPTION_HANDLERS
from shared.domain.errors import (
    DatabaseUnavailableError,
    DocumentNotFound,
    EnqueueConflict,
    EnqueueContention,
    InFlightLimitExceeded,
    KnowledgeBaseNotFound,
    MalformedUploadError,
    MissingFileError,
    RagError,
    ServiceError,
    StorageUnavailableError,
    StreamLimitError,
    TaskNotFound,
    TopKTooLargeError,
    UnauthorizedError,
    UnsupportedUploadError,
    UploadTooLargeError,
)
from tests.support import ROOT


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
    (UnauthorizedError(), 401, "invalid or missing bearer token", {"www-authenticate": "Bearer"}),
    (TopKTooLargeError(80, 50), 422, [{"type": "less_than_equal", "loc": ["body", "top_k"], "input": 80,
                                        "msg": "top_k must be at most 50 (SEARCH_MAX_TOP_K)", "ctx": {"le": 50}}], {}),
    (StreamLimitError("for this user", 7), 429, "too many open event streams (for this user); retry after 7 s",
     {"retry-after": "7"}),
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

    assert Odd("x").http_status == 400 and client_raising(Odd("x")).get("/boom").status_code == 400
    r = client_raising(UnsupportedUploadError("name \ud800 bad")).get("/boom")
    assert r.status_code == 415 and json.loads(r.text)["detail"] == "name \ufffd bad"


def test_a_415_body_carries_its_error_code() -> None:
    r = client_raising(UnsupportedUploadError("file type .exe is not allowed; allowed: pdf")).get("/boom")
    assert r.json() == {"detail": "file type .exe is not allowed; allowed: pdf", "error_code": "unsupported_type"}
    r = client_raising(UnsupportedUploadError("password-protected", error_code="encrypted")).get("/boom")
    assert (r.status_code, r.json()["error_code"]) == (415, "encrypted")


def _service_errors() -> list[type[ServiceError]]:
    return [c for _, c in inspect.getmembers(errors_module, inspect.isclass) if issubclass(c, ServiceError)]


def test_one_root_for_every_error_the_project_raises() -> None:
    """Every class of the tree descends from ``RagError`` (the tree had nine roots)."""
    classes = [c for _, c in inspect.getmembers(errors_module, inspect.isclass)
               if c.__module__ == errors_module.__name__]
    assert len(classes) > 40
    assert [c.__name__ for c in classes if not issubclass(c, RagError)] == []


def test_every_api_error_carries_a_client_error_status_and_its_own_code() -> None:
    assert all(400 <= cls.http_status < 500 for cls in _service_errors())
    assert {cls.http_status for cls in _service_errors()} >= {400, 401, 404, 409, 413, 415, 422, 429}


def test_no_http_error_is_raised_outside_the_domain_tree() -> None:
    """The API raises no ``HTTPException`` of its own: every error status comes from a
    ``ServiceError``'s ``http_status`` (or FastAPI's own validation and routing)."""
    raising = []
    for path in sorted((ROOT / "knowledge_service").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name | ast.Attribute) and (getattr(node, "id", None) == "HTTPException"
                                                            or getattr(node, "attr", None) == "HTTPException"):
                raising.append(path.name)
    assert set(raising) <= {"errors_http.py"}  # the handler of FastAPI's own HTTPException


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
    assert {getattr(cls, "error_code", "") for cls in _service_errors() if cls is not ServiceError}.isdisjoint(
        {"", "refused"})
