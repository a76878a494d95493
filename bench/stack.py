"""The services under benchmark, isolated: own database, RabbitMQ vhost, bucket and Redis DB.

``Stack`` (an async context manager) creates ``rag_bench_<pid>`` (migrated), the vhost
``rag_bench_<pid>`` (the project's broker user granted, as the tests do), the bucket ``rag-bench-<pid>`` and claims a
free Redis DB; on exit it stops every process it started and drops all of it. ``start_api`` and
``start_worker`` run the real services as processes (``python -m knowledge_service`` /
``python -m task_service``, cwd = repo root) with the stack's environment plus overrides, and
wait until the API answers ``/readyz`` or the worker consumes (``crash_worker`` instead waits
until a worker started with a fault point has exited). Process output goes to
``.data/bench-logs/``. ``fetch``/``fetchval`` run one statement on the stack's database,
``publish`` sends a message body to the index exchange, ``count_objects`` counts the bucket's
objects; ``poll`` awaits a condition.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import asyncpg
import httpx

from tests.support import (
    MGMT,
    MGMT_AUTH,
    Proc,
    amqp_url_for,
    claim_redis_db,
    free_port,
    redis_url_for,
    release_redis_db,
    start,
)

if TYPE_CHECKING:
    from minio import Minio

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
NOVEL = CORPUS / "book-war-and-peace-1225p.txt"
LOGS = ROOT / ".data" / "bench-logs"
ADMIN_DSN = os.environ.get("BENCH_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
T = TypeVar("T")


async def poll(probe: Callable[[], Awaitable[T | None]], limit_s: float, what: str, interval: float = 0.1,
               proc: Proc | None = None) -> T:
    """Await ``probe()`` until it returns something truthy (returned). RuntimeError after
    ``limit_s`` seconds, or as soon as ``proc`` (the process the condition waits on) has exited."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError(f"{proc.name} exited:\n{proc.tail()}")
        got = await probe()
        if got:
            return got
        await asyncio.sleep(interval)
    raise RuntimeError(f"{what}: not after {limit_s:g} s" + (f":\n{proc.tail()}" if proc is not None else ""))


def median_spread(values: Sequence[float], fmt: str = "{:.2f}") -> str:
    """``median (min–max)`` of ``values``."""
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0..1) of ``values``."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (0 if gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from every process's ``stat``: a child started by any thread)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append(int(entry.name))
    return out


class Stack:
    """Isolated resources + the service processes started on them."""

    def __init__(self, tag: str, **env: str) -> None:
        run_id = f"{tag}_{os.getpid()}"
        self.redis_db = claim_redis_db()
        self.db = f"rag_bench_{run_id}"
        self.vhost = f"rag_bench_{run_id}"
        self.bucket = f"rag-bench-{run_id}".replace("_", "-")
        self.dsn = ADMIN_DSN.rsplit("/", 1)[0] + f"/{self.db}"
        self.env: dict[str, str] = {
            "DATABASE_URL": self.dsn,
            "AMQP_URL": amqp_url_for(self.vhost),
            "REDIS_URL": redis_url_for(self.redis_db),
            "S3_BUCKET": self.bucket,
            "LOG_JSON": "true",
            "LOG_LEVEL": "INFO",
            "SCAN_INTERVAL_S": "0",
            "DO_NOT_TRACK": "1",
            **env,
        }
        self.procs: list[Proc] = []
        LOGS.mkdir(parents=True, exist_ok=True)

    # -------------------------------------------------------------- resources

    async def __aenter__(self) -> Stack:
        # SIGTERM (make, CI) unwinds like Ctrl-C, so the processes and resources are cleaned up
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        admin = await asyncpg.connect(ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
            await admin.execute(f'CREATE DATABASE "{self.db}"')
        finally:
            await admin.close()
        from shared.adapters.postgres.migrate import migrate

        await migrate(self.dsn)
        async with httpx.AsyncClient(base_url=MGMT, auth=MGMT_AUTH, timeout=30) as c:
            await c.delete(f"/api/vhosts/{self.vhost}")
            (await c.put(f"/api/vhosts/{self.vhost}", json={})).raise_for_status()
            (await c.put(f"/api/permissions/{self.vhost}/{quote(MGMT_AUTH[0], safe='')}",
                         json={"configure": ".*", "write": ".*", "read": ".*"})).raise_for_status()
        # The Redis DB is claimed as the tests claim theirs, but not flushed: when every DB is
        # claimed it is shared, and a flush would drop another run's document locks
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        for p in self.procs:
            p.stop()
        async with httpx.AsyncClient(base_url=MGMT, auth=MGMT_AUTH, timeout=30) as c:
            await c.delete(f"/api/vhosts/{self.vhost}")
        admin = await asyncpg.connect(ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
        finally:
            await admin.close()
        await asyncio.to_thread(self._remove_bucket)
        release_redis_db(self.redis_db)

    @staticmethod
    def _minio() -> Minio:
        from minio import Minio

        from shared.settings import KnowledgeSettings

        s = KnowledgeSettings()
        return Minio(s.s3_endpoint, access_key=s.s3_access_key.get_secret_value(),
                     secret_key=s.s3_secret_key.get_secret_value(), secure=s.s3_secure)

    def _remove_bucket(self) -> None:
        from minio.deleteobjects import DeleteObject

        client = self._minio()
        if not client.bucket_exists(self.bucket):
            return
        objects = [DeleteObject(o.object_name) for o in client.list_objects(self.bucket, recursive=True)
                   if o.object_name]
        for _ in client.remove_objects(self.bucket, objects):
            pass
        client.remove_bucket(self.bucket)

    def child_env(self, **overrides: str) -> dict[str, str]:
        return {**os.environ, **self.env, **{k.upper(): v for k, v in overrides.items()}}

    # -------------------------------------------------------------- processes

    async def start_api(self, **overrides: str) -> str:
        """Start the API; its base URL once ``/readyz`` answers 200."""
        port = free_port()
        proc = start(f"{self.db}-api", "knowledge_service", self.child_env(ks_port=str(port), **overrides), LOGS)
        self.procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=2) as c:
            async def ready() -> bool:
                try:
                    return (await c.get(f"{url}/readyz")).status_code == 200
                except httpx.HTTPError:
                    return False

            await poll(ready, 300, "API ready", 0.2, proc)
        return url

    async def start_worker(self, wait: bool = True, **overrides: str) -> Proc:
        """Start a worker; returns once it consumes ``rag.index.queue`` (at once if not ``wait``)."""
        name = f"{self.db}-worker-{len(self.procs)}"
        proc = start(name, "task_service", self.child_env(worker_name=name, **overrides), LOGS)
        proc.extra["name"] = name
        self.procs.append(proc)
        if wait:
            await self.wait_consuming(proc)
        return proc

    async def crash_worker(self, fault_points: str, limit_s: float = 900, **overrides: str) -> Proc:
        """Start a worker with ``RAG_FAULT_POINTS=fault_points`` (e.g. ``after_commit=exit``) and
        return once it has exited (the fault was hit)."""
        proc = await self.start_worker(wait=False, rag_fault_points=fault_points, **overrides)

        async def exited() -> bool:
            return not proc.alive()

        await poll(exited, limit_s, f"{proc.name} exited at {fault_points}", 0.2)
        return proc

    async def stop(self, proc: Proc) -> None:
        """Stop one of the stack's processes (off the event loop) and forget it."""
        await asyncio.to_thread(proc.stop)
        self.procs.remove(proc)

    async def wait_consuming(self, proc: Proc, limit_s: float = 300) -> None:
        name = proc.extra["name"]
        async with httpx.AsyncClient(base_url=MGMT, auth=MGMT_AUTH, timeout=10) as c:
            async def consuming() -> bool:
                conns = (await c.get(f"/api/vhosts/{self.vhost}/connections")).json()
                listed = (await c.get(f"/api/consumers/{self.vhost}")).json()
                names = {x["name"]: str(x.get("user_provided_name") or "") for x in conns}
                for x in listed:
                    d = x.get("channel_details") or {}  # briefly [] while a channel opens
                    if isinstance(d, dict) and names.get(str(d.get("connection_name"))) == name:
                        return True
                return False

            await poll(consuming, limit_s, f"{proc.name} consuming", 0.2, proc)

    async def queue_depth(self, queue: str = "rag.index.queue") -> int:
        """Ready + unacked messages (the management API's counters lag a few seconds)."""
        async with httpx.AsyncClient(base_url=MGMT, auth=MGMT_AUTH, timeout=10) as c:
            r = await c.get(f"/api/queues/{self.vhost}/{queue}")
            return int(r.json().get("messages", 0)) if r.status_code == 200 else 0

    async def publish(self, body: bytes, name: str = "bench-publish") -> None:
        """One confirmed publish of ``body`` to the index exchange, on a connection called ``name``."""
        from shared.adapters.rabbitmq import Publisher, connect

        conn = await connect(self.env["AMQP_URL"], name=name, heartbeat_s=30, robust=False)
        try:
            await (await Publisher.open(conn, 10)).publish(body)
        finally:
            await conn.close()

    # -------------------------------------------------------------- data

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        """The rows of one statement, on a connection of its own to the stack's database."""
        conn = await asyncpg.connect(self.dsn)
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    async def fetchval(self, query: str, *args: Any) -> Any:
        """The first column of the first row of one statement (None if no row)."""
        rows = await self.fetch(query, *args)
        return rows[0][0] if rows else None

    async def count_objects(self, prefix: str = "") -> int:
        """Objects in the stack's bucket under ``prefix``."""
        def count() -> int:
            return sum(1 for _ in self._minio().list_objects(self.bucket, prefix=prefix, recursive=True))

        return await asyncio.to_thread(count)

    async def create_user(self, name: str = "bench") -> tuple[int, str]:
        """(user id, bearer token), written straight to the database as the CLI does."""
        from knowledge_service.deps import token_digest
        from shared.adapters.postgres.repo import users as users_repo

        conn = await asyncpg.connect(self.dsn)
        try:
            token = "rag_" + secrets.token_urlsafe(32)
            user_id = await users_repo.create_user(conn, f"{name}-{secrets.token_hex(4)}")
            await users_repo.create_token(conn, user_id, token_digest(token))
            return user_id, token
        finally:
            await conn.close()

    async def create_kb(self, http: httpx.AsyncClient, name: str) -> int:
        r = await http.post("/api/v1/knowledge-bases", json={"name": name})
        r.raise_for_status()
        return int(r.json()["kb_id"])

    async def wait_indexed(self, document_ids: Sequence[int], limit_s: float = 3600) -> dict[str, int]:
        """Until every document is INDEXED or FAILED; counts by status."""
        conn = await asyncpg.connect(self.dsn)
        try:
            deadline = time.monotonic() + limit_s
            while True:
                rows = await conn.fetch("SELECT status, count(*) AS n FROM document_info WHERE id = ANY($1::bigint[])"
                                        " GROUP BY status", list(document_ids))
                by = {r["status"]: int(r["n"]) for r in rows}
                if by.get("INDEXED", 0) + by.get("FAILED", 0) == len(document_ids):
                    return by
                if time.monotonic() > deadline:
                    raise RuntimeError(f"documents not indexed after {limit_s} s: {by}")
                await asyncio.sleep(0.1)
        finally:
            await conn.close()


async def upload_all(http: httpx.AsyncClient, kb_id: int, files: Sequence[tuple[str, bytes]]) -> list[int]:
    """Upload ``(name, bytes)`` files one after the other; their document ids (202 expected)."""
    ids = []
    for name, data in files:
        r = await http.post(f"/api/v1/knowledge-bases/{kb_id}/documents", files={"file": (name, data)},
                            params={"allow_duplicate": "true"})
        if r.status_code != 202:
            raise RuntimeError(f"upload of {name} answered {r.status_code}: {r.text[:300]}")
        ids.append(int(r.json()["document_id"]))
    return ids


async def indexing_span(dsn: str, document_ids: Sequence[int]) -> tuple[float, int]:
    """(seconds from the first claim to the last SUCCESS, chunks indexed) of these documents."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT extract(epoch FROM max(t.end_time) - min(t.start_time)) AS span,"
            " (SELECT coalesce(sum(chunk_count), 0) FROM document_info WHERE id = ANY($1::bigint[])) AS chunks"
            " FROM index_task t WHERE t.document_id = ANY($1::bigint[]) AND t.status = 'SUCCESS'",
            list(document_ids))
        return float(row["span"]), int(row["chunks"])
    finally:
        await conn.close()


#: Worker settings for the indexing benches: no embedding cache (every chunk reaches the model,
#: whatever earlier runs embedded; ignored where the cache does not exist), no scanner.
NO_CACHE = {"embedding_cache_max_rows": "0"}


class RssSampler:
    """Samples the resident set of a process and all its descendants (the worker and its sandbox
    child) every ``period_s`` seconds in a thread (~5 ms per sample); ``peak_kib`` is the largest sum seen."""

    def __init__(self, pid: int, period_s: float = 0.05) -> None:
        import threading

        self.pid, self.period_s = pid, period_s
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def total_kib(self) -> int:
        todo, total = [self.pid], 0
        while todo:
            p = todo.pop()
            total += rss_kib(p)
            todo.extend(children(p))
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, self.total_kib())
            self._stop.wait(self.period_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
