"""Outbox relay: releases held task messages fairly across users, and publishes what the API
committed but could not publish.

Each pass first releases held rows (``outbox_repo.release_held_outbox``: round-robin across users,
at most ``DISPATCH_PER_USER`` (K) tasks of one user in the broker or running), then publishes
released rows: claimed with ``FOR UPDATE SKIP LOCKED`` (several relays may run), published with
confirms, and marked published only after the broker's ack. A pass runs every
``RELAY_INTERVAL_S`` and at once when woken (the worker wakes it when a task ends: a slot is
free). ``python -m task_service.relay --once`` runs passes until nothing is left to do.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import dataclass

import asyncpg

from shared.adapters import rabbitmq
from shared.adapters.postgres.pool import connection
from shared.adapters.postgres.repo import outbox as outbox_repo
from shared.domain.errors import BrokerUnavailableError, TransientError
from shared.settings import WorkerSettings
from task_service import APP_ID
from task_service.oneshot import one_shot

log = logging.getLogger(__name__)


async def relay_once(pool: asyncpg.Pool, publisher: rabbitmq.Publisher, *, grace_s: float, dispatch_limit: int,
                     batch: int = 100) -> int:
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
                    row.body, exchange=row.exchange, routing_key=row.routing_key, message_id=str(row.message_id)
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
    """The relay loop's settings: ``RELAY_INTERVAL_S``, ``RELAY_GRACE_S`` (seconds) and K
    (``CommonSettings.dispatch_limit``)."""

    interval_s: float
    grace_s: float
    dispatch_limit: int

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> RelayConfig:
        return cls(interval_s=s.relay_interval_s, grace_s=s.relay_grace_s, dispatch_limit=s.dispatch_limit)


async def relay_forever(pool: asyncpg.Pool, publisher: rabbitmq.Publisher, config: RelayConfig, *,
                        stop: asyncio.Event, wake: asyncio.Event | None = None) -> None:
    """Run :func:`relay_once` every ``config.interval_s`` seconds, and at once when ``wake`` is set
    (then cleared), until ``stop`` is set or the channel dies. A full batch runs again at once."""
    wake = wake or asyncio.Event()
    while not stop.is_set():
        wake.clear()
        full = False
        try:
            full = await relay_once(pool, publisher, grace_s=config.grace_s,
                                    dispatch_limit=config.dispatch_limit) >= 100
        except TransientError as exc:
            log.warning("outbox relay pass failed", extra={"error": str(exc)})
        if full:
            continue
        await _wait_any(stop, wake, config.interval_s)


async def _wait_any(stop: asyncio.Event, wake: asyncio.Event, timeout_s: float) -> None:
    """Return when ``stop`` or ``wake`` is set, or after ``timeout_s`` seconds."""
    waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()


async def _main_once() -> int:
    async with one_shot("task_service.relay") as (settings, pool, conn, _):
        publisher = await rabbitmq.Publisher.open(conn, settings.amqp_publish_timeout_s, app_id=APP_ID)
        total = 0
        while n := await relay_once(pool, publisher, grace_s=0.0, dispatch_limit=settings.dispatch_limit,
                                    batch=10_000):
            total += n
        return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--once", action="store_true", required=True)
    parser.parse_args()
    print(f"published {asyncio.run(_main_once())}")


if __name__ == "__main__":
    main()
