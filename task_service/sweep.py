"""Periodic orphan-object sweep (see :mod:`task_service.cleanup`): runs every
``ORPHAN_SWEEP_INTERVAL_S`` inside each worker (removals are idempotent and the queue is claimed
with SKIP LOCKED, so concurrent sweeps are safe); ``python -m task_service.sweep --once`` runs one.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import dataclass

import asyncpg

from shared.adapters.postgres.pool import PoolConfig, create_pool
from shared.adapters.s3 import ObjectStore, StorageConfig
from shared.domain.errors import TransientError
from shared.log import configure
from shared.settings import WorkerSettings
from task_service.cleanup import sweep_orphans

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepConfig:
    """The sweep loop's settings: ``ORPHAN_SWEEP_INTERVAL_S`` (0 disables), ``ORPHAN_GRACE_S`` (seconds)."""

    interval_s: float
    grace_s: float

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> SweepConfig:
        return cls(interval_s=s.orphan_sweep_interval_s, grace_s=s.orphan_grace_s)


async def sweep_forever(pool: asyncpg.Pool, store: ObjectStore, config: SweepConfig, stop: asyncio.Event) -> None:
    """One sweep every ``config.interval_s`` seconds (the first after one period) until
    ``stop``; returns at once if the interval is 0 (disabled)."""
    if config.interval_s <= 0:
        return
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), timeout=config.interval_s)
            return
        except TimeoutError:
            pass
        try:
            report = await sweep_orphans(pool, store, grace_s=config.grace_s)
        except TransientError as exc:
            log.warning("orphan sweep failed", extra={"error": str(exc)})
            continue
        if report.released or report.orphans:
            log.info("orphan sweep", extra={"released": report.released, "orphans": len(report.orphans),
                                            "listed": report.listed})


async def _main_once() -> tuple[int, int]:
    settings = WorkerSettings()
    configure(settings.log_level, json_lines=settings.log_json)
    pool = await create_pool(PoolConfig.from_settings(settings, max_size=2), app_name="task_service.sweep")
    try:
        report = await sweep_orphans(pool, ObjectStore(StorageConfig.from_settings(settings)),
                                     grace_s=settings.orphan_grace_s)
    finally:
        await pool.close()
    return report.released, len(report.orphans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--once", action="store_true", required=True)
    parser.parse_args()
    released, orphans = asyncio.run(_main_once())
    print(f"released {released}, orphans removed {orphans}")


if __name__ == "__main__":
    main()
