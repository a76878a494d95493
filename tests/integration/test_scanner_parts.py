"""The recovery scanner on split tasks against real PostgreSQL: a split task is never timed out
as a whole; a silent RUNNING part is re-armed WAITING and re-published; a dispatched WAITING part
untouched is re-published; a part held for fair dispatch is the relay's."""

from __future__ import annotations

from datetime import timedelta

import aio_pika
import asyncpg

from shared.adapters import rabbitmq
from shared.adapters.postgres.repo import parts as parts_repo
from shared.domain import messages
from shared.domain.messages import IndexMessage
from shared.domain.parts import plan_parts
from shared.domain.records import Claim, PartCommit, PartCommitted, SplitCommit
from shared.domain.scan_policy import ScanThresholds
from shared.settings import KnowledgeSettings
from task_service.jobs import scanner
from tests.integration.helpers import chunk_set, claim_attempt, new_document

TH = ScanThresholds(heartbeat_timeout=timedelta(seconds=300), hard_limit=timedelta(seconds=1000),
                    requeue_after=timedelta(seconds=600))


async def _split(conn: asyncpg.Connection, dispatch_limit: int | None) -> IndexMessage:
    msg, _ = await new_document(conn)
    attempt = await claim_attempt(conn, msg.task_id, msg.generation)
    assert attempt is not None
    chunks, _ = chunk_set(10, "big")
    rows = await parts_repo.split_task(conn, SplitCommit(Claim(msg.task_id, msg.generation, attempt), msg.document_id,
                                                         msg.kb_id, msg.user_id, chunks, plan_parts(10, 4)),
                                       dispatch_limit)
    assert rows is not None
    return msg


async def _part_rows(conn: asyncpg.Connection, task_id: int, part: int) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM outbox WHERE task_id = $1 AND part = $2", task_id, part))


async def test_a_split_task_is_never_timed_out_as_a_whole(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    msg = await _split(db, 3)
    await db.execute("UPDATE index_task SET update_time = now() - interval '1 day', start_time = now() - interval"
                     " '1 day' WHERE id = $1", msg.task_id)
    report = await scanner.once(pool, None, TH)
    assert msg.task_id not in report.timed_out
    assert await db.fetchval("SELECT status FROM index_task WHERE id = $1", msg.task_id) == "RUNNING"


async def test_a_silent_running_part_is_rearmed_and_republished(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    msg = await _split(db, 3)
    old = await parts_repo.claim_part(db, msg.task_id, 1, msg.generation)
    assert old is not None
    await db.execute("UPDATE index_part SET update_time = now() - interval '301 seconds'"
                     " WHERE task_id = $1 AND part = 1", msg.task_id)
    report = await scanner.once(pool, None, TH)
    assert (msg.task_id, 1) in report.rearmed_parts
    assert await db.fetchval("SELECT status FROM index_part WHERE task_id = $1 AND part = 1", msg.task_id) == "WAITING"
    row = await db.fetchrow("SELECT body::text AS body, released_at FROM outbox WHERE task_id = $1 AND part = 1"
                            " ORDER BY id DESC LIMIT 1", msg.task_id)
    assert IndexMessage.from_json(row["body"].encode()).part == 1 and row["released_at"] is not None
    assert await _part_rows(db, msg.task_id, 1) == 2
    _, vecs = chunk_set(10, "big")
    commit = PartCommit(old, msg.document_id, msg.kb_id, vecs[old.first_chunk:old.end_chunk])
    assert await parts_repo.commit_part(db, commit) is PartCommitted.FENCED  # the vanished worker's late commit
    again = await scanner.once(pool, None, TH)  # touched: nothing more until it is silent again
    assert (msg.task_id, 1) not in again.rearmed_parts + again.republished_parts


async def test_a_dispatched_waiting_part_untouched_is_republished(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    msg = await _split(db, 3)
    await db.execute("UPDATE index_part SET update_time = now() - interval '601 seconds' WHERE task_id = $1",
                     msg.task_id)
    report = await scanner.once(pool, None, TH)
    assert {(msg.task_id, p) for p in range(3)} <= set(report.republished_parts)
    assert [await _part_rows(db, msg.task_id, p) for p in range(3)] == [2, 2, 2]


async def test_a_held_part_is_left_to_the_relay(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    msg = await _split(db, None)
    await db.execute("UPDATE index_part SET update_time = now() - interval '1 day' WHERE task_id = $1", msg.task_id)
    report = await scanner.once(pool, None, TH)
    assert not {(msg.task_id, p) for p in range(3)} & set(report.republished_parts + report.rearmed_parts)
    assert [await _part_rows(db, msg.task_id, p) for p in range(3)] == [1, 1, 1]


async def test_a_dead_lettered_part_fails_its_task_and_drops_the_split(
    pool: asyncpg.Pool, db: asyncpg.Connection, settings: KnowledgeSettings,
) -> None:
    msg = await _split(db, 3)
    await parts_repo.claim_part(db, msg.task_id, 1, msg.generation)
    conn = await rabbitmq.connect(settings.amqp_url.get_secret_value(), name="it-dlq-part", heartbeat_s=30,
                                  robust=False)
    try:
        channel = await conn.channel()
        await rabbitmq.declare_topology(channel, delay_ms=settings.delay_ms)
        await channel.default_exchange.publish(
            aio_pika.Message(msg.for_part(1).to_json(), headers={messages.DEAD_REASON_HEADER: "delivery_limit"}),
            routing_key=messages.DLQ,
        )
        report = await scanner.once(pool, channel, TH)
    finally:
        await conn.close()
    assert msg.task_id in report.dead_lettered
    r = await db.fetchrow("SELECT status, error_code FROM index_task WHERE id = $1", msg.task_id)
    assert (r["status"], r["error_code"]) == ("FAILED", "delivery_limit")
    left = [await db.fetchval(f"SELECT count(*) FROM {t} WHERE task_id = $1", msg.task_id)
            for t in ("index_split", "index_part", "staged_chunk")]
    assert left == [0, 0, 0]
    assert await db.fetchval("SELECT count(*) FROM outbox WHERE task_id = $1 AND part IS NOT NULL"
                             " AND published_at IS NULL",
                             msg.task_id) == 0
