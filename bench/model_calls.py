"""P3 (issue 13): model calls for work that was already done, read from ``embedding_run``.

``python -m bench.model_calls [--smoke]`` starts the real API and workers on isolated resources
(database ``rag_bench_calls_<pid>``, its own RabbitMQ vhost, bucket and Redis DB, all dropped at
the end), indexes one document of 200 one-chunk paragraphs, then measures, each at least 5 times:

* a duplicate message (the finished generation's message published again);
* a redelivery (the worker crashes right after its commit, before the ack: ``RAG_FAULT_POINTS=
  after_commit=exit``; the broker redelivers to the next worker);
* an identical re-upload (same bytes, same KB), and the same with ``?allow_duplicate=true``;
* a forced reindex of unchanged content, and a reindex after editing 1 chunk of 200 (new content).

A model call is an ``embedding_run`` row with ``cache_misses > 0``; "chunks embedded" sums
``cache_misses``. Goals: 0, 0, 0 calls and ≤ 2 chunks. ``--smoke`` (CI: the harness keeps
working) uses 20 paragraphs, one repetition each, and prints without writing bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import asyncpg
import httpx

from bench.report import write_section
from tests.bigtext import paragraphs
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

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / ".data" / "bench-logs"
ADMIN_DSN = os.environ.get("BENCH_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
T = TypeVar("T")
# A crashed worker's document lock expires after LOCK_TTL_S (120 s by default): the redelivery
# waits in the delay queue until then. Short locks keep the redelivery runs short.
SHORT_LOCK = {"lock_ttl_s": "4", "lock_renew_s": "1", "lock_retry_delay_s": "1"}


def _poll(fn: Callable[[], T | None], limit_s: float, what: str, interval: float = 0.1) -> T:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(interval)
    raise RuntimeError(f"{what}: not after {limit_s:g} s")


def _sql(dsn: str, query: str, *args: Any) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        conn = await asyncpg.connect(dsn)
        try:
            return [dict(r.items()) for r in await conn.fetch(query, *args)]
        finally:
            await conn.close()

    return asyncio.run(go())


class Stack:
    """Isolated database / vhost / bucket / Redis DB and the service processes started on them."""

    def __init__(self) -> None:
        run = f"calls_{os.getpid()}"
        self.db, self.vhost, self.bucket = f"rag_bench_{run}", f"rag_bench_{run}", f"rag-bench-calls-{os.getpid()}"
        self.dsn = ADMIN_DSN.rsplit("/", 1)[0] + f"/{self.db}"
        self.redis_db = claim_redis_db()
        self.env = {"DATABASE_URL": self.dsn, "AMQP_URL": amqp_url_for(self.vhost),
                    "REDIS_URL": redis_url_for(self.redis_db), "S3_BUCKET": self.bucket,
                    "LOG_JSON": "true", "SCAN_INTERVAL_S": "0", "DO_NOT_TRACK": "1"}
        self.procs: list[Proc] = []
        self.mgmt = httpx.Client(base_url=MGMT, auth=MGMT_AUTH, timeout=30)
        LOGS.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> Stack:
        from shared.migrate import migrate

        self._admin(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)', f'CREATE DATABASE "{self.db}"')
        asyncio.run(migrate(self.dsn))
        self.mgmt.delete(f"/api/vhosts/{self.vhost}")
        self.mgmt.put(f"/api/vhosts/{self.vhost}", json={}).raise_for_status()
        self.mgmt.put(f"/api/permissions/{self.vhost}/{quote(MGMT_AUTH[0], safe='')}",
                      json={"configure": ".*", "write": ".*", "read": ".*"}).raise_for_status()
        # the claimed Redis DB is not flushed: when every DB is claimed it is shared
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.stop()
        self.mgmt.delete(f"/api/vhosts/{self.vhost}")
        self._admin(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
        self._remove_bucket()
        release_redis_db(self.redis_db)

    def _admin(self, *statements: str) -> None:
        async def go() -> None:
            admin = await asyncpg.connect(ADMIN_DSN)
            try:
                for s in statements:
                    await admin.execute(s)
            finally:
                await admin.close()

        asyncio.run(go())

    def _remove_bucket(self) -> None:
        from minio import Minio
        from minio.deleteobjects import DeleteObject

        from shared.settings import KnowledgeSettings

        s = KnowledgeSettings()
        client = Minio(s.s3_endpoint, access_key=s.s3_access_key.get_secret_value(),
                       secret_key=s.s3_secret_key.get_secret_value(), secure=s.s3_secure)
        if client.bucket_exists(self.bucket):
            objects = [DeleteObject(o.object_name) for o in client.list_objects(self.bucket, recursive=True)
                       if o.object_name]
            for _ in client.remove_objects(self.bucket, objects):
                pass
            client.remove_bucket(self.bucket)

    def objects(self, prefix: str) -> int:
        from minio import Minio

        from shared.settings import KnowledgeSettings

        s = KnowledgeSettings()
        client = Minio(s.s3_endpoint, access_key=s.s3_access_key.get_secret_value(),
                       secret_key=s.s3_secret_key.get_secret_value(), secure=s.s3_secure)
        return sum(1 for _ in client.list_objects(self.bucket, prefix=prefix, recursive=True))

    def _env(self, **overrides: str) -> dict[str, str]:
        return {**os.environ, **self.env, **{k.upper(): v for k, v in overrides.items()}}

    def start_api(self) -> str:
        port = free_port()
        proc = start(f"{self.db}-api", "knowledge_service", self._env(ks_port=str(port)), LOGS)
        self.procs.append(proc)
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            if not proc.alive():
                raise RuntimeError(f"API exited:\n{proc.tail()}")
            try:
                return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        _poll(ready, 300, "API ready", 0.3)
        return url

    def start_worker(self, wait: bool = True, **overrides: str) -> Proc:
        name = f"{self.db}-worker-{len(self.procs)}"
        proc = start(name, "task_service", self._env(worker_name=name, **overrides), LOGS)
        self.procs.append(proc)
        if wait:
            _poll(lambda: self._consuming(proc, name), 300, f"{name} consuming", 0.3)
        return proc

    def _consuming(self, proc: Proc, name: str) -> bool:
        if not proc.alive():
            raise RuntimeError(f"{name} exited:\n{proc.tail()}")
        listed = self.mgmt.get(f"/api/vhosts/{self.vhost}/connections").json()
        conns = {c["name"]: c.get("user_provided_name") for c in listed}
        for c in self.mgmt.get(f"/api/consumers/{self.vhost}").json():
            if conns.get((c.get("channel_details") or {}).get("connection_name")) == name:
                return True
        return False

    def publish(self, body: bytes) -> None:
        from shared.amqp import Publisher, connect

        async def go() -> None:
            conn = await connect(self.env["AMQP_URL"], name="bench-duplicate", heartbeat_s=30, robust=False)
            try:
                await (await Publisher.open(conn, 10)).publish(body)
            finally:
                await conn.close()

        asyncio.run(go())


@dataclass
class Cost:
    """Model work of one measured action: calls (runs with misses), chunks embedded, cache hits."""

    calls: list[int] = field(default_factory=list)
    chunks: list[int] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


class Bench:
    def __init__(self, stack: Stack, url: str, n: int) -> None:
        from knowledge_service.deps import token_digest
        from shared.repo import users as users_repo

        self.stack, self.dsn, self.n = stack, stack.dsn, n
        token = f"rag_bench_{uuid.uuid4().hex}"

        async def user() -> None:
            conn = await asyncpg.connect(self.dsn)
            try:
                uid = await users_repo.create_user(conn, f"bench-{uuid.uuid4().hex[:8]}")
                await users_repo.create_token(conn, uid, token_digest(token))
            finally:
                await conn.close()

        asyncio.run(user())
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
        r = self.http.post("/api/v1/knowledge-bases", json={"name": "p3"})
        r.raise_for_status()
        self.kb = int(r.json()["kb_id"])

    def totals(self) -> tuple[int, int, int]:
        """(model calls, chunks embedded, cache hits) over the KB's documents so far."""
        r = _sql(self.dsn, "SELECT count(*) FILTER (WHERE r.cache_misses > 0) AS calls,"
                           " coalesce(sum(r.cache_misses), 0) AS misses, coalesce(sum(r.cache_hits), 0) AS hits"
                           " FROM embedding_run r JOIN document_info d ON d.id = r.document_id WHERE d.kb_id = $1",
                 self.kb)[0]
        return int(r["calls"]), int(r["misses"]), int(r["hits"])

    def measure(self, cost: Cost, action: Callable[[], None]) -> None:
        before = self.totals()
        t0 = time.perf_counter()
        action()
        cost.seconds.append(time.perf_counter() - t0)
        after = self.totals()
        cost.calls.append(after[0] - before[0])
        cost.chunks.append(after[1] - before[1])
        cost.hits.append(after[2] - before[2])

    def upload(self, data: bytes, name: str, allow_duplicate: bool = False) -> dict[str, Any]:
        q = "?allow_duplicate=true" if allow_duplicate else ""
        r = self.http.post(f"/api/v1/knowledge-bases/{self.kb}/documents{q}", files={"file": (name, data)})
        if r.status_code not in (200, 202):
            raise RuntimeError(f"upload: {r.status_code} {r.text}")
        return dict(r.json())

    def wait_generation(self, doc_id: int, generation: int, limit_s: float = 1800) -> None:
        def done() -> bool:  # the generation's task has ended (a served document stays INDEXED meanwhile)
            t = self.http.get(f"/api/v1/documents/{doc_id}").json()["task"]
            if t["generation"] == generation and t["status"] in ("FAILED", "TIMEOUT"):
                raise RuntimeError(f"document {doc_id} {t['status']}: {t['error_message']}")
            return bool(t["generation"] == generation and t["status"] == "SUCCESS")

        _poll(done, limit_s, f"document {doc_id} generation {generation} indexed", 0.1)

    def skips(self, doc_id: int) -> int:
        return int(_sql(self.dsn, "SELECT count(*) AS n FROM delivery_skip WHERE document_id = $1", doc_id)[0]["n"])

    def documents(self) -> int:
        return int(_sql(self.dsn, "SELECT count(*) AS n FROM document_info WHERE kb_id = $1", self.kb)[0]["n"])


def _text(paras: Sequence[str]) -> bytes:
    return "\n\n".join(paras).encode()


def run(smoke: bool) -> tuple[str, dict[str, Cost]]:
    n, reps = (20, 1) if smoke else (200, 5)
    seed = int(time.time())
    with Stack() as stack:
        url = stack.start_api()
        worker = stack.start_worker()
        s = Scenarios(Bench(stack, url, n), paragraphs(n, seed=seed))
        s.first()
        for _ in range(reps):
            s.duplicate_message()
        for i in range(reps):
            s.reupload(i)
        for i in range(reps):
            s.reupload_allowed(i)
        for _ in range(reps):
            s.reindex_unchanged()
        for i in range(reps):
            s.edit_one(i)
        worker.stop()
        s.redeliveries(reps, seed)
    return f"{n} one-chunk paragraphs; {reps} repetition(s) each", s.costs


class Scenarios:
    """The measured actions, on one document of one-chunk paragraphs."""

    def __init__(self, b: Bench, paras: list[str]) -> None:
        self.b, self.paras, self.current = b, paras, list(paras)
        self.data = _text(paras)
        self.costs = {k: Cost() for k in ("first", "duplicate_message", "redelivery", "reupload",
                                          "reupload_allowed", "reindex_unchanged", "reindex_edit_1")}
        self.doc: dict[str, Any] = {}

    def first(self) -> None:
        def index() -> None:
            self.doc.update(self.b.upload(self.data, "handbook.txt"))
            self.b.wait_generation(self.doc["document_id"], 1)

        self.b.measure(self.costs["first"], index)
        self.doc_id = int(self.doc["document_id"])
        self.objects = self.b.stack.objects(f"kb/{self.b.kb}/")

    def duplicate_message(self) -> None:
        """The finished generation's message, published again."""
        from shared.messages import IndexMessage

        b = self.b
        user_id = int(_sql(b.dsn, "SELECT user_id FROM index_task WHERE id = $1", self.doc["task_id"])[0]["user_id"])
        message = IndexMessage(task_id=self.doc["task_id"], document_id=self.doc_id, kb_id=b.kb, user_id=user_id,
                               generation=1).to_json()

        def duplicate() -> None:
            skipped = b.skips(self.doc_id)
            b.stack.publish(message)
            _poll(lambda: b.skips(self.doc_id) > skipped, 120, "duplicate message skipped")

        b.measure(self.costs["duplicate_message"], duplicate)

    def reupload(self, i: int) -> None:
        def again() -> None:
            r = self.b.upload(self.data, f"copy-{i}.txt")
            if r.get("duplicate_of") != self.doc_id:
                raise RuntimeError(f"not answered as a duplicate: {r}")

        self.b.measure(self.costs["reupload"], again)
        if self.b.documents() != 1 or self.b.stack.objects(f"kb/{self.b.kb}/") != self.objects:
            raise RuntimeError("a duplicate upload left a document or an object behind")

    def reupload_allowed(self, i: int) -> None:
        def again() -> None:
            r = self.b.upload(self.data, f"allowed-{i}.txt", allow_duplicate=True)
            self.b.wait_generation(int(r["document_id"]), 1)

        self.b.measure(self.costs["reupload_allowed"], again)

    def reindex_unchanged(self) -> None:
        def reindex() -> None:
            r = self.b.http.post(f"/api/v1/documents/{self.doc_id}/reindex", json={"force": True})
            if r.status_code != 202:
                raise RuntimeError(f"reindex: {r.status_code} {r.text}")
            self.b.wait_generation(self.doc_id, int(r.json()["document"]["index_generation"]))

        self.b.measure(self.costs["reindex_unchanged"], reindex)

    def edit_one(self, i: int) -> None:
        """New content: one paragraph (a different one each time) edited."""
        k = (i * 37 + len(self.current) // 2) % len(self.current)

        def edit() -> None:
            self.current[k] = self.current[k].replace("Paragraph", f"Edited ({i}) paragraph", 1)
            r = self.b.http.put(f"/api/v1/documents/{self.doc_id}/content",
                                files={"file": ("handbook.txt", _text(self.current))})
            if r.status_code != 202:
                raise RuntimeError(f"new content: {r.status_code} {r.text}")
            self.b.wait_generation(self.doc_id, int(r.json()["generation"]))

        self.b.measure(self.costs["reindex_edit_1"], edit)

    def redeliveries(self, reps: int, seed: int) -> None:
        """Workers crash right after their commit, before the ack (``after_commit=exit``); the
        broker redelivers to the next worker, which must skip without calling the model. Runs
        with no other worker consuming."""
        b = self.b
        docs = [int(b.upload(_text(paragraphs(max(2, b.n // 10), seed=seed + 1 + i)), f"redelivered-{i}.txt")
                    ["document_id"]) for i in range(reps)]
        t0 = time.perf_counter()
        while len(self._committed(docs)) < len(docs):
            crasher = b.stack.start_worker(wait=False, rag_fault_points="after_commit=exit", **SHORT_LOCK)
            _poll(lambda w=crasher: not w.alive(), 900, "worker crashed after its commit", 0.2)  # type: ignore[misc]
        final = b.stack.start_worker(**SHORT_LOCK)
        _poll(lambda: all(b.skips(d) >= 1 for d in docs), 300, "redeliveries skipped")
        final.stop()
        elapsed = time.perf_counter() - t0
        for d in docs:  # every embedding step of the document after its first (the one that committed)
            r = _sql(b.dsn, "SELECT count(*) FILTER (WHERE cache_misses > 0) AS calls,"
                            " coalesce(sum(cache_misses), 0) AS misses, coalesce(sum(cache_hits), 0) AS hits"
                            " FROM (SELECT * FROM embedding_run WHERE document_id = $1 ORDER BY id OFFSET 1) r", d)[0]
            c = self.costs["redelivery"]
            c.calls.append(int(r["calls"]))
            c.chunks.append(int(r["misses"]))
            c.hits.append(int(r["hits"]))
            c.seconds.append(elapsed / len(docs))

    def _committed(self, docs: list[int]) -> set[int]:
        return {int(r["document_id"]) for r in _sql(
            self.b.dsn, "SELECT document_id FROM index_task WHERE document_id = ANY($1::bigint[])"
                        " AND status = 'SUCCESS'", docs)}


def _fmt(values: Sequence[float], fmt: str = "{:g}") -> str:
    med = statistics.median(values)
    return fmt.format(med) if min(values) == max(values) else \
        f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))})"


ROWS = (
    ("duplicate_message", "a duplicate message (finished generation, published again)", "0 calls"),
    ("redelivery", "a redelivery (worker crashed after its commit, before the ack; seconds include starting "
                   "the workers)", "0 calls"),
    ("reupload", "an identical re-upload (same bytes, same KB) → 200 `duplicate_of`", "0 calls"),
    ("reindex_edit_1", "a reindex after editing 1 chunk of the document (new content)", "≤ 2 chunks"),
    ("reupload_allowed", "an identical re-upload with `?allow_duplicate=true` (new document)", "—"),
    ("reindex_unchanged", "a forced reindex of unchanged content", "—"),
    ("first", "first indexing of the document (reference)", "—"),
)


def table(desc: str, costs: dict[str, Cost]) -> str:
    lines = [
        "## P3: model calls for work already done (`python -m bench.model_calls`)",
        "",
        f"Real API + worker processes on isolated resources; {desc}. A model call is an `embedding_run` row",
        "with `cache_misses > 0`; chunks embedded = Σ `cache_misses`, cache hits = Σ `cache_hits`. Median",
        "(min–max) over the repetitions; seconds = wall time of the action until it settled (for reference).",
        "",
        "| Action | Model calls | Chunks embedded | Cache hits | Goal | Seconds |",
        "|---|---|---|---|---|---|",
    ]
    for key, label, goal in ROWS:
        c = costs[key]
        lines.append(f"| {label} | {_fmt(c.calls)} | {_fmt(c.chunks)} | {_fmt(c.hits)} | {goal} | "
                     f"{_fmt(c.seconds, '{:.2f}')} |")
    held = (max(costs["duplicate_message"].calls) == 0 and max(costs["redelivery"].calls) == 0
            and max(costs["reupload"].calls) == 0 and max(costs["reindex_edit_1"].chunks) <= 2)
    first_s, cached_s = statistics.median(costs["first"].seconds), statistics.median(costs["reindex_unchanged"].seconds)
    lines += ["", f"Goals {'hold' if held else 'NOT met'}. A reindex served from the cache took "
                  f"{cached_s / first_s:.2f}× the first indexing's time in this run."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition; RESULTS.md untouched")
    args = p.parse_args(argv)
    os.environ.setdefault("DO_NOT_TRACK", "1")
    desc, costs = run(args.smoke)
    md = table(desc, costs)
    print(md)
    if not args.smoke:
        write_section("model_calls", md)
    ok = (max(costs["duplicate_message"].calls) == 0 and max(costs["redelivery"].calls) == 0
          and max(costs["reupload"].calls) == 0 and max(costs["reindex_edit_1"].chunks) <= 2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
