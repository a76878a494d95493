"""The ``rag`` CLI offline: help on every command, argument errors, Retry-After parsing, folder
collection, and the upload run (429 honoured) against a fake API (httpx.MockTransport)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from rag_cli import also_in_text, app, file_label
from rag_cli.client import (
    DEFAULT_RETRY_AFTER_S,
    MAX_RETRY_AFTER_S,
    ApiClient,
    UploadRun,
    collect_files,
    retry_after_seconds,
    split_supported,
)
from task_service.jobs.oneshot import OPS
from tests.support import ROOT

runner = CliRunner()

COMMANDS = [
    ["create-user"], ["create-token"], ["list-tokens"], ["revoke-token"], ["create-kb"], ["upload"], ["status"],
    ["search"], ["retry"], ["reindex"], ["requeue-stuck"], ["dlq"], ["dlq", "list"], ["dlq", "replay"], ["worker"],
    ["api"], ["ops"], *(["ops", job] for job in OPS), ["migrate"], ["build-model"],
]


def test_top_level_help_lists_every_command() -> None:
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0, r.output
    for cmd in {c[0] for c in COMMANDS}:
        assert cmd in r.output


@pytest.mark.parametrize("cmd", COMMANDS, ids=" ".join)
def test_every_command_has_help(cmd: list[str]) -> None:
    r = runner.invoke(app, [*cmd, "--help"])
    assert r.exit_code == 0, r.output
    assert "Usage" in r.output


@pytest.mark.parametrize("args", [
    ["upload", "x.md"],  # --kb missing
    ["upload", "no/such/path", "--kb", "1", "--token", "t"],
    ["upload", ".", "--kb", "0", "--token", "t"],  # kb id < 1
    ["status"],  # neither a document nor --task/--kb
    ["status", "1", "--kb", "2", "--token", "t"],
    ["retry", "abc"],
    ["reindex", "--token", "t"],
    ["revoke-token"],
    ["revoke-token", "tok", "--id", "3"],
    ["create-kb", "docs"],  # --user missing
    ["dlq", "replay", "x"],
    ["ops", "relay"],  # --once missing: the worker runs the jobs, the command runs one pass
    ["ops", "no-such-job", "--once"],
    ["no-such-command"],
], ids=lambda a: " ".join(a))
def test_bad_arguments_exit_2(args: list[str]) -> None:
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output


def test_user_command_without_token_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAG_TOKEN", raising=False)
    (tmp_path / "a.md").write_text("# a\n")
    r = runner.invoke(app, ["upload", str(tmp_path), "--kb", "1"])
    assert r.exit_code == 2
    assert "RAG_TOKEN" in r.output


def test_unreachable_api_or_database_is_a_message_not_a_traceback() -> None:
    r = runner.invoke(app, ["status", "1", "--api-url", "http://127.0.0.1:1", "--token", "t"])
    assert r.exit_code == 1 and "error" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["list-tokens"], env={"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"})
    assert r.exit_code == 1 and "DATABASE_URL" in r.output, r.output


@pytest.mark.parametrize("module", ["task_service", "knowledge_service"])
def test_python_m_help_prints_help_and_starts_nothing(module: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
           # unreachable services: a service that started anyway would fail, not hang
           "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "AMQP_URL": "amqp://x:y@127.0.0.1:1/"}
    r = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Usage" in r.stdout and "--help" in r.stdout
    assert "starting" not in r.stderr  # no "worker starting" / uvicorn start-up line


# ------------------------------------------------------------------ Retry-After and files


@pytest.mark.parametrize(("header", "expected"), [
    ("30", 30.0), (" 2 ", 2.0), ("0.5", 0.5), ("-4", 0.0), ("99999", MAX_RETRY_AFTER_S), (None, DEFAULT_RETRY_AFTER_S),
    ("", DEFAULT_RETRY_AFTER_S), ("soon", DEFAULT_RETRY_AFTER_S), ("nan", DEFAULT_RETRY_AFTER_S),
    ("Wed, 21 Oct 2026 07:28:10 GMT", 10.0),
])
def test_retry_after_seconds(header: str | None, expected: float) -> None:
    now = datetime(2026, 10, 21, 7, 28, 0, tzinfo=UTC)
    assert retry_after_seconds(header, now) == pytest.approx(expected)


def test_collect_files_recurses_and_skips_hidden(tmp_path: Path) -> None:
    for rel in ["b.md", "a/x.txt", "a/.hidden.txt", ".git/config", "z/y/deep.html"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert [p.relative_to(tmp_path).as_posix() for p in collect_files(tmp_path)] == ["a/x.txt", "b.md", "z/y/deep.html"]
    assert collect_files(tmp_path / "b.md") == [tmp_path / "b.md"]
    with pytest.raises(FileNotFoundError):
        collect_files(tmp_path / "missing")


# ------------------------------------------------------------------ upload run against a fake API


class FakeApi:
    """An API with an in-flight cap: a task finishes after ``polls_to_finish`` status reads; an
    upload past the cap answers 429 with ``Retry-After``. Time is a fake clock."""

    def __init__(self, cap: int, retry_after: int = 3, polls_to_finish: int = 2, fail: str = "") -> None:
        self.cap, self.retry_after, self.polls_to_finish, self.fail = cap, retry_after, polls_to_finish, fail
        self.now = 0.0
        self.tasks: dict[int, dict[str, object]] = {}
        self.polls: dict[int, int] = {}
        self.upload_times: list[tuple[float, int]] = []
        self.by_content: dict[bytes, int] = {}  # content dedup per KB, as the API does

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += max(seconds, 0.01)

    def in_flight(self) -> int:
        return sum(1 for t in self.tasks.values() if t["status"] == "WAITING")

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            name = request.content.split(b'filename="')[1].split(b'"')[0].decode()
            if name.endswith(".bin"):
                self.upload_times.append((self.now, 415))
                return httpx.Response(415, json={"detail": "unsupported type"})
            if self.in_flight() >= self.cap:
                self.upload_times.append((self.now, 429))
                return httpx.Response(429, headers={"Retry-After": str(self.retry_after)}, json={"detail": "busy"})
            content = request.content.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n--", 1)[0]
            same = self.by_content.get(content)
            if same is not None and request.url.params.get("allow_duplicate") != "true":
                task = self.tasks[same]
                return httpx.Response(200, json={"document_id": 100 + same, "task_id": same, "duplicate_of": 100 + same,
                                                 "task_status": task["status"]})
            tid = len(self.tasks) + 1
            self.by_content.setdefault(content, tid)
            self.tasks[tid] = {"task_id": tid, "status": "WAITING", "name": name}
            self.upload_times.append((self.now, 202))
            return httpx.Response(202, json={"document_id": 100 + tid, "task_id": tid, "task_status": "WAITING"})
        tid = int(request.url.path.rsplit("/", 1)[1])
        self.polls[tid] = self.polls.get(tid, 0) + 1
        task = self.tasks[tid]
        if self.polls[tid] >= self.polls_to_finish:
            failed = task["name"] == self.fail
            task.update(status="FAILED" if failed else "SUCCESS", error_code="no_text" if failed else None,
                        error_message="no text" if failed else None)
        return httpx.Response(200, json=task)


def _files(tmp_path: Path, names: list[str]) -> list[Path]:
    for n in names:
        (tmp_path / n).write_text(f"hello from {n}")  # distinct bytes: the fake dedups like the API
    return [tmp_path / n for n in names]


def test_upload_run_honours_retry_after_and_follows_every_task(tmp_path: Path) -> None:
    fake = FakeApi(cap=2, retry_after=3)
    client = ApiClient(httpx.Client(base_url="http://api", transport=httpx.MockTransport(fake.handler)))
    events: list[str] = []
    run = UploadRun.of(client, 1, _files(tmp_path, [f"f{i}.md" for i in range(5)]), poll_s=1.0,
                       sleep=fake.sleep, clock=lambda: fake.now, on_event=lambda kind, _r: events.append(kind))
    items = run.run()
    assert [i.status for i in items] == ["SUCCESS"] * 5
    assert run.waits and all(w == 3.0 for w in run.waits)
    assert events.count("uploaded") == 5 and events.count("finished") == 5 and "waiting" in events
    # after each 429 the next upload attempt waits at least Retry-After
    for (t429, code), (t_next, _) in zip(fake.upload_times, fake.upload_times[1:], strict=False):
        if code == 429:
            assert t_next - t429 >= 3.0
    assert len(fake.tasks) == 5


def test_upload_run_reports_refusals_and_failures(tmp_path: Path) -> None:
    fake = FakeApi(cap=10, fail="bad.md")
    client = ApiClient(httpx.Client(base_url="http://api", transport=httpx.MockTransport(fake.handler)))
    items = UploadRun.of(client, 1, _files(tmp_path, ["ok.md", "x.bin", "bad.md"]), sleep=fake.sleep,
                         clock=lambda: fake.now).run()
    by_name = {i.path.name: i for i in items}
    assert by_name["ok.md"].status == "SUCCESS"
    assert by_name["x.bin"].status == "REFUSED" and "415" in (by_name["x.bin"].error or "")
    assert by_name["bad.md"].status == "FAILED" and "no_text" in (by_name["bad.md"].error or "")


def test_upload_run_names_the_document_a_duplicate_is_of(tmp_path: Path) -> None:
    fake = FakeApi(cap=10)
    client = ApiClient(httpx.Client(base_url="http://api", transport=httpx.MockTransport(fake.handler)))
    (tmp_path / "a.md").write_text("same bytes")
    (tmp_path / "copy-of-a.md").write_text("same bytes")
    paths = [tmp_path / "a.md", tmp_path / "copy-of-a.md"]
    items = UploadRun.of(client, 1, paths, sleep=fake.sleep, clock=lambda: fake.now).run()
    assert [i.duplicate_of for i in items] == [None, items[0].document_id]
    assert [i.status for i in items] == ["SUCCESS", "SUCCESS"] and len(fake.tasks) == 1
    again = UploadRun.of(client, 1, paths, sleep=fake.sleep, clock=lambda: fake.now, allow_duplicate=True).run()
    assert [i.duplicate_of for i in again] == [None, None] and len(fake.tasks) == 3


def test_upload_run_without_follow_stops_after_uploading(tmp_path: Path) -> None:
    fake = FakeApi(cap=10)
    client = ApiClient(httpx.Client(base_url="http://api", transport=httpx.MockTransport(fake.handler)))
    items = UploadRun.of(client, 1, _files(tmp_path, ["a.md", "b.md"]), follow=False, sleep=fake.sleep,
                         clock=lambda: fake.now).run()
    assert [i.status for i in items] == ["WAITING", "WAITING"]
    assert fake.polls == {}


def test_folder_walk_skips_types_the_registry_does_not_accept(tmp_path: Path) -> None:
    paths = [tmp_path / n for n in ["a.pptx", "b.CSV", "notes", "Dr. Smith", "c.exe", "old.wpd", "x.png"]]
    send, skipped = split_supported(paths)
    assert [p.name for p in send] == ["a.pptx", "b.CSV", "notes", "Dr. Smith", "x.png"]
    assert [(p.name, why) for p, why in skipped] == [
        ("c.exe", ".exe is not a supported type"),
        ("old.wpd", ".wpd is not a supported type")]


def test_upload_command_prints_a_table_and_exits_1_on_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeApi(cap=10, fail="bad.md")
    real_connect = ApiClient.connect

    def connect(url: str, token: str, timeout_s: float = 120.0) -> ApiClient:
        client = real_connect(url, token, timeout_s)
        client.http = httpx.Client(base_url=url, headers=client.http.headers,
                                   transport=httpx.MockTransport(fake.handler))
        return client

    monkeypatch.setattr(ApiClient, "connect", staticmethod(connect))
    _files(tmp_path, ["ok.md", "bad.md", "tool.exe"])
    r = runner.invoke(app, ["upload", str(tmp_path), "--kb", "1", "--token", "t", "--poll", "0.1"])
    assert r.exit_code == 1, r.output
    assert "SUCCESS" in r.output and "FAILED" in r.output and "no_text" in r.output
    assert f"skipped {tmp_path / 'tool.exe'}: .exe is not a supported type" in r.output
    assert "tool.exe" not in [t["name"] for t in fake.tasks.values()]



def test_status_names_an_archive_member_s_origin_and_an_archive_s_members() -> None:
    assert file_label({"filename": "a/b.txt", "origin": {"document_id": 7, "filename": "pack.zip"}, "members": 0}) == (
        "a/b.txt (from pack.zip, document 7)")
    archive = {"filename": "pack.zip", "origin": None, "members": 3}
    assert file_label(archive) == "pack.zip (archive: 3 member documents)"
    assert file_label({"filename": "plain.txt"}) == "plain.txt"

def test_search_names_every_other_document_holding_a_hit_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29: a collapsed hit's "also in" column names the other documents and chunks."""
    hit = {"document_id": 7, "filename": "minutes.docx", "chunk_index": 2, "content": "The Tamberlyn depot closes.",
           "page": None, "section": "Depots", "score": 0.5, "sources": {"keyword": 1}, "also_in_total": 53,
           "also_in": [{"document_id": 9, "filename": "copy.txt", "chunk_index": 0, "page": None, "section": None}]}
    asked: list[object] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append((request.url.path, request.content))
        return httpx.Response(200, json={"mode": "hybrid", "results": [hit]})

    real_connect = ApiClient.connect

    def connect(url: str, token: str, timeout_s: float = 120.0) -> ApiClient:
        client = real_connect(url, token, timeout_s)
        client.http = httpx.Client(base_url=url, transport=httpx.MockTransport(handler))
        return client

    monkeypatch.setattr(ApiClient, "connect", staticmethod(connect))
    r = runner.invoke(app, ["search", "1", "Tamberlyn depot", "--token", "t"])
    assert r.exit_code == 0, r.output
    assert "score" in r.output  # a table (its columns wrap at the terminal width)
    assert also_in_text(hit) == "copy.txt #0 (doc 9) and 52 more"  # the column's text (the table may wrap it)
    assert asked and asked[0][0] == "/api/v1/knowledge-bases/1/search"  # type: ignore[index]
    r = runner.invoke(app, ["search", "1", "Tamberlyn depot", "--token", "t", "--json"])
    assert json.loads(r.output[r.output.index("["):])[0]["also_in"][0]["filename"] == "copy.txt"


def test_migrate_refuses_an_edited_migration_with_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.adapters.postgres import migrate

    def edited(target: int | None) -> list[int]:
        raise migrate.MigrationChangedError("applied migration(s) edited since they were applied: 0003_outbox.sql")

    monkeypatch.setattr(migrate, "run", edited)
    r = runner.invoke(app, ["migrate"])
    assert r.exit_code == 1
    assert "0003_outbox.sql" in r.output


def test_migrate_passes_the_target_and_prints_what_it_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.adapters.postgres import migrate

    asked: list[int | None] = []
    monkeypatch.setattr(migrate, "run", lambda target: asked.append(target) or [4, 5])
    r = runner.invoke(app, ["migrate", "--target", "5"])
    assert (r.exit_code, asked) == (0, [5]), r.output
    assert "migrations applied: [4, 5]" in r.output


def test_build_model_hands_its_options_to_the_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.adapters.embedding import onnx_graph

    seen: list[list[str]] = []
    monkeypatch.setattr(onnx_graph, "main", lambda argv: seen.append(argv) or 0)
    assert runner.invoke(app, ["build-model", "--force"]).exit_code == 0
    assert seen == [["--force"]]


@pytest.mark.parametrize("module", ["shared.adapters.postgres.migrate"])
def test_the_python_m_alias_is_the_rag_command(module: str) -> None:
    r = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--target" in r.stdout and "checksums" in r.stdout
