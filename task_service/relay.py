"""Outbox relay: publishes task messages the API committed but could not publish.

Rows are claimed with ``FOR UPDATE SKIP LOCKED`` (several relays may run), published with
confirms, and marked published only after the broker's ack. ``python -m task_service.relay
--once`` runs one pass.
"""

from __future__ import annotations

import argparse
import asyncio
import logging

import asyncpg

from shared import amqp, queries
from shared.db import translate_errors
from shared.errors import BrokerUnavailableError, TransientError
from task_service import APP_ID
from task_service.oneshot import one_shot

log = logging.getLogger(__name__)


async def relay_once(pool: asyncpg.Pool, publisher: amqp.Publisher, *, grace_s: float, batch: int = 100) -> int:
    """Publish one batch of pending outbox rows; returns how many were published."""
    published = 0
    async with translate_errors(), pool.acquire() as conn, conn.transaction():
        rows = await queries.claim_pending_outbox(conn, grace_s, batch)
        for row in rows:
            try:
                await publisher.publish(
                    row.body, exchange=row.exchange, routing_key=row.routing_key, message_id=str(row.message_id)
                )
            except BrokerUnavailableError as exc:
                await queries.note_publish_failure(conn, row.id, str(exc))
                break
            await queries.mark_published(conn, row.id)
            published += 1
    if published:
        log.info("outbox relayed", extra={"published": published})
    return published


async def relay_forever(pool: asyncpg.Pool, publisher: amqp.Publisher, *, interval_s: float, grace_s: float,
                        stop: asyncio.Event) -> None:
    """Run :func:`relay_once` every ``interval_s`` seconds until ``stop`` is set or the channel dies."""
    while not stop.is_set():
        try:
            await relay_once(pool, publisher, grace_s=grace_s)
        except TransientError as exc:
            log.warning("outbox relay pass failed", extra={"error": str(exc)})
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
        except TimeoutError:
            pass


async def _main_once() -> int:
    async with one_shot("task_service.relay") as (settings, pool, conn, _):
        publisher = await amqp.Publisher.open(conn, settings.amqp_publish_timeout_s, app_id=APP_ID)
        return await relay_once(pool, publisher, grace_s=0.0, batch=10_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--once", action="store_true", required=True)
    parser.parse_args()
    print(f"published {asyncio.run(_main_once())}")


if __name__ == "__main__":
    main()
