"""Broker-node faults under load, against a three-node RabbitMQ cluster (issue 19 item 3).

:func:`run` starts a :class:`tests.support.rabbit_cluster.RabbitCluster`, an OpenAI-compatible embedding
stand-in (:class:`EmbeddingStandIn`, fixed latency, in this process), the API and two workers whose ``AMQP_URL``
names all three nodes, and uploads distinct text documents at a steady pace from a thread (an
upload answered 5xx or not at all is retried, and the outage it saw timed). Meanwhile the faults
run one after the other, each right after a burst of uploads (documents queued or indexing when it
hits) and followed by a *probe*: a document uploaded right after the fault, timed until INDEXED
(the recovery time: publish, delivery, indexing all work again):

1. kill -9 the node leading ``rag.index.queue``;   2. start it again (its replica rejoins);
3. stop a follower (graceful);                        4. start it again;
5-10. restart the cluster node by node (stop, start, replica online, next node).

Then it waits for every document and reads the outcome from the database and the broker:
INDEXED / lost, documents whose embedding ran in more than one attempt (each extra run is one that
did not commit: cut), the committing attempt embedded exactly once, the queue drained, the outbox
published. Used by ``tests/e2e/test_broker_cluster.py`` (CI size) and ``bench/cluster.py`` (full size).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from tests.support import FAST, MGMT_AUTH, ROOT, Proc, child_env, free_port, poll, sql, sql_value, start
from tests.support.rabbit_cluster import RabbitCluster

QUEUE = "rag.index.queue"
VHOST = "rag"
EMBED_LATENCY_MS = 100


@dataclass
class Fault:
    """One fault: what was done, when (s since the load started), documents not yet INDEXED at
    that moment, and the probe: seconds from the fault until a document uploaded right after it
    was INDEXED."""

    name: str
    at_s: float
    in_flight: int
    recover_s: float


@dataclass
class Outcome:
    """What a run left behind (see the module docstring)."""

    documents: int = 0
    indexed: int = 0
    lost: int = 0
    embedded_twice: int = 0  # documents with embedding runs in more than one attempt
    cut_runs: int = 0  # embedding runs of attempts that did not commit
    committing_embedded_once: bool = True
    skipped: dict[str, int] = field(default_factory=dict)  # delivery_skip rows by reason (fenced redeliveries)
    queue_messages: int = -1
    outbox_unpublished: int = -1
    uploads_retried: int = 0
    worst_upload_outage_s: float = 0.0
    duration_s: float = 0.0
    faults: list[Fault] = field(default_factory=list)

    def table(self) -> str:
        """The per-fault table (markdown)."""
        rows = ["| fault | at (s) | documents in flight | recovered after (s) |", "|---|---:|---:|---:|"]
        rows += [f"| {f.name} | {f.at_s:.0f} | {f.in_flight} | {f.recover_s:.1f} |" for f in self.faults]
        return "\n".join(rows)

    def summary(self) -> str:
        return (f"{self.documents} documents: {self.indexed} INDEXED, {self.lost} lost, {self.embedded_twice} embedded "
                f"in two attempts ({self.cut_runs} cut runs), committing attempt embedded once: "
                f"{self.committing_embedded_once}; deliveries skipped {self.skipped or 0}; queue left "
                f"{self.queue_messages} messages, outbox "
                f"{self.outbox_unpublished} unpublished; {self.uploads_retried} uploads retried, longest upload "
                f"outage {self.worst_upload_outage_s:.1f} s; {self.duration_s:.0f} s in all")


def _vocabulary() -> list[str]:
    return (ROOT / "samples" / "indexing-primer.md").read_text(errors="replace").split()


def document(i: int, words: int, vocab: list[str], seed: int) -> bytes:
    rng = random.Random(seed * 1_000_003 + i)
    body = [rng.choice(vocab) for _ in range(words)]
    paras = [" ".join(body[p:p + 80]) for p in range(0, words, 80)]
    return (f"document {seed}-{i}\n\n" + "\n\n".join(paras)).encode()


class Uploader:
    """Uploads documents from a thread, one every ``gap_s`` seconds, until told to stop and at least
    ``minimum`` went in; an answer >= 500 or a transport error is retried after 0.5 s, and the span
    from the first failed try to the accepted one is the upload's outage."""

    def __init__(self, http: httpx.Client, kb_id: int, gap_s: float, minimum: int, words: int, seed: int) -> None:
        self.http, self.kb_id, self.gap_s, self.minimum = http, kb_id, gap_s, minimum
        self.words, self.seed = words, seed
        self.ids: list[int] = []
        self.retried = 0
        self.worst_outage_s = 0.0
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._vocab = _vocabulary()
        self._n = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "uploader still running"
        if self.error is not None:
            raise self.error

    def upload_one(self) -> tuple[int, float]:
        """Upload the next document (retrying); ``(document id, monotonic time accepted)``."""
        with self._lock:
            i, self._n = self._n, self._n + 1
        data = document(i, self.words, self._vocab, self.seed)
        first_failure: float | None = None
        while True:
            try:
                r = self.http.post(f"/api/v1/knowledge-bases/{self.kb_id}/documents",
                                   files={"file": (f"c{self.seed}-{i}.txt", data, "text/plain")})
                if r.status_code < 500:
                    assert r.status_code == 202, r.text
                    break
            except httpx.HTTPError:
                pass
            first_failure = first_failure or time.monotonic()
            with self._lock:
                self.retried += 1
            time.sleep(0.5)
        now = time.monotonic()
        with self._lock:
            if first_failure is not None:
                self.worst_outage_s = max(self.worst_outage_s, now - first_failure)
            doc_id = int(r.json()["document_id"])
            self.ids.append(doc_id)
        return doc_id, now

    def _loop(self) -> None:
        try:
            while not (self.stop.is_set() and len(self.ids) >= self.minimum):
                self.upload_one()
                self.stop.wait(self.gap_s)
        except BaseException as exc:  # reported by join()
            self.error = exc


def _create_user(dsn: str) -> str:
    import asyncpg

    from knowledge_service.deps import token_digest
    from shared.adapters.postgres.repo import users as users_repo

    async def go() -> str:
        conn = await asyncpg.connect(dsn)
        try:
            token = "rag_" + secrets.token_urlsafe(32)
            user_id = await users_repo.create_user(conn, f"cluster-{secrets.token_hex(4)}")
            await users_repo.create_token(conn, user_id, token_digest(token))
            return token
        finally:
            await conn.close()

    return asyncio.run(go())


def _wait_http(url: str, proc: Proc, what: str) -> None:
    def ready() -> bool:
        assert proc.alive(), f"{proc.name} exited:\n{proc.tail()}"
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    poll(ready, timeout=180, interval=0.3, what=what)


class _StandInHandler(BaseHTTPRequestHandler):
    """``POST /v1/embeddings``: after the server's latency, a deterministic unit vector per input
    text (seeded by its SHA-256), as ``shared.adapters.embedding.openai_compat`` expects."""

    server: EmbeddingStandIn

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        time.sleep(self.server.latency_s)
        data = []
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.server.dim)
            data.append({"object": "embedding", "index": i, "embedding": (v / np.linalg.norm(v)).round(6).tolist()})
        payload = json.dumps({"object": "list", "data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


class EmbeddingStandIn(ThreadingHTTPServer):
    """An OpenAI-compatible embeddings endpoint on a free loopback port, one thread per request
    (requests overlap freely), answering after ``latency_s``; :meth:`start` / :meth:`close`."""

    daemon_threads = True

    def __init__(self, latency_s: float, dim: int = 384) -> None:
        super().__init__(("127.0.0.1", 0), _StandInHandler)
        self.latency_s, self.dim = latency_s, dim

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> EmbeddingStandIn:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        self.shutdown()
        self.server_close()


@contextmanager
def services(env: dict[str, str], log_dir: Path, workers: int) -> Iterator[tuple[str, list[Proc]]]:
    """The embedding stand-in, the API and ``workers`` workers on ``env``; (API URL, workers)."""
    procs: list[Proc] = []
    standin = EmbeddingStandIn(EMBED_LATENCY_MS / 1000).start()
    try:
        env = {**env, "EMBEDDING_PROVIDER": "openai", "EMBEDDING_BASE_URL": standin.url,
               "EMBEDDING_BATCH_SIZE": "4", "EMBEDDING_CACHE_MAX_ROWS": "0", "DISPATCH_WORKERS": str(workers),
               "RELAY_INTERVAL_S": "1", "RELAY_GRACE_S": "2", **{k.upper(): v for k, v in FAST.items()}}
        api_port = free_port()
        api = start("cluster-api", "knowledge_service", child_env({**env, "KS_PORT": str(api_port)}), log_dir)
        procs.append(api)
        ws = [start(f"cluster-worker-{i}", "task_service", child_env({**env, "WORKER_NAME": f"cluster-worker-{i}"}),
                    log_dir) for i in range(workers)]
        procs.extend(ws)
        url = f"http://127.0.0.1:{api_port}"
        _wait_http(f"{url}/readyz", api, "API ready")
        yield url, ws
    finally:
        for p in reversed(procs):
            p.stop()
        standin.close()


def _in_flight(dsn: str, ids: list[int]) -> int:
    return int(sql_value(dsn, "SELECT count(*) FROM document_info WHERE id = ANY($1::bigint[]) AND status <> 'INDEXED'",
                         ids))


def _probe(dsn: str, uploader: Uploader, since: float, timeout_s: float = 240) -> float:
    """Upload one document now; seconds from ``since`` until it is INDEXED."""
    doc_id, _ = uploader.upload_one()
    poll(lambda: sql_value(dsn, "SELECT status FROM document_info WHERE id = $1", doc_id) == "INDEXED",
         timeout=timeout_s, interval=0.2, what=f"probe document {doc_id} INDEXED")
    return time.monotonic() - since


Step = tuple[str, Callable[[], None], Callable[[], None]]


def fault_steps(cluster: RabbitCluster) -> list[Step]:
    """``(name, fault, settle)`` in order: the probe is uploaded right after ``fault`` returns (a
    node killed or stopped, or a node's start begun), ``settle`` then waits until the cluster is
    whole again where needed (the node booted, every replica online). Node indexes are chosen when a
    step runs (the leader moves)."""
    n = len(cluster.nodes)
    chosen: dict[str, int] = {}

    def nothing() -> None:
        return None

    def kill_leader() -> None:
        chosen["leader"] = cluster.leader(VHOST, QUEUE)
        cluster.kill_node(chosen["leader"])

    def stop_follower() -> None:
        leader = cluster.leader(VHOST, QUEUE)
        chosen["follower"] = next(i for i in range(n) if i != leader)
        cluster.stop_node(chosen["follower"])

    def starting(role: str | int) -> tuple[Callable[[], None], Callable[[], None]]:
        def begin() -> None:
            cluster.start_node(chosen[role] if isinstance(role, str) else role, wait=False)

        def settle() -> None:
            cluster.wait_running(chosen[role] if isinstance(role, str) else role)
            cluster.wait_online(VHOST, QUEUE, n)

        return begin, settle

    steps: list[Step] = [("kill -9 the queue's leader node", kill_leader, nothing),
                         ("start the old leader again", *starting("leader")),
                         ("stop a follower node (graceful)", stop_follower, nothing),
                         ("start the follower again", *starting("follower"))]
    for i in range(n):
        def stop(i: int = i) -> None:
            cluster.stop_node(i)

        steps += [(f"rolling restart: stop node {i + 1}", stop, nothing),
                  (f"rolling restart: start node {i + 1}", *starting(i))]
    return steps


def run(env: dict[str, str], log_dir: Path, *, documents: int, gap_s: float, burst: int, words: int = 900,
        workers: int = 2, seed: int = 1) -> Outcome:
    """One run (see the module docstring) on the resources ``env`` names (DATABASE_URL, REDIS_URL,
    S3_BUCKET); ``AMQP_URL`` is replaced by the cluster's. ``burst`` documents are uploaded right
    before each fault (in flight when it hits), others one every ``gap_s`` seconds for as long as the
    faults last and until at least ``documents`` went in."""
    dsn = env["DATABASE_URL"]
    out = Outcome()
    with ExitStack() as stack:
        cluster = RabbitCluster(3, f"{seed}{free_port()}", log_dir)
        stack.callback(cluster.close)
        cluster.start(MGMT_AUTH[0], MGMT_AUTH[1], VHOST)
        amqp = cluster.url(MGMT_AUTH[0], MGMT_AUTH[1], VHOST)
        url, _ = stack.enter_context(services({**env, "AMQP_URL": amqp}, log_dir, workers))
        q = poll(lambda: (lambda q: q if q.get("consumers") == str(workers) else None)(
            cluster.queue_info(VHOST, QUEUE)), timeout=180, interval=1, what=f"{workers} workers consuming")
        assert q.get("type") == "quorum" and q.get("members", "").count("@") == 3, q  # a replica on every node
        http = stack.enter_context(httpx.Client(base_url=url, timeout=60,
                                                headers={"Authorization": f"Bearer {_create_user(dsn)}"}))
        kb = http.post("/api/v1/knowledge-bases", json={"name": "cluster"})
        assert kb.status_code == 201, kb.text
        uploader = Uploader(http, int(kb.json()["kb_id"]), gap_s, documents, words, seed)
        t0 = time.monotonic()
        uploader.start()
        try:
            poll(lambda: len(uploader.ids) >= 3 or None, timeout=60, what="first uploads")
            for name, fault, settle in fault_steps(cluster):
                for _ in range(burst):  # documents queued or indexing when the fault hits
                    uploader.upload_one()
                in_flight = _in_flight(dsn, list(uploader.ids))
                at = time.monotonic()
                fault()
                out.faults.append(Fault(name, at - t0, in_flight, _probe(dsn, uploader, at)))
                settle()
        finally:
            uploader.stop.set()
            uploader.join(600)
        ids = list(uploader.ids)
        poll(lambda: _in_flight(dsn, ids) == 0 or None, timeout=300, interval=0.5, what="every document INDEXED")
        out.duration_s = time.monotonic() - t0
        _read_outcome(out, dsn, ids, uploader)
        out.queue_messages = int(poll(lambda: (lambda q: q if q.get("messages") == "0" else None)(
            cluster.queue_info(VHOST, QUEUE)), timeout=60, interval=1, what="queue drained")["messages"])
    return out


def _read_outcome(out: Outcome, dsn: str, ids: list[int], uploader: Uploader) -> None:
    out.documents = len(ids)
    out.indexed = int(sql_value(dsn, "SELECT count(*) FROM document_info WHERE id = ANY($1::bigint[])"
                                     " AND status = 'INDEXED'", ids))
    out.lost = out.documents - out.indexed
    runs: list[dict[str, Any]] = sql(
        dsn, "SELECT e.document_id, count(*) AS runs, count(*) FILTER (WHERE e.attempt = t.attempt"
             " AND t.status = 'SUCCESS') AS committing FROM embedding_run e JOIN index_task t ON t.id = e.task_id"
             " WHERE e.document_id = ANY($1::bigint[]) GROUP BY e.document_id", ids)
    out.embedded_twice = sum(1 for r in runs if r["runs"] > 1)
    out.cut_runs = sum(int(r["runs"]) - int(r["committing"]) for r in runs)
    out.committing_embedded_once = len(runs) == len(ids) and all(r["committing"] == 1 for r in runs)
    out.skipped = {r["reason"]: int(r["n"]) for r in sql(
        dsn, "SELECT reason, count(*) AS n FROM delivery_skip WHERE document_id = ANY($1::bigint[]) GROUP BY reason",
        ids)}
    out.outbox_unpublished = int(sql_value(dsn, "SELECT count(*) FROM outbox WHERE published_at IS NULL"))
    out.uploads_retried = uploader.retried
    out.worst_upload_outage_s = uploader.worst_outage_s
