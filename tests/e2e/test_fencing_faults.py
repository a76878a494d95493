"""Issue 3: at-least-once delivery never duplicates embeddings or lets a stale run overwrite.

Real worker processes, real SIGKILL / SIGSTOP / SIGCONT; assertions read the database
(``embedding_run`` counts model calls per document, ``delivery_skip`` records skipped deliveries).
"""

from __future__ import annotations

import asyncio
import signal
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from shared.adapters.rabbitmq import Publisher, connect
from shared.domain.messages import IndexMessage
from tests.e2e.conftest import WorkerFactory
from tests.support import (
    FAST,
    Api,
    chunk_ids,
    embedding_runs,
    poll,
    skips,
    sql,
    sql_value,
    wait_stopped,
)

pytestmark = pytest.mark.e2e

TEXT = ("Fencing tokens keep a paused worker from overwriting newer results. " * 40 + "\n\n") * 6



def _task(dsn: str, document_id: int) -> dict[str, Any]:
    return sql(dsn, "SELECT * FROM index_task WHERE document_id = $1", document_id)[0]


def _assert_one_chunk_set(api: Api, dsn: str, document_id: int) -> list[int]:
    doc = api.document(document_id)
    assert doc["status"] == "INDEXED" and doc["task"]["status"] == "SUCCESS"
    idx = [r["chunk_index"] for r in sql(dsn, "SELECT chunk_index FROM document_chunk WHERE document_id = $1"
                                              " ORDER BY chunk_index", document_id)]
    assert idx == list(range(doc["chunk_count"])) and idx
    vectors = sql_value(dsn, "SELECT count(*) FROM document_vector WHERE document_id = $1", document_id)
    assert vectors == len(idx)
    return chunk_ids(dsn, document_id)


def test_sigkill_after_commit_before_ack(api: Api, workers: WorkerFactory, services_env: dict[str, str]) -> None:
    dsn = services_env["DATABASE_URL"]
    a = workers(rag_fault_points="after_commit=stop", **FAST)
    kb = api.create_kb()
    doc = api.upload(kb, name="commit-then-crash.txt", data=TEXT.encode())
    wait_stopped(a)
    ids = _assert_one_chunk_set(api, dsn, doc["document_id"])
    a.kill(signal.SIGKILL)
    workers(**FAST)  # the redelivery goes here
    poll(lambda: "not_runnable" in skips(dsn, doc["document_id"]), timeout=90, what="redelivery skipped")
    assert _assert_one_chunk_set(api, dsn, doc["document_id"]) == ids
    assert embedding_runs(dsn, doc["document_id"]) == 1


def test_sigkill_during_embedding_is_finished_by_redelivery(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    a = workers(rag_fault_points="during_embed=stop", **FAST)
    kb = api.create_kb()
    doc = api.upload(kb, name="crash-mid-embed.txt", data=TEXT.encode())
    wait_stopped(a)
    assert _task(dsn, doc["document_id"])["status"] == "RUNNING"
    a.kill(signal.SIGKILL)
    workers(**FAST)
    api.wait_terminal(doc["document_id"], timeout=120)
    _assert_one_chunk_set(api, dsn, doc["document_id"])
    task = _task(dsn, doc["document_id"])
    assert task["attempt"] == 2 and task["generation"] == 1
    assert embedding_runs(dsn, doc["document_id"]) == 2  # the killed run's call, and the one that finished


def test_worker_paused_past_its_lock_commits_nothing(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    a = workers(rag_fault_points="during_embed=stop", **FAST)
    kb = api.create_kb()
    doc = api.upload(kb, name="paused.txt", data=TEXT.encode())
    wait_stopped(a)  # A holds generation 1, attempt 1, and is frozen past its 4 s lock
    workers(**FAST)  # B: gets the redelivery once the broker drops A's connection (heartbeat)
    poll(lambda: _task(dsn, doc["document_id"])["status"] == "SUCCESS", timeout=120, what="B commits")
    b_ids = _assert_one_chunk_set(api, dsn, doc["document_id"])
    assert _task(dsn, doc["document_id"])["attempt"] == 2
    a.kill(signal.SIGCONT)
    poll(lambda: {"lock_lost", "stale_generation"} & set(skips(dsn, doc["document_id"])), timeout=60,
         what="A fenced out after resuming")
    assert _assert_one_chunk_set(api, dsn, doc["document_id"]) == b_ids
    assert _task(dsn, doc["document_id"])["attempt"] == 2


async def _publish_twice(amqp_url: str, msg: IndexMessage) -> None:
    conn = await connect(amqp_url, name="test-dup", heartbeat_s=30, robust=False)
    try:
        pub = await Publisher.open(conn, 10)
        await asyncio.gather(pub.publish(msg.to_json()), pub.publish(msg.to_json()))
    finally:
        await conn.close()


def test_same_message_twice_to_two_workers_embeds_once(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    kb = api.create_kb()
    doc = api.upload(kb, name="duplicate.txt", data=TEXT.encode())  # no worker yet: stays queued
    user_id = sql_value(dsn, "SELECT user_id FROM index_task WHERE id = $1", doc["task_id"])
    msg = IndexMessage(task_id=doc["task_id"], document_id=doc["document_id"], kb_id=kb, user_id=user_id,
                       generation=1)
    asyncio.run(_publish_twice(services_env["AMQP_URL"], msg))  # three copies in the queue now
    workers(wait=False, **FAST)
    workers(wait=False, **FAST)
    api.wait_terminal(doc["document_id"], timeout=180)
    poll(lambda: len(skips(dsn, doc["document_id"])) >= 2, timeout=120, what="both duplicates skipped")
    _assert_one_chunk_set(api, dsn, doc["document_id"])
    assert embedding_runs(dsn, doc["document_id"]) == 1


def test_content_replaced_while_old_run_embeds(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    a = workers(rag_fault_points="during_embed=stop", **FAST)
    kb = api.create_kb()
    old = "Zebras migrate across the old savannah text. " * 30
    new = "Quantum lighthouses guard the replacement content. " * 30
    doc = api.upload(kb, name="v1.txt", data=old.encode())
    wait_stopped(a)
    r = api.http.put(f"/api/v1/documents/{doc['document_id']}/content",
                     files={"file": ("v2.txt", new.encode(), "text/plain")})
    assert r.status_code == 202, r.text
    assert r.json()["generation"] == 2
    workers(**FAST)
    poll(lambda: api.document(doc["document_id"])["status"] == "INDEXED", timeout=120, what="generation 2 indexed")
    a.kill(signal.SIGCONT)
    poll(lambda: "stale_generation" in skips(dsn, doc["document_id"]) or "lock_lost" in skips(dsn, doc["document_id"]),
         timeout=60, what="old run fenced out")
    d = api.document(doc["document_id"])
    assert d["index_generation"] == 2 and d["filename"] == "v2.txt"
    contents = " ".join(c["content"] for c in api.chunks(doc["document_id"]))
    assert "Quantum lighthouses" in contents and "Zebras" not in contents
    assert api.search(kb, "lighthouses guarding replacement content")[0]["document_id"] == doc["document_id"]
    assert set(r["generation"] for r in sql(dsn, "SELECT generation FROM embedding_run WHERE document_id = $1",
                                            doc["document_id"])) == {1, 2}


def test_ten_concurrent_retries_issue_one_generation(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    w = workers()
    kb = api.create_kb()
    doc = api.upload(kb, name="empty.txt", data=b"")
    assert api.wait_terminal(doc["document_id"])["task"]["status"] == "FAILED"
    w.stop()  # otherwise the first retry's run can fail again before a slower request reads the task
    with ThreadPoolExecutor(10) as pool:
        codes = list(pool.map(lambda _: api.http.post(f"/api/v1/tasks/{doc['task_id']}/retry").status_code,
                              range(10)))
    assert sorted(codes) == [202] + [409] * 9
    assert sql_value(dsn, "SELECT index_generation FROM document_info WHERE id = $1", doc["document_id"]) == 2
    assert sql_value(dsn, "SELECT count(*) FROM outbox WHERE task_id = $1", doc["task_id"]) == 2  # upload + retry
    task = _task(dsn, doc["document_id"])
    assert task["retry_count"] == 1 and task["generation"] == 2


def test_lock_lost_mid_task_is_retried_not_left_running(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    """Redis loses the lock (flush, failover): the work is cancelled before its commit and the
    delivery goes round the delay queue; the retry reclaims the task and finishes it."""
    import redis

    from shared.adapters.redis_lock import document_lock_key

    dsn = services_env["DATABASE_URL"]
    # the model is slow (1.5 s a batch, longer than the 1 s renewal period) and asked (no cache):
    # otherwise the run can reach its commit before the watchdog's first renewal after SIGCONT
    # (which would still be right: the fenced commit does not need the lock)
    a = workers(rag_fault_points="during_embed=stop,embed_batch=pause:1.5", embedding_cache_max_rows="0", **FAST)
    kb = api.create_kb()
    doc = api.upload(kb, name="lock-lost.txt", data=TEXT.encode())
    wait_stopped(a)
    assert redis.Redis.from_url(services_env["REDIS_URL"]).delete(document_lock_key(doc["document_id"])) == 1
    a.kill(signal.SIGCONT)
    d = api.wait_terminal(doc["document_id"], timeout=120)
    assert d["status"] == "INDEXED"
    assert "lock_lost" in skips(dsn, doc["document_id"])
    assert _task(dsn, doc["document_id"])["attempt"] == 2  # reclaimed by the delayed redelivery
    _assert_one_chunk_set(api, dsn, doc["document_id"])
