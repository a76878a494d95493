"""Issue 5: real infrastructure faults end in a defined state, nothing stuck RUNNING or lost.

Each test prints the time from the fault to the task's terminal state (for the closing note).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis

from shared.adapters.redis_lock import document_lock_key
from tests.e2e.conftest import WorkerFactory
from tests.support import (
    FAST,
    ROOT,
    Api,
    child_env,
    chunk_ids,
    embedding_runs,
    free_port,
    poll,
    sql,
    sql_value,
    start,
    wait_stopped,
)

pytestmark = pytest.mark.e2e

TEXT = ("Infrastructure faults must end in a defined state and lose nothing. " * 30 + "\n\n") * 4



def _report(what: str, seconds: float) -> None:
    print(f"\n[fault timing] {what}: {seconds:.1f} s to terminal state")


def _doc_rows(dsn: str, document_id: int) -> dict[str, object]:
    return sql(dsn, "SELECT d.status, d.chunk_count, t.status AS task_status, t.error_code, t.error_message"
                    " FROM document_info d JOIN index_task t ON t.document_id = d.id WHERE d.id = $1",
               document_id)[0]


def test_api_crash_between_commit_and_publish_loses_nothing(
    api: Api, workers: WorkerFactory, services_env: dict[str, str], log_dir: Path
) -> None:
    dsn = services_env["DATABASE_URL"]
    port = free_port()
    crashing = start("api-crashing", "knowledge_service",
                     child_env({**services_env, "KS_PORT": str(port),
                               "RAG_FAULT_POINTS": "after_commit_before_publish=exit"}), log_dir)
    try:
        poll(lambda: _ready(f"http://127.0.0.1:{port}"), timeout=120, interval=0.5, what="crashing API ready")
        kb = api.create_kb()
        token = api.http.headers["Authorization"]
        t0 = time.monotonic()
        with pytest.raises(httpx.HTTPError):  # the process dies before it answers
            httpx.post(f"http://127.0.0.1:{port}/api/v1/knowledge-bases/{kb}/documents",
                       headers={"Authorization": token}, files={"file": ("outbox.txt", TEXT.encode())}, timeout=60)
        poll(lambda: not crashing.alive(), timeout=30, what="API exited at the fault point")
    finally:
        crashing.stop()
    doc_id = sql_value(dsn, "SELECT id FROM document_info WHERE kb_id = $1", kb)
    assert doc_id is not None, "the commit happened before the crash"
    assert sql_value(dsn, "SELECT count(*) FROM outbox WHERE task_id = (SELECT id FROM index_task"
                          " WHERE document_id = $1) AND published_at IS NULL", doc_id) == 1
    workers(relay_grace_s="1", relay_interval_s="1")
    doc = api.wait_terminal(doc_id, timeout=120)
    _report("API crash between commit and publish (outbox relay)", time.monotonic() - t0)
    assert doc["status"] == "INDEXED"
    assert embedding_runs(dsn, doc_id) == 1
    assert sql_value(dsn, "SELECT count(*) FROM outbox o JOIN index_task t ON t.id = o.task_id"
                          " WHERE t.document_id = $1 AND o.published_at IS NULL", doc_id) == 0


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_db_connection_terminated_during_final_transaction(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    a = workers(rag_fault_points="in_commit=stop", **FAST)
    kb = api.create_kb()
    doc = api.upload(kb, name="terminated.txt", data=TEXT.encode())
    wait_stopped(a)  # inside the final transaction: chunks written, not committed
    killed = sql_value(dsn, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                            " WHERE application_name = $1) t", a.name)
    assert killed >= 1
    t0 = time.monotonic()
    a.kill(signal.SIGCONT)
    d = api.wait_terminal(doc["document_id"], timeout=120)
    _report("pg_terminate_backend during the final transaction", time.monotonic() - t0)
    assert d["status"] == "INDEXED" and d["task"]["status"] == "SUCCESS"
    ids = chunk_ids(dsn, doc["document_id"])
    assert len(ids) == d["chunk_count"] > 0
    idx = [r["chunk_index"] for r in sql(dsn, "SELECT chunk_index FROM document_chunk WHERE document_id = $1"
                                              " ORDER BY 1", doc["document_id"])]
    assert idx == list(range(len(ids)))
    assert embedding_runs(dsn, doc["document_id"]) == 1  # only the commit was retried


class _HangingServer:
    """Accepts HTTP connections and never answers (an embedding endpoint that hangs)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self._conns.append(conn)  # keep it open, never reply

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for c in self._conns:
            c.close()
        self.sock.close()


@pytest.fixture
def hanging_endpoint() -> Iterator[_HangingServer]:
    server = _HangingServer()
    yield server
    server.close()


def test_hanging_embedding_endpoint_fails_with_embedding_timeout(
    api: Api, workers: WorkerFactory, services_env: dict[str, str], hanging_endpoint: _HangingServer
) -> None:
    dsn = services_env["DATABASE_URL"]
    workers(embedding_provider="openai", embedding_base_url=f"http://127.0.0.1:{hanging_endpoint.port}",
            embedding_timeout_s="1", transient_retry_attempts="3", transient_retry_initial_s="0.2",
            transient_retry_max_s="0.5", embedding_cache_max_rows="0", **FAST)  # the model must be asked
    kb = api.create_kb()
    t0 = time.monotonic()
    doc = api.upload(kb, name="hang.txt", data=TEXT.encode())
    d = api.wait_terminal(doc["document_id"], timeout=60)
    _report("hanging embedding endpoint", time.monotonic() - t0)
    assert d["status"] == "FAILED"
    assert d["task"]["status"] == "FAILED" and d["task"]["error_code"] == "embedding_timeout"
    assert hanging_endpoint.accepted == 3  # bounded retries, one request each
    r = redis.Redis.from_url(services_env["REDIS_URL"])
    assert not r.exists(document_lock_key(doc["document_id"])), "lock released"
    assert sql_value(dsn, "SELECT count(*) FROM index_task WHERE status = 'RUNNING' AND document_id = $1",
                     doc["document_id"]) == 0


def _services(cmd: str, env: dict[str, str]) -> None:
    subprocess.run(["bash", "scripts/services.sh", cmd], cwd=ROOT, env=env, check=True, capture_output=True,
                   timeout=180)


@pytest.fixture
def private_s3(services_env: dict[str, str]) -> Iterator[dict[str, str]]:
    """A SeaweedFS S3 server of this test's own (started by scripts/services.sh with its own data
    dir and port), so stopping it disturbs no other test, demo or checkout. The data dir is not
    under /tmp (services.sh gives weed a private /tmp in its own namespace), wherever the
    checkout is."""
    data = Path("/var/tmp") / f"rag-test-s3-{os.getpid()}"
    env = child_env({**services_env, "RAG_DATA_DIR": str(data), "S3_ENDPOINT": f"127.0.0.1:{free_port()}"})
    _services("up", env)
    try:
        yield env
    finally:
        _services("down", env)
        shutil.rmtree(data, ignore_errors=True)


def test_object_store_down_during_download_then_manual_retry(
    make_user: Callable[[str], Api], workers: WorkerFactory, private_s3: dict[str, str], log_dir: Path
) -> None:
    port = free_port()
    api_proc = start("api-private-s3", "knowledge_service", {**private_s3, "KS_PORT": str(port)}, log_dir)
    try:
        poll(lambda: _ready(f"http://127.0.0.1:{port}"), timeout=120, interval=0.5, what="API on private S3 ready")
        api = Api(f"http://127.0.0.1:{port}", make_user("s3").http.headers["Authorization"].split()[1])
        a = workers(rag_fault_points="before_download=stop", transient_retry_attempts="3",
                    transient_retry_initial_s="0.2", transient_retry_max_s="1", s3_timeout_s="2",
                    s3_endpoint=private_s3["S3_ENDPOINT"], **FAST)
        kb = api.create_kb()
        doc = api.upload(kb, name="storage.txt", data=TEXT.encode())
        wait_stopped(a)
        _services("down", private_s3)
        t0 = time.monotonic()
        a.kill(signal.SIGCONT)
        d = api.wait_terminal(doc["document_id"], timeout=120)
        _report("object store down during download", time.monotonic() - t0)
        assert d["status"] == "FAILED"
        assert d["task"]["status"] == "FAILED" and d["task"]["error_code"] == "storage_unavailable", d["task"]
        assert "storage unavailable" in d["error_message"]
        _services("up", private_s3)
        r = api.http.post(f"/api/v1/tasks/{doc['task_id']}/retry")
        assert r.status_code == 202, r.text
        # The task as read after the publish: an idle worker may already have claimed it.
        assert r.json()["status"] in ("RETRYING", "RUNNING", "SUCCESS") and r.json()["generation"] == 2
        d = api.wait_terminal(doc["document_id"], timeout=120)
        assert d["status"] == "INDEXED" and d["task"]["retry_count"] == 1
    finally:
        api_proc.stop()
