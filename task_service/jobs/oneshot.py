"""The jobs as one-pass operator commands (``rag ops <job> --once``) and the set-up they share.

:data:`OPS` maps each job's command name to a function that builds the job from the settings
(``.env`` / environment, as the worker does), runs one pass now, closes what it opened and
returns a JSON-able report. The worker itself builds its jobs in ``task_service/__main__.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import asyncpg
from aio_pika.abc import AbstractChannel, AbstractConnection

from shared.adapters import rabbitmq
from shared.adapters.postgres.pg_store import PgMaintenance
from shared.adapters.postgres.pool import PoolConfig, create_pool
from shared.adapters.s3 import ObjectStore, StorageConfig
from shared.log import configure
from shared.settings import WorkerSettings
from task_service import APP_ID
from task_service.jobs import ann_indexer, cache_evictor, metrics_sampler, relay, scanner, sweep, term_stats
from task_service.metrics import WorkerMetrics

OneShot = tuple[WorkerSettings, asyncpg.Pool, AbstractConnection, AbstractChannel]
Report = dict[str, Any]


@contextlib.asynccontextmanager
async def with_pool(name: str) -> AsyncIterator[tuple[WorkerSettings, asyncpg.Pool]]:
    """Settings (logging configured from them) and a small pool named ``name``; closed after."""
    settings = WorkerSettings()
    configure(settings.log_level, json_lines=settings.log_json)
    pool = await create_pool(PoolConfig.from_settings(settings, max_size=2), app_name=name)
    try:
        yield settings, pool
    finally:
        await pool.close()


@contextlib.asynccontextmanager
async def one_shot(name: str) -> AsyncIterator[OneShot]:
    """:func:`with_pool` plus a broker connection with the topology declared; all closed after."""
    async with with_pool(name) as (settings, pool):
        broker = rabbitmq.BrokerConfig.from_settings(settings)
        conn = await rabbitmq.open_connection(broker, name=name)
        try:
            channel = await conn.channel()
            await rabbitmq.declare_topology(channel, delay_ms=broker.delay_ms)
            yield settings, pool, conn, channel
        finally:
            await conn.close()


async def relay_now() -> Report:
    """Publish every unpublished outbox row now (held rows as fair dispatch allows):
    {"published": n}."""
    async with one_shot("task_service.relay") as (settings, pool, conn, _):
        publisher = await rabbitmq.open_publisher(rabbitmq.BrokerConfig.from_settings(settings), conn, app_id=APP_ID)
        return {"published": await relay.drain(pool, publisher, settings.dispatch_limit)}


async def scan_now() -> Report:
    """One pass of the recovery scanner with the configured thresholds (`rag requeue-stuck` takes
    others): {"timed_out": [task ids], "republished": [...], "dead_lettered": [...]}."""
    async with one_shot("task_service.scanner") as (settings, pool, _, channel):
        return dataclasses.asdict(await scanner.once(pool, channel, scanner.thresholds(settings)))


async def sweep_now() -> Report:
    """Remove released and orphaned objects now (no broker needed): {"released": n, "orphans": n}."""
    async with with_pool("task_service.sweep") as (settings, pool):
        report = await sweep.once(pool, ObjectStore(StorageConfig.from_settings(settings)),
                                  grace_s=settings.orphan_grace_s)
    return {"released": report.released, "orphans": len(report.orphans)}


async def evict_now() -> Report:
    """One embedding-cache eviction pass: {"evicted": rows, or null when another pass was running}."""
    async with with_pool("task_service.cache_evictor") as (settings, pool):
        return {"evicted": await cache_evictor.once(PgMaintenance(pool), settings.embedding_cache_max_rows)}


async def ann_now() -> Report:
    """Add the vectors of knowledge bases above SEARCH_EXACT_MAX_CHUNKS to the HNSW index now:
    {"added": rows}."""
    async with with_pool("task_service.ann_indexer") as (settings, pool):
        return {"added": await ann_indexer.once(PgMaintenance(pool), batch=settings.ann_index_batch,
                                                exact_max_chunks=settings.search_exact_max_chunks)}


async def fold_now() -> Report:
    """Fold every pending delta of the keyword statistics per KB now: {"folded": deltas,
    "dropped": terms no chunk holds any more, "pending": deltas left (appended meanwhile)}."""
    async with with_pool("task_service.term_stats") as (_, pool):
        return await term_stats.fold_all(PgMaintenance(pool))


async def sample_now() -> Report:
    """One sample of the worker's sampled gauges: {gauge: value, or {label: value}}."""
    async with one_shot("task_service.metrics_sampler") as (_, pool, _conn, channel):
        metrics = WorkerMetrics.unregistered()
        await metrics_sampler.once(metrics, PgMaintenance(pool), channel)
    return gauges(metrics)


def gauges(metrics: WorkerMetrics) -> Report:
    """The gauges of ``metrics``: ``{name: value}``, or ``{name: {label values: value}}``."""
    out: Report = {}
    for family in metrics.registry.collect():
        if family.type != "gauge":
            continue
        for s in family.samples:
            if s.labels:
                out.setdefault(s.name, {})[",".join(s.labels.values())] = s.value
            else:
                out[s.name] = s.value
    return out


#: ``rag ops <name> --once``: each function's docstring is the command's help.
OPS: dict[str, Callable[[], Coroutine[Any, Any, Report]]] = {
    "relay": relay_now,
    "scanner": scan_now,
    "sweep": sweep_now,
    "cache-evictor": evict_now,
    "ann-indexer": ann_now,
    "metrics-sampler": sample_now,
    "term-stats": fold_now,
}
