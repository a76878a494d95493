"""The keyword ranking's term statistics are read once per TTL (knowledge_service.search.term_stats)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from knowledge_service.search.term_stats import TermStats, TermStatsCache


class FakeConn:
    """Answers the statistics statement; counts the reads; ``delay`` lets readers overlap."""

    def __init__(self, delay: float = 0.0) -> None:
        self.reads = 0
        self.delay = delay

    async def fetchrow(self, query: str) -> dict[str, Any]:
        assert "pg_stats" in query
        self.reads += 1
        await asyncio.sleep(self.delay)
        return {"elems": ["the", "of"], "freqs": [0.9, 0.5], "rows": 1000.0 + self.reads}


async def test_statistics_are_cached_for_ttl_seconds() -> None:
    now = [0.0]
    cache = TermStatsCache(ttl_s=60, clock=lambda: now[0])
    conn = FakeConn()
    first = await cache.get(conn)  # type: ignore[arg-type]
    assert first == TermStats(("the", "of"), (0.9, 0.5), 1001.0)
    now[0] = 59.9
    assert await cache.get(conn) is first  # type: ignore[arg-type]
    now[0] = 60.0
    assert (await cache.get(conn)).rows == 1002.0  # type: ignore[arg-type]
    assert conn.reads == cache.reads == 2


async def test_concurrent_misses_read_once() -> None:
    cache = TermStatsCache(ttl_s=60)
    conn = FakeConn(delay=0.01)
    got = await asyncio.gather(*(cache.get(conn) for _ in range(5)))  # type: ignore[arg-type]
    assert conn.reads == 1 and all(g is got[0] for g in got)


async def test_no_statistics_row_means_empty_arrays() -> None:
    class Empty:
        async def fetchrow(self, query: str) -> None:
            return None

    stats = await TermStatsCache(ttl_s=0).get(Empty())  # type: ignore[arg-type]
    assert stats == TermStats((), (), 1.0)


def test_a_negative_ttl_is_refused() -> None:
    with pytest.raises(ValueError):
        TermStatsCache(ttl_s=-1)
