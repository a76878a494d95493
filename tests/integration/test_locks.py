"""``shared.adapters.redis_lock.DocumentLock`` and ``task_service.indexing.lease.run_with_lease`` against real Redis
(session DB)."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
import redis.asyncio as aioredis

from shared.adapters.redis_lock import DocumentLock
from shared.domain.errors import LockLostError
from task_service.indexing.lease import run_with_lease
from tests.integration.helpers import apoll

_ids = itertools.count(int(time.time() * 1000))


def _doc_id() -> int:
    """A document id no other test (or earlier run) locks."""
    return next(_ids)


async def test_second_acquire_fails_while_held(redis_client: aioredis.Redis) -> None:
    doc = _doc_id()
    first, second = DocumentLock(redis_client, doc, 30), DocumentLock(redis_client, doc, 30)
    assert await first.acquire() is True
    assert await second.acquire() is False
    await first.release()
    assert await second.acquire() is True
    await second.release()


async def test_expired_lock_is_taken_over_and_the_old_holder_is_fenced(redis_client: aioredis.Redis) -> None:
    doc = _doc_id()
    first, second = DocumentLock(redis_client, doc, 0.3), DocumentLock(redis_client, doc, 30)
    assert await first.acquire() is True
    assert await second.acquire() is False

    await apoll(second.acquire, deadline_s=5, what="lock free after TTL expiry")
    token = await redis_client.get(second.key)
    assert token is not None

    with pytest.raises(LockLostError):
        await first.renew()
    await first.release()  # lost: must not delete the new holder's key
    assert await redis_client.get(second.key) == token
    await second.renew()
    assert await redis_client.pttl(second.key) > 25_000
    await second.release()
    assert await redis_client.exists(second.key) == 0


async def test_lease_cancels_the_work_when_the_lock_is_lost(redis_client: aioredis.Redis) -> None:
    lock = DocumentLock(redis_client, _doc_id(), 30)
    assert await lock.acquire() is True
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def work() -> str:
        started.set()
        try:
            await asyncio.sleep(60)  # stands for a long parse/embed
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "finished"

    async def steal_lock() -> None:
        await started.wait()
        await redis_client.delete(lock.key)

    t0 = time.monotonic()
    with pytest.raises(LockLostError):
        await asyncio.gather(run_with_lease(work(), renew=lock.renew, period_s=0.05), steal_lock())
    assert cancelled.is_set()
    assert time.monotonic() - t0 < 5


async def test_lease_keeps_the_lock_past_its_ttl(redis_client: aioredis.Redis) -> None:
    doc = _doc_id()
    lock, rival = DocumentLock(redis_client, doc, 0.5), DocumentLock(redis_client, doc, 30)
    assert await lock.acquire() is True

    async def work() -> int:
        """Samples a rival's acquire for three TTLs; only the lease's renewals keep it failing."""
        rival_wins = 0
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            rival_wins += await rival.acquire()
            await asyncio.sleep(0.05)
        return rival_wins

    assert await run_with_lease(work(), renew=lock.renew, period_s=0.1) == 0
    await lock.release()
    assert await redis_client.exists(lock.key) == 0
