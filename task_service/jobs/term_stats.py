"""Periodic fold of the keyword statistics per knowledge base (sql/0018): every worker moves the
pending ``kb_term_delta`` rows into ``kb_term`` every ``TERM_STATS_FOLD_INTERVAL_S`` seconds (an
advisory lock lets one pass run at a time). Scores never wait for it: the search reads folded
counts plus pending deltas, so folding only keeps that read short. ``rag ops term-stats --once``
folds everything pending now.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import asyncpg

from shared.adapters.postgres.pool import connection
from shared.adapters.postgres.repo import term_stats as term_stats_repo
from shared.adapters.postgres.repo.term_stats import Fold
from shared.settings import WorkerSettings

log = logging.getLogger(__name__)
BATCH = 50_000  # deltas per transaction; a full batch runs the next pass at once


@dataclass(frozen=True)
class FoldConfig:
    """``TERM_STATS_FOLD_INTERVAL_S`` (seconds between passes)."""

    interval_s: float

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> FoldConfig:
        return cls(interval_s=s.term_stats_fold_interval_s)


async def once(pool: asyncpg.Pool, batch: int = BATCH) -> Fold | None:
    """One pass: up to ``batch`` deltas folded, or None when another worker's pass is running.
    Raises ``DatabaseUnavailableError`` (transient)."""
    async with connection(pool) as conn:
        done = await term_stats_repo.fold(conn, batch)
    if done is not None and done.moved:
        log.info("term statistics folded", extra={"deltas": done.moved, "terms_dropped": done.dropped})
    return done


def full(done: Fold | None, batch: int = BATCH) -> bool:
    """The pass moved a whole batch: more is pending, run again at once."""
    return done is not None and done.moved >= batch


async def fold_all(pool: asyncpg.Pool, batch: int = BATCH) -> dict[str, int | None]:
    """Fold until nothing is pending: ``{"folded": deltas, "dropped": terms, "pending": left}``
    (``pending`` is what writers appended meanwhile, or what a concurrent pass holds)."""
    moved = dropped = 0
    while True:
        done = await once(pool, batch)
        if done is None:
            break
        moved, dropped = moved + done.moved, dropped + done.dropped
        if not full(done, batch):
            break
    async with connection(pool) as conn:
        left = await term_stats_repo.pending(conn)
    return {"folded": moved, "dropped": dropped, "pending": left}
