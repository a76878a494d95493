"""Recovery from faults that no redelivery fixes by itself: a dead worker (scanner timeout), poison
and crashing messages (dead-letter queue), a connection closed by an operator, a delete racing a
running task.

Real processes (API, workers, ``rag ops scanner --once``, ``rag dlq``), real SIGKILL / SIGSTOP /
SIGCONT; assertions read the database. Each test prints ``RECOVERY-TIMING ...`` lines: how long
the fault took to reach its terminal state.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import redis as sync_redis

from shared.adapters.rabbitmq import Publisher, connect
from shared.adapters.redis_lock import document_lock_key
from shared.adapters.s3 import ObjectStore, StorageConfig
from shared.domain.messages import DELIVERY_LIMIT, DLQ, QUEUE
from shared.settings import KnowledgeSettings
from tests.e2e.conftest import WorkerFactory
from tests.support import (
    MGMT,
    MGMT_AUTH,
    ROOT,
    VHOST,
    Api,
    Proc,
    assert_one_chunk_set,
    chunk_ids,
    consumers,
    embedding_runs,
    poll,
    process_state,
    skips,
    sql,
    sql_value,
)

pytestmark = pytest.mark.e2e

# Short lock/heartbeat timings (as in test_fencing_faults) so nothing waits minutes.
FAST = {"lock_ttl_s": "4", "lock_renew_s": "1", "heartbeat_s": "1", "lock_retry_delay_s": "1",
        "amqp_heartbeat_s": "2"}
NO_SCANNER = {"scan_interval_s": "0"}  # the test runs the scanner itself, as a process
# Crashes right after its claim, before parsing. It never embeds, so it skips loading the local
# model (the OpenAI-compatible embedder is never called): restarts take ~4 s less.
CRASH_ENV = {"rag_fault_points": "before_parse=exit", "embedding_provider": "openai", **FAST, **NO_SCANNER}
TEXT = ("Recovery scanners time out the tasks of dead workers and dead letters end in a table. " * 30
        + "\n\n") * 5


def _timing(what: str, seconds: float) -> str:
    line = f"RECOVERY-TIMING {what}: {seconds:.2f} s"
    print(line, flush=True)
    return line


# ------------------------------------------------------------------ processes run to completion


def _env(services_env: dict[str, str], **overrides: str) -> dict[str, str]:
    return {**os.environ, **services_env, **{k.upper(): v for k, v in overrides.items()}}


def _run(services_env: dict[str, str], module: str, *args: str, check: bool = True,
         **overrides: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=_env(services_env, **overrides),
                       capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, f"{module} {args} exited {r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}"
    return r


def _scan_once(services_env: dict[str, str], **overrides: str) -> dict[str, list[int]]:
    """One pass of the recovery scanner as its own process (``rag ops scanner --once``); its JSON
    report: ``{"timed_out": [task ids], "republished": [...], "dead_lettered": [...]}``."""
    out = _run(services_env, "rag_cli", "ops", "scanner", "--once", lock_retry_delay_s=FAST["lock_retry_delay_s"],
               **overrides).stdout.strip()
    report: dict[str, list[int]] = json.loads(out.splitlines()[-1])
    return report


# ------------------------------------------------------------------ database and broker probes


def _task(dsn: str, document_id: int) -> dict[str, Any]:
    return sql(dsn, "SELECT * FROM index_task WHERE document_id = $1", document_id)[0]


def _stopped(p: Proc) -> None:
    poll(lambda: process_state(p.pid) == "T", timeout=120, what=f"{p.name} stopped at its fault point")



def _rows_left(dsn: str, document_id: int) -> dict[str, int]:
    """Rows still referring to ``document_id`` in the tables a delete must empty."""
    out = {}
    for table, column in (("document_info", "id"), ("index_task", "document_id"),
                          ("document_chunk", "document_id"), ("document_vector", "document_id")):
        out[table] = int(sql_value(dsn, f"SELECT count(*) FROM {table} WHERE {column} = $1", document_id))
    return out


def _queue_counts(amqp_url: str, queue: str) -> tuple[int, int]:
    """``(ready messages, consumers)`` of ``queue`` from a passive declare: exact and immediate,
    unlike the management API's counters."""
    async def go() -> tuple[int, int]:
        conn = await connect(amqp_url, name="test-probe", heartbeat_s=30, robust=False)
        try:
            channel = await conn.channel()
            q = await channel.declare_queue(queue, passive=True)
            r = q.declaration_result
            return int(r.message_count or 0), int(r.consumer_count or 0)
        finally:
            await conn.close()

    return asyncio.run(go())


def _ready_messages(amqp_url: str, queue: str) -> int:
    return _queue_counts(amqp_url, queue)[0]


def _publish_raw(amqp_url: str, *bodies: bytes) -> None:
    async def go() -> None:
        conn = await connect(amqp_url, name="test-poison", heartbeat_s=30, robust=False)
        try:
            pub = await Publisher.open(conn, 10)
            for body in bodies:
                await pub.publish(body)
        finally:
            await conn.close()

    asyncio.run(go())


def _consumers(queue: str = QUEUE) -> set[tuple[str, str]]:
    return consumers(queue)


def _start(workers: WorkerFactory, **env: str) -> Proc:
    """``workers(**env)``, waiting until it consumes with :func:`_consumers` (tolerates the
    management API's ``"channel_details": []``)."""
    p = workers(wait=False, **env)

    def consuming() -> bool:
        assert p.alive(), f"worker exited:\n{p.tail()}"
        return p.name in {name for name, _ in _consumers()}

    poll(consuming, timeout=120, interval=0.5, what=f"{p.name} consuming")
    return p


def _connections_named(user_provided_name: str) -> list[str]:
    with httpx.Client(base_url=MGMT, auth=MGMT_AUTH, timeout=10) as c:
        conns = c.get(f"/api/vhosts/{VHOST}/connections").raise_for_status().json()
    return [str(x["name"]) for x in conns if x.get("user_provided_name") == user_provided_name]


def _object_exists(key: str) -> bool:
    return asyncio.run(ObjectStore(StorageConfig.from_settings(KnowledgeSettings())).exists(key))


# ------------------------------------------------------------------ 1. dead worker → scanner timeout


def test_sigkilled_worker_is_timed_out_by_the_scanner_then_retry_succeeds(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    a = _start(workers, rag_fault_points="during_embed=stop", **FAST, **NO_SCANNER)
    kb = api.create_kb()
    doc = api.upload(kb, name="dead-worker.txt", data=TEXT.encode())
    doc_id = doc["document_id"]
    _stopped(a)
    assert _task(dsn, doc_id)["status"] == "RUNNING"
    a.kill(signal.SIGKILL)
    killed = time.monotonic()
    a.popen.wait(30)

    def timed_out() -> bool:
        _scan_once(services_env, running_heartbeat_timeout_s="2")
        return bool(_task(dsn, doc_id)["status"] == "TIMEOUT")

    poll(timed_out, timeout=90, interval=0.5, what="scanner times the dead worker's task out")
    line = _timing("sigkill during embed -> task TIMEOUT (scanner, heartbeat timeout 2 s)",
                   time.monotonic() - killed)
    task = _task(dsn, doc_id)
    assert (task["status"], task["error_code"], task["attempt"], task["generation"]) == ("TIMEOUT", "timeout", 1, 1), \
        (task, line)
    assert "no heartbeat" in task["error_message"], task
    d = api.document(doc_id)
    assert d["status"] == "FAILED" and d["chunk_count"] == 0, d
    assert chunk_ids(dsn, doc_id) == []
    # A second scan changes nothing (the timeout is a conditional update on the claim).
    assert _scan_once(services_env, running_heartbeat_timeout_s="2")["timed_out"] == []

    r = api.http.post(f"/api/v1/tasks/{doc['task_id']}/retry")
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "RETRYING" and r.json()["generation"] == 2
    _start(workers, **FAST)
    final = api.wait_terminal(doc_id, timeout=120)
    assert final["status"] == "INDEXED", (final["error_message"], final["task"])
    assert_one_chunk_set(api, dsn, doc_id)
    task = _task(dsn, doc_id)
    assert task["generation"] == 2 and task["retry_count"] == 1 and task["status"] == "SUCCESS"
    # The killed run's message (generation 1) came back from the broker and was skipped as stale.
    poll(lambda: "stale_generation" in skips(dsn, doc_id), timeout=60, what="generation-1 redelivery skipped")
    assert set(r["generation"] for r in sql(dsn, "SELECT generation FROM embedding_run WHERE document_id = $1",
                                            doc_id)) == {1, 2}


# ------------------------------------------------------------------ 2. poison and crashing messages


def test_schema_invalid_messages_are_rejected_to_the_dlq(
    workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn, amqp_url = services_env["DATABASE_URL"], services_env["AMQP_URL"]
    _start(workers, **FAST, **NO_SCANNER)
    before = _ready_messages(amqp_url, DLQ)
    bodies = [b'{"taskId": "x"}', b"\x00\xffthis is not json", b'{"taskId":1,"documentId":1,"kbId":1,"userId":1,'
              b'"generation":1,"extra":true}']
    published = time.monotonic()
    _publish_raw(amqp_url, *bodies)
    poll(lambda: _ready_messages(amqp_url, DLQ) >= before + len(bodies), timeout=60, interval=0.3,
         what="invalid messages rejected to the DLQ")
    line = _timing("schema-invalid messages -> rag.index.dlq", time.monotonic() - published)
    assert _ready_messages(amqp_url, QUEUE) == 0, line

    report = _scan_once(services_env)
    assert report["dead_lettered"] == [], report  # no task to fail: the bodies name none
    rows = sql(dsn, "SELECT reason, body, task_id, replayed_at FROM dead_letter WHERE body = ANY($1::bytea[])",
               bodies)
    assert sorted(bytes(r["body"]) for r in rows) == sorted(bodies), rows
    assert all(r["reason"] == "rejected" and r["task_id"] is None and r["replayed_at"] is None for r in rows), rows
    assert _ready_messages(amqp_url, DLQ) == 0  # drained, acked only after the rows were committed

    listed = [json.loads(x) for x in _run(services_env, "rag_cli", "dlq", "list", "--json").stdout.splitlines()]
    ids = {int(x["id"]) for x in listed if x["task_id"] is None}
    assert len(ids) >= len(bodies), listed
    r = _run(services_env, "rag_cli", "dlq", "replay", str(min(ids)), check=False)
    assert r.returncode == 1 and json.loads(r.stdout)["replayed"] is False, r.stdout


def _supervise_crashing_workers(
    workers: WorkerFactory, services_env: dict[str, str], document_id: int, timeout: float = 300
) -> int:
    """Act as a supervisor: restart the crashing worker each time it dies, until the message is
    dead-lettered. Returns the number of crashes.

    Each restart waits until the dead worker's document lock has expired (a restart delay of at
    least ``LOCK_TTL_S``): a redelivery that finds the lock held takes the delay-queue path,
    which re-publishes the message and so resets the broker's delivery count (see the report).
    """
    amqp_url = services_env["AMQP_URL"]
    with sync_redis.Redis.from_url(services_env["REDIS_URL"]) as redis:
        return _supervise(workers, amqp_url, redis, document_key=document_lock_key(document_id), timeout=timeout)


def _supervise(workers: WorkerFactory, amqp_url: str, redis: sync_redis.Redis, *, document_key: str,
               timeout: float) -> int:
    crashes = 0
    deadline = time.monotonic() + timeout
    w = workers(wait=False, **CRASH_ENV)
    while True:
        assert time.monotonic() < deadline, f"no dead letter after {crashes} crashes:\n{w.tail()}"
        poll(lambda w=w: (not w.alive()) or _ready_messages(amqp_url, DLQ) > 0, timeout=120, interval=0.3,
             what="worker crash or dead letter")
        if not w.alive():
            assert w.popen.returncode == 70, f"worker exited {w.popen.returncode}, not at its fault point:\n{w.tail()}"
            crashes += 1
        if _ready_messages(amqp_url, DLQ) > 0:
            w.stop()
            return crashes
        assert crashes <= DELIVERY_LIMIT + 1, f"hot loop: {crashes} crashes and still no dead letter"
        poll(lambda: not redis.exists(document_key), timeout=150, what="dead worker's lock expired")
        w = workers(wait=False, **CRASH_ENV)


def test_message_crashing_every_worker_hits_the_delivery_limit_then_replays(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn, amqp_url = services_env["DATABASE_URL"], services_env["AMQP_URL"]
    assert _ready_messages(amqp_url, DLQ) == 0
    kb = api.create_kb()
    doc = api.upload(kb, name="crashes-the-parser.txt", data=TEXT.encode())
    doc_id, task_id = doc["document_id"], doc["task_id"]
    uploaded = time.monotonic()
    crashes = _supervise_crashing_workers(workers, services_env, doc_id)
    dead_lettered = time.monotonic()
    task = _task(dsn, doc_id)
    assert task["status"] == "RUNNING"  # the last crashed claim: nothing has failed it yet
    # No hot loop: one claim per crash, and the broker stops after DELIVERY_LIMIT + 1 deliveries.
    assert task["attempt"] == crashes == DELIVERY_LIMIT + 1, (task, crashes)
    assert embedding_runs(dsn, doc_id) == 0

    report = _scan_once(services_env)
    assert report["dead_lettered"] == [task_id], report
    line = _timing(f"crashing message ({crashes} crashes) -> task FAILED delivery_limit, from upload",
                   time.monotonic() - uploaded)
    _timing("  of which dead letter -> FAILED (one scanner pass)", time.monotonic() - dead_lettered)
    task = _task(dsn, doc_id)
    assert (task["status"], task["error_code"]) == ("FAILED", "delivery_limit"), (task, line)
    # The text's count comes from x-death "count" (times dead-lettered, 1), not the deliveries
    # (see the report), so only its shape is asserted.
    assert task["error_message"].startswith("message dead-lettered after"), task
    assert api.document(doc_id)["status"] == "FAILED"
    rows = sql(dsn, "SELECT * FROM dead_letter WHERE task_id = $1", task_id)
    assert len(rows) == 1 and rows[0]["reason"] == "delivery_limit" and rows[0]["generation"] == 1, rows
    assert rows[0]["document_id"] == doc_id and rows[0]["replayed_at"] is None
    assert _ready_messages(amqp_url, DLQ) == 0 and _ready_messages(amqp_url, QUEUE) == 0

    listed = [json.loads(x) for x in _run(services_env, "rag_cli", "dlq", "list", "--json").stdout.splitlines()]
    assert [x["id"] for x in listed if x["task_id"] == task_id] == [rows[0]["id"]], listed
    _start(workers, **FAST)
    replayed = json.loads(_run(services_env, "rag_cli", "dlq", "replay", str(rows[0]["id"])).stdout)
    assert replayed == {"replayed": True, "task_id": task_id, "generation": 2}, replayed
    final = api.wait_terminal(doc_id, timeout=120)
    assert final["status"] == "INDEXED", (final["error_message"], final["task"])
    assert_one_chunk_set(api, dsn, doc_id)
    task = _task(dsn, doc_id)
    assert task["generation"] == 2 and task["attempt"] == crashes + 1 and task["status"] == "SUCCESS", task
    assert sql_value(dsn, "SELECT replayed_at IS NOT NULL FROM dead_letter WHERE id = $1", rows[0]["id"])
    assert not any(x["task_id"] == task_id for x in
                   (json.loads(x) for x in _run(services_env, "rag_cli", "dlq", "list", "--json").stdout.splitlines()))
    r = _run(services_env, "rag_cli", "dlq", "replay", str(rows[0]["id"]), check=False)
    assert r.returncode == 1, r.stdout  # a dead letter replays once


# ------------------------------------------------------------------ 3. connection closed by an operator


def test_connection_closed_from_the_management_api_resubscribes(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    w = _start(workers, **FAST)
    pid = w.pid
    (old,) = _connections_named(w.name)
    assert (w.name, old) in _consumers()
    r = httpx.delete(f"{MGMT}/api/connections/{quote(old, safe='')}", auth=MGMT_AUTH, timeout=10,
                     headers={"X-Reason": "closed by test_recovery"})
    assert r.status_code == 204, r.text
    closed = time.monotonic()
    amqp_url = services_env["AMQP_URL"]
    # The broker's own count (passive declare) drops to 0, then comes back when the worker has
    # re-subscribed; its reconnect backoff starts at 1 s, so the 0 is seen.
    poll(lambda: _queue_counts(amqp_url, QUEUE)[1] == 0, timeout=10, interval=0.05, what="consumer gone")
    poll(lambda: _queue_counts(amqp_url, QUEUE)[1] >= 1, timeout=30, interval=0.05, what="consumer back")
    line = _timing("connection closed via management API -> consumers >= 1 again (broker count)",
                   time.monotonic() - closed)

    def resubscribed() -> bool:
        return any(name == w.name and conn != old for name, conn in _consumers())

    poll(resubscribed, timeout=30, interval=0.2, what="worker consuming again on a new connection")
    _timing("  ... and listed by the management API under the worker's name (stats lag)", time.monotonic() - closed)
    assert time.monotonic() - closed < 30, line
    assert w.alive() and w.pid == pid, (line, w.tail())
    assert old not in _connections_named(w.name)
    assert len([n for n, _ in _consumers() if n == w.name]) == 1, _consumers()

    kb = api.create_kb()
    doc = api.upload(kb, name="after-reconnect.txt", data=TEXT.encode())
    uploaded = time.monotonic()
    final = api.wait_terminal(doc["document_id"], timeout=120)
    _timing("  upload after reconnect -> INDEXED", time.monotonic() - uploaded)
    assert final["status"] == "INDEXED", (final["error_message"], final["task"])
    assert_one_chunk_set(api, dsn, doc["document_id"])
    assert w.alive() and w.pid == pid


# ------------------------------------------------------------------ 4. delete while embedding


def test_delete_while_embedding_leaves_nothing_behind(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    a = _start(workers, rag_fault_points="during_embed=stop", **FAST)
    kb = api.create_kb()
    doc = api.upload(kb, name="deleted-mid-embed.txt", data=TEXT.encode())
    doc_id = doc["document_id"]
    _stopped(a)
    key = str(sql_value(dsn, "SELECT object_key FROM document_info WHERE id = $1", doc_id))
    assert _object_exists(key)

    r = api.http.delete(f"/api/v1/documents/{doc_id}")
    assert r.status_code == 204, r.text
    deleted = time.monotonic()
    assert api.http.get(f"/api/v1/documents/{doc_id}").status_code == 404
    assert api.http.get(f"/api/v1/tasks/{doc['task_id']}").status_code == 404
    assert not any(_rows_left(dsn, doc_id).values()), _rows_left(dsn, doc_id)
    assert not _object_exists(key)

    a.kill(signal.SIGCONT)
    resumed = time.monotonic()
    fenced = {"stale_generation", "task_missing", "lock_lost"}
    reasons = poll(lambda: fenced & set(skips(dsn, doc_id)), timeout=60, what="resumed run fenced out")
    line = _timing(f"delete during embed -> resumed run fenced out {sorted(reasons)} (from SIGCONT)",
                   time.monotonic() - resumed)
    _timing("  from the DELETE", time.monotonic() - deleted)
    assert a.alive(), a.tail()  # fenced out, not crashed
    left = _rows_left(dsn, doc_id)
    assert left == dict.fromkeys(left, 0), (left, line)
    assert not _object_exists(key)
    assert embedding_runs(dsn, doc_id) == 1  # recorded before the freeze; nothing after the fence

    a.stop()  # still armed with during_embed=stop
    _start(workers, **FAST)
    again = api.upload(kb, name="deleted-mid-embed.txt", data=TEXT.encode())
    assert again["document_id"] != doc_id
    final = api.wait_terminal(again["document_id"], timeout=120)
    assert final["status"] == "INDEXED", (final["error_message"], final["task"])
    assert_one_chunk_set(api, dsn, again["document_id"])
    left = _rows_left(dsn, doc_id)
    assert left == dict.fromkeys(left, 0), left


# ------------------------------------------------------------------ crash loop with a lingering lock


def test_crashing_message_with_two_workers_also_hits_the_delivery_limit(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn, amqp_url = services_env["DATABASE_URL"], services_env["AMQP_URL"]
    assert _ready_messages(amqp_url, DLQ) == 0
    pool = [workers(wait=False, **CRASH_ENV), workers(wait=False, **CRASH_ENV)]
    poll(lambda: {p.name for p in pool} <= {n for n, _ in _consumers()}, timeout=120, what="both workers consuming")
    kb = api.create_kb()
    doc = api.upload(kb, name="crashes-two-workers.txt", data=TEXT.encode())
    doc_id = doc["document_id"]
    crashes = 0

    def settled() -> str | None:
        """Supervise (restart dead workers at once, as systemd would) until the message is gone."""
        nonlocal crashes
        for i, p in enumerate(pool):
            if not p.alive():
                assert p.popen.returncode == 70, p.tail()
                crashes += 1
                pool[i] = workers(wait=False, **CRASH_ENV)
        if _ready_messages(amqp_url, DLQ) > 0:
            return "dead-lettered"
        if "lock_held_exhausted" in skips(dsn, doc_id):
            return "acked as lock_held_exhausted"
        if crashes > DELIVERY_LIMIT + 1:
            return "still not dead-lettered"
        return None

    outcome = poll(settled, timeout=240, interval=0.3, what="crashing message dead-lettered or dropped")
    task = _task(dsn, doc_id)
    print(f"RECOVERY-TIMING two crashing workers: {outcome} after {crashes} crashes; task {task['status']} "
          f"attempt {task['attempt']}", flush=True)
    # The first crash's redelivery goes at once to the other (idle) worker, which finds the dead
    # worker's lock held: from then on only a delivery count carried across the delay queue can
    # stop the message after DELIVERY_LIMIT + 1 crashes.
    assert outcome == "dead-lettered" and crashes <= DELIVERY_LIMIT + 1, (outcome, crashes, task)
    assert "dead_lettered" in _scan_once(services_env)
    assert (_task(dsn, doc_id)["status"], _task(dsn, doc_id)["error_code"]) == ("FAILED", "delivery_limit")
