"""Object removal after commit (an adapter: PostgreSQL + object storage).

Storage is never cleaned before the database stops referring to an object: the transaction that
releases an object (a version swapped out by the fenced commit, a pending version replaced or
dropped, a document deleted) writes its key to ``object_removal``; after commit, whoever
committed calls :func:`remove_released` (API request or worker run). What a crash leaves queued is
drained by the worker's orphan sweep (``task_service.cleanup.sweep_orphans``).
"""

from __future__ import annotations

import logging

import asyncpg

from shared.adapters.postgres.pool import connection
from shared.adapters.postgres.repo import objects as objects_repo
from shared.adapters.s3 import ObjectStore
from shared.domain.errors import PermanentError, StorageUnavailableError, TransientError

log = logging.getLogger(__name__)


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


async def remove_released_quietly(pool: asyncpg.Pool, store: ObjectStore, *, at_most: int = 100) -> None:
    """:func:`remove_released` after a commit, batch after batch until about ``at_most`` objects
    are removed or none is left; best effort: a failure leaves the rows queued for the sweep and
    never fails the caller's request or run."""
    try:
        left = at_most
        while left > 0 and (removed := await remove_released(pool, store, batch=min(left, 100))) > 0:
            left -= removed
    except TransientError as exc:
        log.warning("released objects not removed now; left for the sweep", extra={"error": str(exc)})
