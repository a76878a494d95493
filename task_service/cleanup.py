"""The orphan sweep (the worker's periodic job; an adapter: PostgreSQL + object storage).

Storage is never cleaned before the database stops referring to an object:

* the transaction that releases an object (a version swapped out by the fenced commit, a
  pending version replaced or dropped, a document deleted) writes its key to ``object_removal``;
  after commit, whoever committed calls
  :func:`shared.adapters.object_removal.remove_released` (API request or worker run);
* :func:`sweep_orphans` (the worker's periodic job :mod:`task_service.jobs.sweep`, ``rag ops sweep --once``)
  drains what a crash left in ``object_removal`` and removes objects under ``kb/`` that no row
  refers to and that are older than a grace period: uploads streamed to storage whose request
  died before its rows were written, leftovers of older versions of the code.

The grace period protects uploads in progress (their object exists before their row does): it
must exceed the longest upload.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import asyncpg

from shared.adapters.object_removal import remove_released
from shared.adapters.postgres.pool import connection
from shared.adapters.postgres.repo import objects as objects_repo
from shared.adapters.s3 import ObjectStore
from shared.domain.errors import PermanentError

log = logging.getLogger(__name__)

#: Where the API stores uploads (``kb/{kb_id}/{uuid}``); the sweep looks nowhere else.
OBJECT_PREFIX = "kb/"


@dataclass
class SweepReport:
    released: int = 0  # queued in object_removal, removed
    orphans: list[str] = field(default_factory=list)  # unreferenced and older than the grace, removed
    listed: int = 0


async def sweep_orphans(
    pool: asyncpg.Pool, store: ObjectStore, *, grace_s: float, now: datetime | None = None,
    prefix: str = OBJECT_PREFIX, page: int = 1000,
) -> SweepReport:
    """One sweep: drain ``object_removal``, then remove every object under ``prefix`` that is
    older than ``grace_s`` seconds (storage's ``last_modified`` against ``now``, default the
    current UTC time) and referenced by no document row.

    Raises TransientError subclasses (database or storage unavailable); what was removed stays
    removed and the next sweep goes on.
    """
    report = SweepReport()
    while (n := await remove_released(pool, store)) > 0:
        report.released += n
    cutoff = (now or datetime.now(UTC)) - timedelta(seconds=grace_s)
    start_after: str | None = None
    while True:
        objects = await store.list_page(prefix, start_after, page)
        report.listed += len(objects)
        if not objects:
            break
        start_after = objects[-1][0]
        old = [key for key, modified in objects if modified < cutoff]
        if old:
            async with connection(pool) as conn:
                orphans = await objects_repo.unreferenced_keys(conn, old)
            for key in orphans:
                try:
                    await store.remove(key)
                except PermanentError:
                    continue
                report.orphans.append(key)
                log.info("orphan object removed", extra={"object_key": key})
        if len(objects) < page:
            break
    return report
