"""The outbox relay against real PostgreSQL and RabbitMQ (the session's test vhost).

Each test first publishes every row other tests left pending, then purges ``rag.index.queue``,
so the queue holds only what the test itself relays.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from aio_pika.abc import AbstractConnection, AbstractIncomingMessage, AbstractQueue

from shared.adapters import rabbitmq
from shared.domain import messages
from shared.settings import KnowledgeSettings
from task_service.jobs.relay import once as relay_once
from tests.integration.helpers import DISPATCH_LIMIT as K
from tests.integration.helpers import apoll, new_document


@pytest.fixture
async def broker(settings: KnowledgeSettings) -> AsyncIterator[AbstractConnection]:
    conn = await rabbitmq.connect(settings.amqp_url.get_secret_value(), name="it-relay", heartbeat_s=30, robust=False)
    yield conn
    await conn.close()


@pytest.fixture
async def publisher(broker: AbstractConnection, settings: KnowledgeSettings) -> rabbitmq.Publisher:
    return await rabbitmq.Publisher.open(broker, settings.amqp_publish_timeout_s)


@pytest.fixture
async def index_queue(
    broker: AbstractConnection, pool: asyncpg.Pool, publisher: rabbitmq.Publisher, settings: KnowledgeSettings
) -> AbstractQueue:
    """``rag.index.queue``, empty, with no pending outbox row left in the database."""
    channel = await broker.channel()
    _, queue = await rabbitmq.declare_topology(channel, delay_ms=settings.delay_ms)
    while await relay_once(pool, publisher, grace_s=0, dispatch_limit=K):
        pass
    await queue.purge()
    return queue


async def _take(queue: AbstractQueue, count: int) -> list[AbstractIncomingMessage]:
    """Get (and ack) ``count`` messages, then check nothing else is in the queue."""
    got: list[AbstractIncomingMessage] = []

    async def more() -> bool:
        while len(got) < count and (m := await queue.get(no_ack=False, fail=False)) is not None:
            await m.ack()
            got.append(m)
        return len(got) >= count

    await apoll(more, deadline_s=10, what=f"{count} messages in {queue.name}")
    assert await queue.get(no_ack=True, fail=False) is None, "unexpected extra message"
    return got


async def test_relay_publishes_a_pending_row_once(
    pool: asyncpg.Pool, publisher: rabbitmq.Publisher, index_queue: AbstractQueue
) -> None:
    async with pool.acquire() as conn:
        msg, row = await new_document(conn)
    assert await relay_once(pool, publisher, grace_s=3600, dispatch_limit=K) == 0  # younger than the grace: left alone

    assert await relay_once(pool, publisher, grace_s=0, dispatch_limit=K) == 1
    assert await relay_once(pool, publisher, grace_s=0, dispatch_limit=K) == 0

    async with pool.acquire() as conn:
        r = await conn.fetchrow("SELECT published_at, attempts FROM outbox WHERE id = $1", row.id)
    assert r["published_at"] is not None and r["attempts"] == 1
    [m] = await _take(index_queue, 1)
    assert m.message_id == str(row.message_id)
    assert json.loads(m.body) == msg.to_dict()
    assert (m.exchange, m.routing_key, m.content_type) == (messages.EXCHANGE, messages.ROUTING_KEY, "application/json")


async def test_concurrent_relays_publish_each_row_once(
    pool: asyncpg.Pool, broker: AbstractConnection, settings: KnowledgeSettings, index_queue: AbstractQueue
) -> None:
    async with pool.acquire() as conn:
        rows = [(await new_document(conn))[1] for _ in range(30)]
    publishers = [await rabbitmq.Publisher.open(broker, settings.amqp_publish_timeout_s) for _ in range(2)]

    async def relay_until_empty(p: rabbitmq.Publisher) -> int:
        total = 0
        while n := await relay_once(pool, p, grace_s=0, dispatch_limit=K, batch=4):
            total += n
        return total

    assert sum(await asyncio.gather(*(relay_until_empty(p) for p in publishers))) == len(rows)
    got = await _take(index_queue, len(rows))
    assert Counter(m.message_id for m in got) == Counter(str(r.message_id) for r in rows)
    async with pool.acquire() as conn:
        attempts = await conn.fetch(
            "SELECT attempts FROM outbox WHERE id = ANY($1::bigint[]) AND published_at IS NOT NULL",
            [r.id for r in rows],
        )
    assert [a["attempts"] for a in attempts] == [1] * len(rows)


async def test_messages_are_readable_in_the_management_console(
    pool: asyncpg.Pool, broker: AbstractConnection, settings: KnowledgeSettings, index_queue: AbstractQueue
) -> None:
    """What "Get messages" on rag.index.queue shows: message_id, correlation_id = task id,
    content_type, app_id, a timestamp and the generation header (read through the management API,
    as the console does), and the same properties through AMQP."""
    from tests.support import MGMT, MGMT_AUTH, VHOST

    async with pool.acquire() as conn:
        msg, row = await new_document(conn)
    failures: list[str] = []
    publisher = await rabbitmq.Publisher.open(broker, settings.amqp_publish_timeout_s, app_id="task_service",
                                          on_failure=lambda: failures.append("x"))
    assert await relay_once(pool, publisher, grace_s=0, dispatch_limit=K) == 1
    assert failures == []

    async with httpx.AsyncClient(base_url=MGMT, auth=MGMT_AUTH, timeout=30) as c:
        async def peek() -> list[dict[str, Any]]:
            r = await c.post(f"/api/queues/{VHOST}/{messages.QUEUE}/get",
                             json={"count": 5, "ackmode": "ack_requeue_true", "encoding": "auto"})
            return list(r.raise_for_status().json())

        [shown] = await apoll(peek, deadline_s=10, what="a message in rag.index.queue")
    props = shown["properties"]
    assert props["message_id"] == str(row.message_id)
    assert props["correlation_id"] == str(msg.task_id)
    assert props["content_type"] == "application/json"
    assert props["app_id"] == "task_service"
    assert props["delivery_mode"] == 2
    assert props["headers"][messages.GENERATION_HEADER] == msg.generation
    assert abs(props["timestamp"] - time.time()) < 300  # seconds since the epoch, set at publish
    assert json.loads(shown["payload"]) == msg.to_dict()

    [m] = await _take(index_queue, 1)
    assert (m.correlation_id, m.app_id, m.headers[messages.GENERATION_HEADER]) == (str(msg.task_id), "task_service",
                                                                               msg.generation)
    assert m.timestamp is not None


async def test_worker_gauges_are_sampled_from_the_database_and_the_broker(
    pool: asyncpg.Pool, broker: AbstractConnection, publisher: rabbitmq.Publisher, index_queue: AbstractQueue,
) -> None:
    """``sample_once`` reads the outbox backlog, active tasks (count, oldest age) and queue depths."""
    from shared.adapters.postgres.pg_store import PgMaintenance
    from task_service.jobs.metrics_sampler import once as sample_once
    from task_service.metrics import WorkerMetrics

    async with pool.acquire() as conn:
        msg, _ = await new_document(conn)  # WAITING, its outbox row unpublished
        await conn.execute("UPDATE index_task SET update_time = now() - interval '90 seconds' WHERE id = $1",
                           msg.task_id)
    await publisher.publish(msg.to_json())  # one ready message in rag.index.queue
    metrics = WorkerMetrics.unregistered()
    channel = await broker.channel()

    async def sampled() -> bool:
        await sample_once(metrics, PgMaintenance(pool), channel)
        return (metrics.registry.get_sample_value("rag_queue_messages", {"queue": messages.QUEUE}) or 0) >= 1

    await apoll(sampled, deadline_s=10, what="the queue depth sampled")
    value = metrics.registry.get_sample_value
    assert (value("rag_outbox_backlog") or 0) >= 1
    assert (value("rag_tasks_active", {"status": "WAITING"}) or 0) >= 1
    assert (value("rag_tasks_oldest_age_seconds", {"status": "WAITING"}) or 0) >= 90
    assert value("rag_dlq_depth") is not None
    await index_queue.purge()
