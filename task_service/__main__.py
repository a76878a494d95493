"""Composition root of the worker: ``python -m task_service`` runs one worker process.

Builds settings, checks parsers and the model are installed (fail at start-up, not mid-task),
applies migrations, opens PostgreSQL / Redis / object storage, then consumes until SIGTERM.

SIGTERM / SIGINT: stop consuming, abandon in-flight work (``Consumer.abandon``: handler tasks
cancelled, sandbox child killed), close connections — the broker requeues the unacked
deliveries — and exit, within ``SHUTDOWN_GRACE_S`` seconds: blocking calls run on daemon threads
(``threads.DaemonThreadPool``) that exit does not wait for, and if anything still hangs the
process exits anyway when the grace period is over.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

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
from task_service.pipeline.parse import ensure_parsers_ready
from task_service.pipeline.sandbox import SandboxedParser, parser_from_settings
from task_service.relay import relay_forever
from task_service.scanner import scan_forever
from task_service.threads import DaemonThreadPool

log = logging.getLogger("task_service")
SHUTDOWN_GRACE_S = 8.0  # after SIGTERM: then the process exits whatever still runs
CLOSE_TIMEOUT_S = 3.0  # per connection pool / client closed at shutdown


async def run(settings: WorkerSettings) -> None:
    name = settings.worker_name or f"task_service@{socket.gethostname()}:{os.getpid()}"
    loop = asyncio.get_running_loop()
    loop.set_default_executor(DaemonThreadPool(16, "task-service"))
    parser = parser_from_settings(settings)
    if isinstance(parser, SandboxedParser):
        # parsers and the tokenizer load and warm in the sandbox child; a missing model fails
        # here, not mid-task
        await asyncio.to_thread(parser.start, wait_ready=True)
    else:
        ensure_parsers_ready()
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
    stop = asyncio.Event()
    relay_wake = asyncio.Event()  # set after each delivery: a finished task frees a dispatch slot
    handler = IndexHandler(
        settings=settings, pool=pool, redis=redis, store=store, embedder=embedder,
        parse=parser, worker_name=name, on_delivery_done=relay_wake.set,
    )

    def on_signal(sig: signal.Signals) -> None:
        if not stop.is_set():
            log.info("stopping: in-flight work is abandoned (redelivered to the next worker)",
                     extra={"signal": sig.name})
            timer = threading.Timer(SHUTDOWN_GRACE_S, _exit_now)  # a thread: fires even if the loop is stuck
            timer.daemon = True
            timer.start()
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)

    background: list[asyncio.Task[None]] = []

    async def on_connected(conn: AbstractConnection) -> None:
        """(Re)start the outbox relay and the recovery scanner on the new connection."""
        for t in background:
            t.cancel()
        background.clear()
        publisher = await amqp.Publisher.open(conn, settings.amqp_publish_timeout_s)
        background.append(asyncio.create_task(
            relay_forever(pool, publisher, interval_s=settings.relay_interval_s,
                          grace_s=settings.relay_grace_s, dispatch_limit=settings.dispatch_limit,
                          stop=stop, wake=relay_wake)
        ))
        if settings.scan_interval_s > 0:
            background.append(asyncio.create_task(scan_forever(pool, await conn.channel(), settings, stop)))

    log.info("worker starting", extra={"worker": name, "prefetch": settings.prefetch,
                                       "dispatch_per_user": settings.dispatch_limit})
    try:
        await Consumer(settings, handler, name).run(stop, on_connected)
    finally:
        for t in background:
            t.cancel()
        parser.close()  # kills the sandbox child, even one still working for an abandoned task
        await _close(pool.close(), "database pool", on_timeout=pool.terminate)
        await _close(redis.aclose(), "redis")
        close = getattr(embedder, "aclose", None)
        if close is not None:
            await _close(close(), "embedder")
    log.info("worker stopped")


async def _close(closing: Awaitable[Any], what: str, on_timeout: Callable[[], Any] | None = None) -> None:
    try:
        await asyncio.wait_for(closing, CLOSE_TIMEOUT_S)
    except (TimeoutError, OSError) as exc:
        log.warning("could not close cleanly", extra={"what": what, "error": f"{type(exc).__name__}: {exc}"})
        if on_timeout is not None:
            on_timeout()


def _exit_now() -> None:
    """The grace period after SIGTERM is over: exit without waiting for anything."""
    log.error("shutdown grace period over; exiting now", extra={"grace_s": SHUTDOWN_GRACE_S})
    logging.shutdown()
    os._exit(1)


def main() -> None:
    try:
        settings = WorkerSettings()
    except ConfigurationError as exc:
        print(f"task_service: refusing to start: {exc}", file=sys.stderr)
        sys.exit(2)
    configure(settings.log_level, json_lines=settings.log_json)
    asyncio.run(run(settings))
    # Everything is closed. Skip the interpreter's finalization: a daemon thread abandoned in a
    # forward pass (torch's C++ code) makes it abort ("terminate called without an active
    # exception", SIGABRT, measured on SIGTERM mid-embedding).
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    main()
