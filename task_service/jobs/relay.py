"""Outbox relay: releases held task messages fairly across users, and publishes what the API
committed but could not publish.

Each pass first releases held rows (``outbox_repo.release_held_outbox``: round-robin across users,
at most ``DISPATCH_PER_USER`` (K) tasks of one user in the broker or running), then publishes
released rows: claimed with ``FOR UPDATE SKIP LOCKED`` (several relays may run), published with
confirms, and marked published only after the broker's ack. A pass runs every
``RELAY_INTERVAL_S`` and at once when woken (the worker wakes it when a task ends: a slot is
free). ``rag ops relay --once`` runs passes until nothing is left to do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import asyncpg

from shared.adapters import rabbitmq
from shared.adapters.postgres.pool import connection
from shared.adapters.postgres.repo import outbox as outbox_repo
from shared.domain.errors import BrokerUnavailableError
from shared.settings import WorkerSettings

log = logging.getLogger(__name__)
BATCH = 100  # rows per pass; a full batch runs the next pass at once


async def once(pool: asyncpg.Pool, publisher: rabbitmq.Publisher, *, grace_s: float, dispatch_limit: int,
               batch: int = BATCH) -> int:
    """Release held rows (``dispatch_limit`` = K per user), then publish one batch of released
    rows: those this pass released, and older ones the inline publish left (``grace_s``).
    Returns how many were published."""
    published = 0
    async with connection(pool) as conn:
        released = await outbox_repo.release_held_outbox(conn, dispatch_limit, batch)
    if released:
        log.info("outbox rows released", extra={"released": len(released)})
    async with connection(pool) as conn, conn.transaction():
        rows = await outbox_repo.claim_pending_outbox(conn, grace_s, batch, released)
        for row in rows:
            try:
                await publisher.publish(
                    row.body, exchange=row.exchange, routing_key=row.routing_key, message_id=str(row.message_id),
                    correlation_id=str(row.task_id), headers=row.headers,
                )
            except BrokerUnavailableError as exc:
                await outbox_repo.note_publish_failure(conn, row.id, str(exc))
                break
            await outbox_repo.mark_published(conn, row.id)
            published += 1
    if published:
        log.info("outbox relayed", extra={"published": published})
    return published


@dataclass(frozen=True)
class RelayConfig:
    """The relay job's settings: ``RELAY_INTERVAL_S``, ``RELAY_GRACE_S`` (seconds) and K
    (``CommonSettings.dispatch_limit``)."""

    interval_s: float
    grace_s: float
    dispatch_limit: int

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> RelayConfig:
        return cls(interval_s=s.relay_interval_s, grace_s=s.relay_grace_s, dispatch_limit=s.dispatch_limit)


def full(published: int) -> bool:
    """A full batch was published: more may be waiting, so the next pass runs at once."""
    return published >= BATCH


async def drain(pool: asyncpg.Pool, publisher: rabbitmq.Publisher, dispatch_limit: int) -> int:
    """Passes (no grace, large batches) until nothing is left to publish; how many were published."""
    total = 0
    while n := await once(pool, publisher, grace_s=0.0, dispatch_limit=dispatch_limit, batch=10_000):
        total += n
    return total
