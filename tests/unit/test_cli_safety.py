"""Issue 18, the CLI: user text printed as text (never rich markup) and tokens kept off the
command line (RAG_TOKEN, --token-file, --token-stdin; --token warns; revoke-token never takes it
from argv). Offline: the API is an ``httpx.MockTransport``."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

import rag_cli
from rag_cli import app
from rag_cli.client import ApiClient
from rag_cli.safe import ARGV_WARNING, TokenSourceError, print_error, read_token

runner = CliRunner()
HOSTILE_NAME = "[/bold]crash.txt"
HOSTILE_ERROR = "[red]not red[/red] [link=http://x]y[/link] [/]"


def _document(name: str) -> dict[str, Any]:
    return {"document_id": 7, "kb_id": 1, "filename": name, "status": "FAILED", "chunk_count": 0,
            "error_message": HOSTILE_ERROR,
            "task": {"task_id": 9, "status": "FAILED", "attempt": 1, "error_code": "no_text"}}


@pytest.fixture(autouse=True)
def wide_consoles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The consoles are built at import, sized from the terminal of whoever imported them first."""
    monkeypatch.setattr(rag_cli.out, "width", 400)
    monkeypatch.setattr(rag_cli.err, "width", 400)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """Every ``ApiClient`` talks to a fake API answering one hostile document; the requests seen."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/documents"):
            return httpx.Response(200, json={"items": [_document(HOSTILE_NAME)]})
        return httpx.Response(200, json=_document(HOSTILE_NAME))

    real_connect = ApiClient.connect

    def connect(url: str, token: str, timeout_s: float = 120.0) -> ApiClient:
        client = real_connect(url, token, timeout_s)
        client.http = httpx.Client(base_url=url, headers=client.http.headers, transport=httpx.MockTransport(handler))
        return client

    monkeypatch.setattr(ApiClient, "connect", staticmethod(connect))
    monkeypatch.delenv("RAG_TOKEN", raising=False)
    return seen


@pytest.mark.parametrize("args", [["status", "--kb", "1"], ["status", "7"]])
def test_file_names_and_errors_are_printed_as_text(api: list[httpx.Request], args: list[str]) -> None:
    r = runner.invoke(app, args, env={"RAG_TOKEN": "tok", "COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    assert HOSTILE_NAME in r.output  # printed literally: no MarkupError, no markup eaten
    assert HOSTILE_ERROR in r.output
    assert api[0].headers["Authorization"] == "Bearer tok"


def test_error_messages_are_printed_as_text() -> None:
    buffer = io.StringIO()
    print_error(Console(file=buffer, width=300), HOSTILE_ERROR)
    assert buffer.getvalue().strip() == f"error: {HOSTILE_ERROR}"


def test_token_from_a_file(api: list[httpx.Request], tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("from-file\n")
    r = runner.invoke(app, ["status", "7", "--token-file", str(secret)])
    assert r.exit_code == 0, r.output
    assert api[0].headers["Authorization"] == "Bearer from-file"
    assert "warning" not in r.output


@pytest.mark.parametrize("flag", ["--token-stdin", "--token=-"])
def test_token_from_stdin(api: list[httpx.Request], flag: str) -> None:
    r = runner.invoke(app, ["status", "7", flag], input="from-stdin\n")
    assert r.exit_code == 0, r.output
    assert api[0].headers["Authorization"] == "Bearer from-stdin"


def test_token_on_the_command_line_warns(api: list[httpx.Request]) -> None:
    r = runner.invoke(app, ["status", "7", "--token", "on-argv"])
    assert r.exit_code == 0, r.output
    assert api[0].headers["Authorization"] == "Bearer on-argv"
    assert "visible in ps" in r.output


def test_two_token_sources_or_an_empty_file_exit_2(api: list[httpx.Request], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert runner.invoke(app, ["status", "7", "--token", "a", "--token-stdin"], input="b\n").exit_code == 2
    assert runner.invoke(app, ["status", "7", "--token-file", str(empty)]).exit_code == 2
    assert runner.invoke(app, ["status", "7", "--token-file", str(tmp_path / "missing")]).exit_code == 2
    assert api == []


def test_read_token_order() -> None:
    assert read_token(env={"RAG_TOKEN": " env \n"}) == "env"
    assert read_token("-", stdin=io.StringIO("piped\nrest"), env={"RAG_TOKEN": "env"}) == "piped"
    assert read_token(env={}) == ""
    warn = io.StringIO()
    assert read_token("argv", env={}, warn=Console(file=warn, width=300)) == "argv"
    assert ARGV_WARNING in warn.getvalue()
    with pytest.raises(TokenSourceError):
        read_token(token_stdin=True, stdin=io.StringIO(""))


def test_revoke_token_never_takes_the_token_from_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    revoked: list[tuple[str | None, int | None]] = []

    async def fake_revoke(dsn: str, token: str | None = None, token_id: int | None = None) -> bool:
        revoked.append((token, token_id))
        return True

    monkeypatch.setattr("rag_cli.admin.revoke_token", fake_revoke)
    env = {"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    r = runner.invoke(app, ["revoke-token", "rag_secret"], env=env)
    assert r.exit_code == 2 and "not taken from the command line" in r.output
    assert runner.invoke(app, ["revoke-token", "-"], input="rag_piped\n", env=env).exit_code == 0
    assert runner.invoke(app, ["revoke-token", "--token-stdin"], input="rag_stdin\n", env=env).exit_code == 0
    assert runner.invoke(app, ["revoke-token", "--id", "4"], env=env).exit_code == 0
    assert runner.invoke(app, ["revoke-token", "-", "--id", "4"], input="x\n", env=env).exit_code == 2
    assert revoked == [("rag_piped", None), ("rag_stdin", None), (None, 4)]
