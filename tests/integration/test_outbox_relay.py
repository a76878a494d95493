"""The outbox relay against real PostgreSQL and RabbitMQ (the session's test vhost).

Each test first publishes every row other tests left pending, then purges ``rag.index.queue``,
so the queue holds only what the test itself relays.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator

import asyncpg
import pytest
from aio_pika.abc import AbstractConnection, AbstractIncomingMessage, AbstractQueue

from shared import amqp
from shared.settings import KnowledgeSettings
from task_service.relay import relay_once
from tests.integration.helpers import DISPATCH_LIMIT as K
from tests.integration.helpers import apoll, new_document


@pytest.fixture
async def broker(settings: KnowledgeSettings) -> AsyncIterator[AbstractConnection]:
    conn = await amqp.connect(settings.amqp_url.get_secret_value(), name="it-relay", heartbeat_s=30, robust=False)
    yield conn
    await conn.close()


@pytest.fixture
async def publisher(broker: AbstractConnection, settings: KnowledgeSettings) -> amqp.Publisher:
    return await amqp.Publisher.open(broker, settings.amqp_publish_timeout_s)


@pytest.fixture
async def index_queue(
    broker: AbstractConnection, pool: asyncpg.Pool, publisher: amqp.Publisher, settings: KnowledgeSettings
) -> AbstractQueue:
    """``rag.index.queue``, empty, with no pending outbox row left in the database."""
    channel = await broker.channel()
    _, queue = await amqp.declare_topology(channel, delay_ms=settings.delay_ms)
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
    pool: asyncpg.Pool, publisher: amqp.Publisher, index_queue: AbstractQueue
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
    assert (m.exchange, m.routing_key, m.content_type) == (amqp.EXCHANGE, amqp.ROUTING_KEY, "application/json")


async def test_concurrent_relays_publish_each_row_once(
    pool: asyncpg.Pool, broker: AbstractConnection, settings: KnowledgeSettings, index_queue: AbstractQueue
) -> None:
    async with pool.acquire() as conn:
        rows = [(await new_document(conn))[1] for _ in range(30)]
    publishers = [await amqp.Publisher.open(broker, settings.amqp_publish_timeout_s) for _ in range(2)]

    async def relay_until_empty(p: amqp.Publisher) -> int:
        total = 0
        while n := await relay_once(pool, p, grace_s=0, dispatch_limit=K, batch=4):
            total += n
        return total

    assert sum(await asyncio.gather(*(relay_until_empty(p) for p in publishers))) == len(rows)
    messages = await _take(index_queue, len(rows))
    assert Counter(m.message_id for m in messages) == Counter(str(r.message_id) for r in rows)
    async with pool.acquire() as conn:
        attempts = await conn.fetch(
            "SELECT attempts FROM outbox WHERE id = ANY($1::bigint[]) AND published_at IS NOT NULL",
            [r.id for r in rows],
        )
    assert [a["attempts"] for a in attempts] == [1] * len(rows)
