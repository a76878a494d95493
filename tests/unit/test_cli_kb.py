"""``rag kb rename`` / ``rag kb delete`` (issue 18) and the paged document list, offline against
a fake API (httpx.MockTransport)."""

from __future__ import annotations

import json

import httpx
import pytest
from typer.testing import CliRunner

from rag_cli import app
from rag_cli.client import ApiClient

runner = CliRunner(env={"RAG_TOKEN": "t"})


class FakeApi:
    """Records requests; one knowledge base (7) of 1,203 documents; KB 8 is someone else's."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.docs = [{"document_id": i, "status": "INDEXED" if i % 3 else "FAILED"} for i in range(1, 1204)]

    def handler(self, request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        self.requests.append((request.method, request.url.path, params))
        if request.url.path.endswith("/8") or "/8/" in request.url.path:
            return httpx.Response(404, json={"detail": "knowledge base not found", "error_code": "not_found"})
        if request.method == "DELETE":
            return httpx.Response(204)
        if request.method == "PATCH":
            return httpx.Response(200, json={"kb_id": 7, "name": json.loads(request.content)["name"]})
        docs = [d for d in self.docs if params.get("status") in (None, d["status"])]
        offset, limit = int(params["offset"]), int(params["limit"])
        return httpx.Response(200, json={"items": docs[offset:offset + limit], "total": len(docs)})


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    api = FakeApi()

    def connect(url: str, token: str, timeout_s: float = 120.0) -> ApiClient:
        return ApiClient(httpx.Client(base_url="http://api", transport=httpx.MockTransport(api.handler)))

    monkeypatch.setattr(ApiClient, "connect", staticmethod(connect))
    return api


@pytest.mark.parametrize("cmd", [["kb"], ["kb", "delete"], ["kb", "rename"]], ids=" ".join)
def test_kb_commands_have_help(cmd: list[str]) -> None:
    r = runner.invoke(app, [*cmd, "--help"])
    assert r.exit_code == 0 and "Usage" in r.output, r.output


def test_delete_asks_first_and_a_no_sends_nothing(fake: FakeApi) -> None:
    r = runner.invoke(app, ["kb", "delete", "7"], input="n\n")
    assert r.exit_code == 1 and fake.requests == []
    r = runner.invoke(app, ["kb", "delete", "7"], input="y\n")
    assert r.exit_code == 0, r.output
    assert fake.requests == [("DELETE", "/api/v1/knowledge-bases/7", {})]


def test_a_token_from_stdin_needs_yes(fake: FakeApi) -> None:
    r = runner.invoke(app, ["kb", "delete", "7", "--token-stdin"], input="tok\n")
    assert r.exit_code == 2 and fake.requests == []
    assert runner.invoke(app, ["kb", "delete", "7", "--token-stdin", "--yes"], input="tok\n").exit_code == 0


def test_delete_with_yes_and_a_404(fake: FakeApi) -> None:
    assert runner.invoke(app, ["kb", "delete", "7", "--yes"]).exit_code == 0
    r = runner.invoke(app, ["kb", "delete", "8", "-y"])
    assert r.exit_code == 1 and "404" in r.output


def test_rename_prints_the_renamed_knowledge_base(fake: FakeApi) -> None:
    r = runner.invoke(app, ["kb", "rename", "7", "Handbooks 2025"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"kb_id": 7, "name": "Handbooks 2025"}


def test_documents_are_fetched_page_by_page(fake: FakeApi) -> None:
    client = ApiClient.connect("http://api", "t")
    assert [d["document_id"] for d in client.documents(7)] == list(range(1, 1204))
    assert [p["offset"] for _, _, p in fake.requests] == ["0", "500", "1000"]
    failed = client.documents(7, status="FAILED")
    assert len(failed) == 401 and {d["status"] for d in failed} == {"FAILED"}
