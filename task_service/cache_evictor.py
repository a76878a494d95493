"""Periodic least-recently-used eviction of the embedding cache (every worker runs it; an
advisory lock lets one pass run at a time).

``python -m task_service.cache_evictor --once`` runs one pass and prints the rows deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import dataclass

import asyncpg

from shared.adapters.postgres.pool import connection
from shared.adapters.postgres.repo import cache as cache_repo
from shared.domain.errors import TransientError
from shared.settings import WorkerSettings
from task_service.oneshot import one_shot

log = logging.getLogger(__name__)
LOW_WATER = 0.9  # a pass above the bound evicts down to 90 % of it


async def evict_once(pool: asyncpg.Pool, max_rows: int) -> int | None:
    """One pass: rows deleted, or None when another worker's pass is running.
    Raises ``DatabaseUnavailableError`` (transient)."""
    async with connection(pool) as conn:
        deleted = await cache_repo.cache_evict(conn, max_rows, LOW_WATER)
    if deleted:
        log.info("embedding cache evicted", extra={"rows": deleted, "max_rows": max_rows})
    return deleted


@dataclass(frozen=True)
class EvictConfig:
    """The eviction loop's settings: ``EMBEDDING_CACHE_MAX_ROWS`` (0: cache disabled) and
    ``EMBEDDING_CACHE_EVICT_INTERVAL_S`` (seconds)."""

    max_rows: int
    interval_s: float

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> EvictConfig:
        return cls(max_rows=s.embedding_cache_max_rows, interval_s=s.embedding_cache_evict_interval_s)


async def evict_forever(pool: asyncpg.Pool, config: EvictConfig, stop: asyncio.Event) -> None:
    """Run :func:`evict_once` every ``config.interval_s`` seconds until ``stop`` (returns at once
    when the cache is disabled: ``EMBEDDING_CACHE_MAX_ROWS=0``)."""
    if config.max_rows == 0:
        return
    while not stop.is_set():
        try:
            await evict_once(pool, config.max_rows)
        except TransientError as exc:
            log.warning("embedding cache eviction failed", extra={"error": str(exc)})
        try:
            await asyncio.wait_for(stop.wait(), timeout=config.interval_s)
        except TimeoutError:
            pass


async def _main_once() -> int | None:
    async with one_shot("task_service.cache_evictor") as (settings, pool, _, _channel):
        return await evict_once(pool, settings.embedding_cache_max_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--once", action="store_true", required=True, help="run one pass and exit")
    parser.parse_args()
    print(f"evicted {asyncio.run(_main_once())}")


if __name__ == "__main__":
    main()
