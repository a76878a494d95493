"""Term frequencies for the keyword ranking's weights, read once and cached (issue 20, item 3).

The keyword score weighs a query term by ``idf²`` with ``idf = ln(1 + 1/df)``, ``df`` the share of
chunks holding the term (:mod:`knowledge_service.search.retrieval`). The shares of the frequent
terms come from PostgreSQL's statistics of ``document_chunk.content_tsv`` (``pg_stats``:
``most_common_elems`` / ``most_common_elem_freqs``, up to 10 x the statistics target lexemes,
refreshed by ANALYZE / autovacuum) and the row count, the larger of ``pg_class.reltuples`` (as of the
last ANALYZE: 0 or -1 on a new table) and the live-row counter of the statistics system (so a unique
identifier weighs more than a common word from the first documents on). Reading and
un-nesting them cost every query several ms (the ``anyarray`` → ``text[]`` cast of ~1,000
lexemes); they change only when ANALYZE runs, so the API reads them at most once per
``ttl_s`` seconds and passes them to the ranking statement as two arrays.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

_READ = r"""
SELECT coalesce(array_agg(e.elem ORDER BY e.elem), '{}') AS elems,
       coalesce(array_agg(e.freq::float8 ORDER BY e.elem), '{}') AS freqs,
       (SELECT greatest(c.reltuples, coalesce(pg_stat_get_live_tuples(c.oid), 0), 1)::float8
          FROM pg_class c WHERE c.oid = 'document_chunk'::regclass) AS rows
  FROM pg_stats s, unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS e(elem, freq)
 WHERE s.schemaname = current_schema() AND s.tablename = 'document_chunk' AND s.attname = 'content_tsv'
   AND e.elem IS NOT NULL
"""


@dataclass(frozen=True)
class TermStats:
    """``elems[i]`` is held by a share ``freqs[i]`` (0..1) of the ``rows`` chunks (``rows`` ≥ 1, an
    estimate). Empty arrays: no statistics yet (a new table); every term then weighs the same."""

    elems: tuple[str, ...]
    freqs: tuple[float, ...]
    rows: float


async def read_term_stats(conn: asyncpg.Connection) -> TermStats:
    """The current statistics of ``document_chunk.content_tsv`` (one statement)."""
    r = await conn.fetchrow(_READ)
    rows = float(r["rows"]) if r is not None and r["rows"] is not None else 1.0
    if r is None:
        return TermStats((), (), rows)
    return TermStats(tuple(r["elems"]), tuple(float(f) for f in r["freqs"]), rows)


class TermStatsCache:
    """:func:`read_term_stats`, re-read when the copy is older than ``ttl_s`` seconds (one reader at
    a time; the others wait for its result). Raises ValueError if ``ttl_s`` < 0."""

    def __init__(self, ttl_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl_s < 0:
            raise ValueError("ttl_s must be >= 0")
        self.ttl_s = ttl_s
        self._clock = clock
        self._stats: TermStats | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()
        self.reads = 0  #: statistics read so far

    def _fresh(self) -> TermStats | None:
        if self._stats is not None and self._clock() - self._read_at < self.ttl_s:
            return self._stats
        return None

    async def get(self, conn: asyncpg.Connection) -> TermStats:
        """The cached statistics, read through ``conn`` when missing or stale."""
        got = self._fresh()
        if got is not None:
            return got
        async with self._lock:
            got = self._fresh()
            if got is None:
                got = await read_term_stats(conn)
                self._stats, self._read_at = got, self._clock()
                self.reads += 1
            return got
