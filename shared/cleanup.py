"""Object removal after commit, and the orphan sweep (an adapter: PostgreSQL + object storage).

Storage is never cleaned before the database stops referring to an object:

* the transaction that releases an object (a version swapped out by the fenced commit, a
  pending version replaced or dropped, a document deleted) writes its key to ``object_removal``;
  after commit, whoever committed calls :func:`remove_released` (API request or worker run);
* :func:`sweep_orphans` (the worker's periodic job, ``python -m task_service.sweep --once``)
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

from shared.db import connection
from shared.errors import PermanentError, StorageUnavailableError, TransientError
from shared.repo import objects as objects_repo
from shared.storage import ObjectStore

log = logging.getLogger(__name__)

#: Where the API stores uploads (``kb/{kb_id}/{uuid}``); the sweep looks nowhere else.
OBJECT_PREFIX = "kb/"


async def remove_released(pool: asyncpg.Pool, store: ObjectStore, *, batch: int = 100) -> int:
    """Remove one batch of objects queued in ``object_removal`` by committed transactions and
    delete their rows; returns how many objects were removed.

    A key some row refers to again (never expected: keys are never reused) is dropped from the
    queue without touching storage. Storage unavailable: the rest stays queued for the sweep.
    Raises TransientError subclasses (database unavailable).
    """
    removed = 0
    async with connection(pool) as conn, conn.transaction():
        rows = await objects_repo.claim_object_removals(conn, batch)
        if not rows:
            return 0
        free = set(await objects_repo.unreferenced_keys(conn, [k for _, k in rows]))
        done: list[int] = []
        for row_id, key in rows:
            if key in free:
                try:
                    await store.remove(key)
                except StorageUnavailableError as exc:
                    log.warning("released object not removed; left for the sweep",
                                extra={"object_key": key, "error": str(exc)})
                    break
                except PermanentError:  # already gone
                    pass
                removed += 1
            else:
                log.error("object queued for removal is referenced; kept", extra={"object_key": key})
            done.append(row_id)
        await objects_repo.forget_object_removals(conn, done)
    return removed


async def remove_released_quietly(pool: asyncpg.Pool, store: ObjectStore) -> None:
    """:func:`remove_released` after a commit, best effort: a failure leaves the rows queued
    for the sweep and never fails the caller's request or run."""
    try:
        await remove_released(pool, store)
    except TransientError as exc:
        log.warning("released objects not removed now; left for the sweep", extra={"error": str(exc)})


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
