"""Issue 18: admission of event streams (caps per user and in all, 429 with Retry-After) and the
semaphore bounding their database work."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from typing import Any

import pytest

from knowledge_service.config import EventsConfig
from knowledge_service.streams import StreamGate, StreamLimitError, _respond
from shared.settings import KnowledgeSettings


def _gate(per_user: int = 2, total: int = 3, share: int = 2) -> StreamGate:
    return StreamGate(per_user, total, 7, asyncio.Semaphore(share))


def test_a_user_past_the_per_user_cap_gets_429_with_retry_after() -> None:
    gate = _gate()
    gate.admit(1)
    gate.admit(1)
    with pytest.raises(StreamLimitError) as caught:
        gate.admit(1)
    assert caught.value.http_status == 429 and caught.value.response_headers() == {"Retry-After": "7"}
    gate.admit(2)  # another user still gets in


def test_the_total_cap_holds_across_users_and_a_release_frees_a_slot() -> None:
    gate = _gate()
    releases = [gate.admit(1), gate.admit(2), gate.admit(3)]
    with pytest.raises(StreamLimitError, match="on this server"):
        gate.admit(4)
    releases[0]()
    releases[0]()  # idempotent: one release per stream
    assert gate.open_total == 2
    gate.admit(4)
    with pytest.raises(StreamLimitError):
        gate.admit(5)


async def test_a_stream_releases_its_slot_when_it_ends_or_is_never_started() -> None:
    gate = _gate(per_user=5, total=5)

    async def two() -> AsyncIterator[dict[str, str]]:
        yield {"event": "a", "data": "1"}
        yield {"event": "b", "data": "2"}

    response = _respond(gate, 1, two())
    assert gate.open_total == 1
    body: Any = response.body_iterator
    assert [e["event"] async for e in body] == ["a", "b"]
    assert gate.open_total == 0
    _respond(gate, 1, two())  # the client left before the response started
    gc.collect()
    assert gate.open_total == 0


async def test_database_work_runs_under_the_streams_share() -> None:
    gate = _gate(share=2)
    running = 0
    peak = 0
    release = asyncio.Event()

    async def work() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1

    tasks = [asyncio.ensure_future(gate.run(work)) for _ in range(6)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert peak == 2
    release.set()
    await asyncio.gather(*tasks)
    assert peak == 2


def test_share_leaves_the_pool_a_connection_for_requests() -> None:
    settings = KnowledgeSettings(events_db_share=50, db_pool_max=4)  # type: ignore[call-arg]
    gate = StreamGate.from_config(EventsConfig.from_settings(settings))
    assert gate.db._value == 3


async def test_a_full_read_is_shared_by_the_streams_that_ask_together() -> None:
    gate = _gate(share=1)
    calls = 0
    release = asyncio.Event()

    async def read() -> int:
        nonlocal calls
        calls += 1
        await release.wait()
        return calls

    waiting = [asyncio.ensure_future(gate.once(("kb", 1, 2), 60, read)) for _ in range(50)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*waiting) == [1] * 50 and calls == 1
    assert await gate.once(("kb", 1, 2), 60, read) == 1  # still fresh
    assert await gate.once(("kb", 1, 3), 60, read) == 2  # another KB: its own read
    assert await gate.once(("kb", 1, 2), 0, read) == 3  # stale: read again


async def test_a_failed_shared_read_is_not_reused() -> None:
    gate = _gate()
    answers: list[int | Exception] = [RuntimeError("down"), 7]

    async def read() -> int:
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    with pytest.raises(RuntimeError):
        await gate.once(("kb", 1, 1), 60, read)
    assert await gate.once(("kb", 1, 1), 60, read) == 7
