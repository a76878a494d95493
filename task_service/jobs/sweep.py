"""Periodic orphan-object sweep (see :mod:`task_service.cleanup`): runs every
``ORPHAN_SWEEP_INTERVAL_S`` inside each worker, the first after one period (removals are
idempotent and the queue is claimed with SKIP LOCKED, so concurrent sweeps are safe);
``rag ops sweep --once`` runs one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import asyncpg

from shared.adapters.s3 import ObjectStore
from shared.settings import WorkerSettings
from task_service.cleanup import SweepReport, sweep_orphans

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepConfig:
    """The sweep job's settings: ``ORPHAN_SWEEP_INTERVAL_S`` (0 disables), ``ORPHAN_GRACE_S`` (seconds)."""

    interval_s: float
    grace_s: float

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> SweepConfig:
        return cls(interval_s=s.orphan_sweep_interval_s, grace_s=s.orphan_grace_s)


async def once(pool: asyncpg.Pool, store: ObjectStore, *, grace_s: float) -> SweepReport:
    """One sweep (:func:`task_service.cleanup.sweep_orphans`), logged when it removed anything.
    Raises ``TransientError`` (database or object store unavailable)."""
    report = await sweep_orphans(pool, store, grace_s=grace_s)
    if report.released or report.orphans:
        log.info("orphan sweep", extra={"released": report.released, "orphans": len(report.orphans),
                                        "listed": report.listed})
    return report
