"""Periodic least-recently-used eviction of the embedding cache (every worker runs it every
``EMBEDDING_CACHE_EVICT_INTERVAL_S``, unless ``EMBEDDING_CACHE_MAX_ROWS=0`` disables the cache; an
advisory lock lets one pass run at a time). ``rag ops cache-evictor --once`` runs one pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from shared.ports import MaintenanceStore
from shared.settings import WorkerSettings

log = logging.getLogger(__name__)
LOW_WATER = 0.9  # a pass above the bound evicts down to 90 % of it


@dataclass(frozen=True)
class EvictConfig:
    """The eviction job's settings: ``EMBEDDING_CACHE_MAX_ROWS`` (0: cache disabled) and
    ``EMBEDDING_CACHE_EVICT_INTERVAL_S`` (seconds)."""

    max_rows: int
    interval_s: float

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> EvictConfig:
        return cls(max_rows=s.embedding_cache_max_rows, interval_s=s.embedding_cache_evict_interval_s)


async def once(store: MaintenanceStore, max_rows: int) -> int | None:
    """One pass: rows deleted, or None when another worker's pass is running.
    Raises ``DatabaseUnavailableError`` (transient)."""
    deleted = await store.cache_evict(max_rows, LOW_WATER)
    if deleted:
        log.info("embedding cache evicted", extra={"rows": deleted, "max_rows": max_rows})
    return deleted
