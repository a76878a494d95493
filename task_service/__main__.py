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
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any

import asyncpg
import redis.asyncio as aioredis
import typer
from aio_pika.abc import AbstractConnection
from prometheus_client import CollectorRegistry

from shared.adapters import rabbitmq
from shared.adapters.embedding import Embedder
from shared.adapters.embedding.configured import EmbedderConfig, build_configured
from shared.adapters.postgres.migrate import migrate
from shared.adapters.postgres.pg_store import PgMaintenance, PgReleasedObjects, PgWorkerStore
from shared.adapters.postgres.pool import PoolConfig, create_pool
from shared.adapters.redis_lock import DocumentLock, RedisConfig
from shared.adapters.redis_lock import connect as redis_connect
from shared.adapters.s3 import ObjectStore, StorageConfig
from shared.domain.errors import ConfigurationError, DependencyMissingError
from shared.log import configure
from shared.settings import WorkerSettings
from task_service import APP_ID
from task_service.consumer import Consumer, ConsumerConfig
from task_service.indexing.config import HandlerConfig
from task_service.indexing.delivery import IndexHandler
from task_service.jobs import ann_indexer, cache_evictor, every, metrics_sampler, relay, scanner, sweep, term_stats
from task_service.jobs.ann_indexer import AnnConfig
from task_service.jobs.cache_evictor import EvictConfig
from task_service.jobs.relay import RelayConfig
from task_service.jobs.scanner import ScanConfig
from task_service.jobs.sweep import SweepConfig
from task_service.jobs.term_stats import FoldConfig
from task_service.metrics import WorkerMetrics, serve
from task_service.pipeline.parse import ensure_parsers_ready
from task_service.pipeline.sandbox import InProcessParser, ParserConfig, SandboxedParser, build_parser
from task_service.threads import DaemonThreadPool

log = logging.getLogger("task_service")
SHUTDOWN_GRACE_S = 8.0  # after SIGTERM: then the process exits whatever still runs
CLOSE_TIMEOUT_S = 3.0  # per connection pool / client closed at shutdown


@dataclass(frozen=True)
class _Resources:
    """What one worker process opens (and closes at the end)."""

    pool: asyncpg.Pool
    redis: aioredis.Redis
    store: ObjectStore
    parser: SandboxedParser | InProcessParser
    embedder: Embedder


async def _open(settings: WorkerSettings, name: str) -> _Resources:
    """Parsers and the model first (a missing one fails here, not mid-task), then migrations,
    PostgreSQL, Redis and the object store."""
    parser = build_parser(ParserConfig.from_settings(settings))
    if isinstance(parser, SandboxedParser):
        # parsers and the tokenizer load and warm in the sandbox child
        await asyncio.to_thread(parser.start, wait_ready=True)
    else:
        ensure_parsers_ready()
    embedder = build_configured(EmbedderConfig.from_settings(settings, threads=settings.embedding_threads or None))
    await migrate(settings.database_url)
    pool = await create_pool(PoolConfig.from_settings(settings), app_name=name)
    redis = redis_connect(RedisConfig.from_settings(settings))
    store = ObjectStore(StorageConfig.from_settings(settings))
    await store.ensure_bucket()
    return _Resources(pool, redis, store, parser, embedder)


def _on_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """SIGTERM / SIGINT set ``stop`` and arm the exit timer (``SHUTDOWN_GRACE_S``)."""

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


async def run(settings: WorkerSettings) -> None:
    name = settings.worker_name or f"task_service@{socket.gethostname()}:{os.getpid()}"
    loop = asyncio.get_running_loop()
    loop.set_default_executor(DaemonThreadPool(16, "task-service"))
    r = await _open(settings, name)
    stop = asyncio.Event()
    relay_wake = asyncio.Event()  # set after each delivery: a finished task frees a dispatch slot
    metrics = WorkerMetrics(CollectorRegistry())
    metrics_server = serve(metrics, settings.worker_metrics_host, settings.worker_metrics_port) \
        if settings.worker_metrics_port else None
    handler = IndexHandler(
        config=HandlerConfig.from_settings(settings), db=PgWorkerStore(r.pool, settings.dispatch_limit),
        lock=lambda document_id, part: DocumentLock(r.redis, document_id, settings.lock_ttl_s, part),
        objects=r.store, released=PgReleasedObjects(r.pool, r.store), embedder=r.embedder, parse=r.parser,
        worker_name=name, metrics=metrics, on_delivery_done=relay_wake.set,
    )
    _on_signals(loop, stop)
    jobs = _Jobs.from_settings(settings, sample=metrics_server is not None)
    background: list[asyncio.Task[None]] = []

    async def on_connected(conn: AbstractConnection) -> None:
        """(Re)start the outbox relay, the recovery scanner and the metrics sampler on the new connection."""
        for t in background:
            t.cancel()
        background[:] = await _start_background(conn, r.pool, jobs, stop, metrics, relay_wake)

    lifelong = _start_lifelong(r.pool, r.store, jobs, stop)
    runtime = getattr(r.embedder, "runtime", settings.embedding_provider)  # the local model's, else the provider
    log.info("worker starting", extra={"worker": name, "prefetch": settings.prefetch,
                                       "dispatch_per_user": settings.dispatch_limit,
                                       "embedding_model": r.embedder.model_name, "embedding_runtime": runtime,
                                       "embedding_variant": getattr(r.embedder, "variant", "")})
    try:
        await Consumer(ConsumerConfig.from_settings(settings), handler, name).run(stop, on_connected)
    finally:
        for t in [*background, *lifelong]:
            t.cancel()
        if metrics_server is not None:
            metrics_server.shutdown()
        await _shutdown(r, handler)
    log.info("worker stopped")


async def _shutdown(r: _Resources, handler: IndexHandler) -> None:
    r.parser.close()  # kills the sandbox child, even one still working for an abandoned task
    await handler.flush()  # delivery_skip rows still being written
    await _close(r.pool.close(), "database pool", on_timeout=r.pool.terminate)
    await _close(r.redis.aclose(), "redis")
    close = getattr(r.embedder, "aclose", None)
    if close is not None:
        await _close(close(), "embedder")


@dataclass(frozen=True)
class _Jobs:
    """The periodic jobs' settings, built once: relay, scanner, sweep, cache eviction, the ANN
    job, and the gauge sampler (``sample``: metrics are served; ``sample_s`` its period)."""

    relay: RelayConfig
    scan: ScanConfig
    sweep: SweepConfig
    evict: EvictConfig
    ann: AnnConfig
    fold: FoldConfig
    broker: rabbitmq.BrokerConfig
    sample: bool
    sample_s: float

    @classmethod
    def from_settings(cls, s: WorkerSettings, *, sample: bool) -> _Jobs:
        return cls(relay=RelayConfig.from_settings(s), scan=ScanConfig.from_settings(s),
                   sweep=SweepConfig.from_settings(s), evict=EvictConfig.from_settings(s),
                   ann=AnnConfig.from_settings(s),
                   fold=FoldConfig.from_settings(s),
                   broker=rabbitmq.BrokerConfig.from_settings(s), sample=sample, sample_s=s.worker_metrics_sample_s)


def _start_lifelong(pool: asyncpg.Pool, store: ObjectStore, jobs: _Jobs,
                    stop: asyncio.Event) -> list[asyncio.Task[None]]:
    """The jobs that need no broker, for the worker's lifetime: the orphan sweep (first pass after
    one period; interval 0 disables it), the embedding-cache evictor (not when the cache is
    disabled: max rows 0), the fold of the keyword statistics per KB and the ANN job (interval 0
    disables it)."""
    maintenance = PgMaintenance(pool)
    tasks = [asyncio.create_task(every("term statistics fold", partial(term_stats.once, maintenance),
                                       jobs.fold.interval_s, stop, again=term_stats.full))]
    if jobs.sweep.interval_s > 0:
        tasks.append(asyncio.create_task(every(
            "orphan sweep", partial(sweep.once, pool, store, grace_s=jobs.sweep.grace_s),
            jobs.sweep.interval_s, stop, delay_first=True)))
    if jobs.evict.max_rows > 0:
        tasks.append(asyncio.create_task(every(
            "embedding cache eviction", partial(cache_evictor.once, maintenance, jobs.evict.max_rows),
            jobs.evict.interval_s, stop)))
    if jobs.ann.interval_s > 0:
        tasks.append(asyncio.create_task(every(
            "ANN index pass", partial(ann_indexer.once, maintenance, batch=jobs.ann.batch,
                                      exact_max_chunks=jobs.ann.exact_max_chunks),
            jobs.ann.interval_s, stop)))
    return tasks


async def _start_background(conn: AbstractConnection, pool: asyncpg.Pool, jobs: _Jobs, stop: asyncio.Event,
                            metrics: WorkerMetrics, relay_wake: asyncio.Event) -> list[asyncio.Task[None]]:
    """The jobs that need the broker, (re)started on each connection ``conn``, each on its own
    channel: the outbox relay, the recovery scanner and (when metrics are served) the gauge sampler."""
    publisher = await rabbitmq.open_publisher(jobs.broker, conn, app_id=APP_ID,
                                              on_failure=metrics.publish_failures.labels("relay").inc)
    tasks = [asyncio.create_task(every(
        "outbox relay pass", partial(relay.once, pool, publisher, grace_s=jobs.relay.grace_s,
                                     dispatch_limit=jobs.relay.dispatch_limit),
        jobs.relay.interval_s, stop, wake=relay_wake, again=relay.full))]
    if jobs.scan.interval_s > 0:
        tasks.append(asyncio.create_task(every(
            "scan", partial(scanner.once, pool, await conn.channel(), jobs.scan.thresholds, metrics),
            jobs.scan.interval_s, stop, errors=scanner.ERRORS)))
    if jobs.sample:
        tasks.append(asyncio.create_task(every(
            "metrics sampling", partial(metrics_sampler.once, metrics, PgMaintenance(pool), await conn.channel()),
            jobs.sample_s, stop, errors=metrics_sampler.ERRORS)))
    return tasks


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


def start_worker() -> None:
    """Build settings and run one worker until SIGTERM/SIGINT (exit 2 on invalid settings or a
    missing dependency: the model, its ONNX graph, a parser; all are loaded before consuming)."""
    try:
        settings = WorkerSettings()
    except ConfigurationError as exc:
        print(f"task_service: refusing to start: {exc}", file=sys.stderr)
        sys.exit(2)
    configure(settings.log_level, json_lines=settings.log_json)
    try:
        asyncio.run(run(settings))
    except DependencyMissingError as exc:  # raised by _open, before the first delivery
        print(f"task_service: refusing to start: {exc}", file=sys.stderr)
        sys.exit(2)
    # Everything is closed. Skip the interpreter's finalization: a daemon thread abandoned in a
    # forward pass (torch's C++ code) makes it abort ("terminate called without an active
    # exception", SIGABRT, measured on SIGTERM mid-embedding).
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(0)


def main() -> None:
    """``python -m task_service [--metrics-port N]``; ``--help`` prints help and starts nothing."""
    cli = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})
    cli.command(help="Start one indexing worker (consumes rag.index.queue until SIGTERM). Settings come from "
                     "the environment and .env (see .env.example); `rag worker` is the same command.")(worker)
    cli()


def worker(
    metrics_port: Annotated[int | None, typer.Option(
        "--metrics-port", help="serve /metrics on this port (WORKER_METRICS_PORT; 0: off)", min=0, max=65535)] = None,
) -> None:
    if metrics_port is not None:
        os.environ["WORKER_METRICS_PORT"] = str(metrics_port)
    start_worker()


if __name__ == "__main__":
    main()
