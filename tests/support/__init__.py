"""Test support shared by the test tiers and `bench/`: isolated resources, processes, polling
(this module), generated inputs (`bigtext`, `pdfgen`). `bench/` imports from `tests` only this
package and the fidelity corpora (`tests.fidelity`); neither imports the test tiers or `bench`
(`tests/unit/test_bench_imports.py`)."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import httpx

ROOT = Path(__file__).resolve().parents[2]


def _shared_dir() -> Path:
    """The team's material: ``../shared`` beside the checkout (``/work/main``); from a worktree
    (``/work/wt/<name>``), where that is missing, ``/work/shared``."""
    beside = ROOT.parent / "shared"
    return beside if beside.is_dir() else Path("/work/shared")


#: ``/work/shared`` (corpus/, cases/, seeds/): see :func:`_shared_dir`.
SHARED = _shared_dir()
CORPUS = SHARED / "corpus"
CASES = SHARED / "cases"
# One set of resources per pytest session (several sessions may run at once); processes started
# by the session inherit RAG_TEST_ID and so use the same ones.
# Under pytest-xdist every worker inherits the controller's RAG_TEST_ID: the worker id is
# appended, so each worker has its own database, vhost, bucket and Redis DB too.
TEST_ID = os.environ.setdefault("RAG_TEST_ID", str(os.getpid()))
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _XDIST_WORKER and not TEST_ID.endswith(_XDIST_WORKER):
    TEST_ID = os.environ["RAG_TEST_ID"] = f"{TEST_ID}{_XDIST_WORKER}"


def _base_settings() -> Any:
    """The developer's connections (environment, then .env), read before the session's overrides."""
    from shared.settings import CommonSettings

    return CommonSettings()


_BASE = _base_settings()
_AMQP = urlsplit(_BASE.amqp_url.get_secret_value())
_REDIS = urlsplit(_BASE.redis_url.get_secret_value())


def amqp_url_for(vhost: str) -> str:
    """AMQP_URL of the project's own broker user (never guest) on ``vhost``."""
    return urlunsplit(_AMQP._replace(path=f"/{quote(vhost, safe='')}"))


def redis_url_for(db: int) -> str:
    """REDIS_URL (with its password, if any) on database ``db``."""
    return urlunsplit(_REDIS._replace(path=f"/{db}"))
TEST_DB = f"rag_test_{TEST_ID}"
VHOST = f"rag_test_{TEST_ID}"


def claim_redis_db() -> int:
    """A Redis DB (1-15) no other live pytest session holds, and none holding keys no session
    claimed (a developer's instance; the session flushes its DB): lock keys are per document id, and
    ids restart at 1 in every session's database. Claimed in DB 0 for 3 h, inherited by children.
    Called by the ``services_env`` fixture, never at import: the unit tier stays offline."""
    if "RAG_TEST_REDIS_DB" in os.environ:
        return int(os.environ["RAG_TEST_REDIS_DB"])
    import redis

    r = redis.Redis.from_url(redis_url_for(0))
    start = int(hashlib.sha256(TEST_ID.encode()).hexdigest(), 16) % 15
    for i in range(15):
        db = 1 + (start + i) % 15
        if r.get(f"rag-test:redis-db:{db}") is None and redis.Redis.from_url(redis_url_for(db)).dbsize():
            continue  # keys no test session claimed: a developer's instance (README: a second checkout)
        if r.set(f"rag-test:redis-db:{db}", TEST_ID, nx=True, ex=3 * 3600) or \
                r.get(f"rag-test:redis-db:{db}") == TEST_ID.encode():
            os.environ["RAG_TEST_REDIS_DB"] = str(db)
            return db
    return 1 + start  # all claimed: share one (locks only delay each other)


def release_redis_db(db: int) -> None:
    import redis

    r = redis.Redis.from_url(redis_url_for(0))
    if r.get(f"rag-test:redis-db:{db}") == TEST_ID.encode():
        r.delete(f"rag-test:redis-db:{db}")


MGMT = os.environ.get("RABBITMQ_MANAGEMENT_URL", "http://127.0.0.1:15672").rstrip("/")
# the project's own broker user from AMQP_URL (`make env`; services.sh makes it the local operator)
MGMT_AUTH = (unquote(_AMQP.username or ""), unquote(_AMQP.password or ""))
T = TypeVar("T")


def poll(fn: Callable[[], T | None], *, timeout: float, interval: float = 0.2, what: str = "condition") -> T:
    """Call ``fn`` until it returns something truthy; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mgmt_queue(name: str) -> dict[str, Any]:
    r = httpx.get(f"{MGMT}/api/queues/{VHOST}/{name}", auth=MGMT_AUTH, timeout=10)
    r.raise_for_status()
    return dict(r.json())


def queue_depth(name: str) -> int:
    """Ready + unacked messages, straight from the broker (the management API's counters lag ~5 s,
    so callers poll)."""
    q = mgmt_queue(name)
    return int(q.get("messages", 0))


def consumers(queue: str = "rag.index.queue") -> set[tuple[str, str]]:
    """``(client-provided name, broker connection name)`` of every consumer of ``queue``."""
    with httpx.Client(base_url=MGMT, auth=MGMT_AUTH, timeout=10) as c:
        conns = c.get(f"/api/vhosts/{VHOST}/connections").raise_for_status().json()
        listed = c.get(f"/api/consumers/{VHOST}").raise_for_status().json()
    provided = {x["name"]: str(x.get("user_provided_name") or "") for x in conns}
    out = set()
    for x in listed:
        details = x.get("channel_details") or {}  # briefly [] while a channel opens
        if isinstance(details, dict) and x.get("queue", {}).get("name") == queue:
            conn_name = str(details.get("connection_name"))
            out.add((provided.get(conn_name, ""), conn_name))
    return out


def consumer_names(queue: str = "rag.index.queue") -> set[str]:
    """Client-provided connection names (``connection_name`` property) consuming ``queue``."""
    return {name for name, _ in consumers(queue)}


def _declare_ok(name: str) -> tuple[int, int]:
    """(ready messages, consumers) of queue ``name`` now, from a passive ``queue.declare``: its
    declare-ok counts them live, where the management API's figures lag up to its 5 s statistics
    interval (a count read there just after a purge can still show the purged messages)."""
    import asyncio

    import aio_pika

    async def declare() -> tuple[int, int]:
        conn = await aio_pika.connect(amqp_url_for(VHOST), client_properties={"connection_name": "tests-probe"})
        try:
            result = (await (await conn.channel()).declare_queue(name, passive=True)).declaration_result
            return int(result.message_count or 0), int(result.consumer_count or 0)
        finally:
            await conn.close()

    return asyncio.run(declare())


def consumer_count(name: str = "rag.index.queue") -> int:
    """Consumers of queue ``name`` now (live, :func:`_declare_ok`)."""
    return _declare_ok(name)[1]


def ready_count(name: str) -> int:
    """Messages ready in queue ``name`` now, unacked ones not counted (live, :func:`_declare_ok`)."""
    return _declare_ok(name)[0]


def logged(proc: Proc, event: str) -> bool:
    """Whether ``proc`` logged ``event`` (a JSON ``"event"`` value) since it started; AssertionError
    if it exited."""
    assert proc.alive(), f"{proc.name} exited:\n{proc.tail()}"
    with open(proc.log, "rb") as f:
        f.seek(proc.log_start)
        return f'"event": "{event}"'.encode() in f.read()


def log_size(path: Path) -> int:
    """Bytes in ``path`` now (0 if it does not exist yet): where a new process's lines will start."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def wait_consuming(proc: Proc, timeout: float = 120) -> None:
    """Poll until worker ``proc`` logged "consuming" since it started: it logs that once its
    ``basic.consume`` is confirmed, so the broker delivers to it from then on (the management API
    would show the consumer only at its next statistics interval, up to 5 s later)."""
    poll(lambda: logged(proc, "consuming"), timeout=timeout, interval=0.1,
         what=f"{proc.name} consuming")


def child_env(base: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(base)
    return env


@dataclass
class Proc:
    """A service process started by a test; stdout+stderr go to ``log``."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    extra: dict[str, Any] = field(default_factory=dict)
    log_start: int = 0  # the byte of ``log`` where this process's lines begin

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def stop(self, timeout: float = 30) -> None:
        if not self.alive():
            return
        self.kill(signal.SIGCONT)
        self.popen.terminate()
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(10)

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def start(name: str, module: str, env: dict[str, str], log_dir: Path) -> Proc:
    log = log_dir / f"{name}.log"
    offset = log_size(log)  # a test's processes may share a log name with an earlier one (parametrized tests)
    fh = open(log, "ab")
    popen = subprocess.Popen([sys.executable, "-m", module], cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    return Proc(name, popen, log, log_start=offset)


class Api:
    """A thin HTTP client for the API under test, as one user."""

    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def create_kb(self, name: str = "kb") -> int:
        r = self.http.post("/api/v1/knowledge-bases", json={"name": name})
        assert r.status_code == 201, r.text
        return int(r.json()["kb_id"])

    def upload(self, kb_id: int, path: Path | None = None, *, name: str | None = None, data: bytes | None = None,
               expect: int = 202) -> dict[str, Any]:
        content = data if data is not None else path.read_bytes()  # type: ignore[union-attr]
        r = self.http.post(
            f"/api/v1/knowledge-bases/{kb_id}/documents",
            files={"file": (name or path.name, content, "application/octet-stream")},  # type: ignore[union-attr]
        )
        assert r.status_code == expect, r.text
        return dict(r.json())

    def document(self, document_id: int) -> dict[str, Any]:
        r = self.http.get(f"/api/v1/documents/{document_id}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    def wait_terminal(self, document_id: int, timeout: float = 240) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            d = self.document(document_id)
            return d if d["status"] in ("INDEXED", "FAILED") else None

        return poll(done, timeout=timeout, interval=0.5, what=f"document {document_id} terminal")

    def search(self, kb_id: int, query: str, top_k: int = 5) -> list[dict[str, Any]]:
        r = self.http.post(f"/api/v1/knowledge-bases/{kb_id}/search", json={"query": query, "top_k": top_k})
        assert r.status_code == 200, r.text
        return list(r.json()["results"])

    def chunks(self, document_id: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            r = self.http.get(f"/api/v1/documents/{document_id}/chunks", params={"offset": len(out), "limit": 500})
            assert r.status_code == 200, r.text
            page = r.json()
            out.extend(page["items"])
            if len(out) >= page["total"] or not page["items"]:
                return out


def sql(dsn: str, query: str, *args: Any) -> list[dict[str, Any]]:
    """Run one query on a fresh connection (sync tests); rows as dicts."""
    import asyncio

    import asyncpg

    async def go() -> list[dict[str, Any]]:
        conn = await asyncpg.connect(dsn)
        try:
            return [dict(r.items()) for r in await conn.fetch(query, *args)]
        finally:
            await conn.close()

    return asyncio.run(go())


def sql_value(dsn: str, query: str, *args: Any) -> Any:
    rows = sql(dsn, query, *args)
    return next(iter(rows[0].values())) if rows else None


def process_state(pid: int) -> str:
    """The kernel's one-letter state of ``pid`` (``T`` = stopped), ``X`` if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


#: Worker settings for fault tests: takeovers in seconds, not minutes.
FAST = {"lock_ttl_s": "4", "lock_renew_s": "1", "heartbeat_s": "1", "lock_retry_delay_s": "1",
        "amqp_heartbeat_s": "2"}


def wait_stopped(p: Proc) -> None:
    """Until ``p`` has SIGSTOPped itself at its fault point."""
    poll(lambda: process_state(p.pid) == "T", timeout=120, what=f"{p.name} stopped at its fault point")


def embedding_runs(dsn: str, document_id: int) -> int:
    return int(sql_value(dsn, "SELECT count(*) FROM embedding_run WHERE document_id = $1", document_id))


def model_calls(dsn: str, document_id: int) -> tuple[int, int, int]:
    """``(model calls, chunks embedded by the model, chunks served by the embedding cache)`` of a
    document, from ``embedding_run`` (a step with no cache miss made no model call)."""
    r = sql(dsn, "SELECT count(*) FILTER (WHERE cache_misses > 0) AS calls, coalesce(sum(cache_misses), 0) AS misses,"
                 " coalesce(sum(cache_hits), 0) AS hits FROM embedding_run WHERE document_id = $1", document_id)[0]
    return int(r["calls"]), int(r["misses"]), int(r["hits"])


def skips(dsn: str, document_id: int) -> list[str]:
    return [r["reason"] for r in sql(dsn, "SELECT reason FROM delivery_skip WHERE document_id = $1 ORDER BY id",
                                     document_id)]


def chunk_ids(dsn: str, document_id: int) -> list[int]:
    return [r["id"] for r in sql(dsn, "SELECT id FROM document_chunk WHERE document_id = $1 ORDER BY chunk_index",
                                 document_id)]


def assert_one_chunk_set(api: Api, dsn: str, document_id: int) -> list[int]:
    """Assert the document is INDEXED with exactly one chunk set (indexes 0..n-1, one vector each); its chunk ids."""
    doc = api.document(document_id)
    assert (doc["status"], doc["task"]["status"]) == ("INDEXED", "SUCCESS"), (doc["error_message"], doc["task"])
    idx = [r["chunk_index"] for r in sql(dsn, "SELECT chunk_index FROM document_chunk WHERE document_id = $1"
                                              " ORDER BY chunk_index", document_id)]
    assert idx == list(range(doc["chunk_count"])) and idx
    assert sql_value(dsn, "SELECT count(*) FROM document_vector WHERE document_id = $1", document_id) == len(idx)
    return chunk_ids(dsn, document_id)
