"""Composition root of the worker: ``python -m task_service`` runs one worker process.

Builds settings, checks parsers and the model are installed (fail at start-up, not mid-task),
applies migrations, opens PostgreSQL / Redis / object storage, then consumes until SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys

import redis.asyncio as aioredis
from aio_pika.abc import AbstractConnection

from shared import amqp
from shared.db import create_pool
from shared.embedding.configured import embedder_from_settings
from shared.errors import ConfigurationError
from shared.log import configure
from shared.migrate import migrate
from shared.settings import WorkerSettings
from shared.storage import ObjectStore
from task_service.consumer import Consumer
from task_service.handler import IndexHandler
from task_service.pipeline.chunk import Chunker, load_minilm_tokenizer
from task_service.pipeline.parse import ensure_parsers_ready
from task_service.pipeline.sandbox import SandboxedParser, parser_from_settings
from task_service.relay import relay_forever
from task_service.scanner import scan_forever

log = logging.getLogger("task_service")


async def run(settings: WorkerSettings) -> None:
    name = settings.worker_name or f"task_service@{socket.gethostname()}:{os.getpid()}"
    parser = parser_from_settings(settings)
    if isinstance(parser, SandboxedParser):
        # parsers load and warm in the sandbox child; a missing model fails here, not mid-task
        await asyncio.to_thread(parser.start, wait_ready=True)
    else:
        ensure_parsers_ready()
    chunker = Chunker(load_minilm_tokenizer(), settings.chunk_max_tokens, settings.chunk_overlap_tokens)
    embedder = embedder_from_settings(settings)
    await migrate(settings.database_url)
    pool = await create_pool(settings, app_name=name)
    redis = aioredis.from_url(
        settings.redis_url.get_secret_value(),
        socket_timeout=settings.redis_timeout_s,
        socket_connect_timeout=settings.redis_timeout_s,
    )
    store = ObjectStore(settings)
    await store.ensure_bucket()
    handler = IndexHandler(
        settings=settings, pool=pool, redis=redis, store=store, embedder=embedder,
        chunker=chunker, parse=parser, worker_name=name,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    background: list[asyncio.Task[None]] = []

    async def on_connected(conn: AbstractConnection) -> None:
        """(Re)start the outbox relay and the recovery scanner on the new connection."""
        for t in background:
            t.cancel()
        background.clear()
        publisher = await amqp.Publisher.open(conn, settings.amqp_publish_timeout_s)
        background.append(asyncio.create_task(
            relay_forever(pool, publisher, interval_s=settings.relay_interval_s,
                          grace_s=settings.relay_grace_s, stop=stop)
        ))
        if settings.scan_interval_s > 0:
            background.append(asyncio.create_task(scan_forever(pool, await conn.channel(), settings, stop)))

    log.info("worker starting", extra={"worker": name, "prefetch": settings.prefetch})
    try:
        await Consumer(settings, handler, name).run(stop, on_connected)
    finally:
        for t in background:
            t.cancel()
        await pool.close()
        await redis.aclose()
        close = getattr(embedder, "aclose", None)
        if close is not None:
            await close()
    log.info("worker stopped")


def main() -> None:
    try:
        settings = WorkerSettings()
    except ConfigurationError as exc:
        print(f"task_service: refusing to start: {exc}", file=sys.stderr)
        sys.exit(2)
    configure(settings.log_level, json_lines=settings.log_json)
    asyncio.run(run(settings))


if __name__ == "__main__":
    main()
