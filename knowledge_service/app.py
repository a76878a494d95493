"""``create_app``: the FastAPI application and its lifespan (the API's composition root)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from aio_pika.abc import AbstractConnection
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from knowledge_service import web
from knowledge_service.deps import Resources
from knowledge_service.errors_http import EXCEPTION_HANDLERS
from knowledge_service.metrics import ApiMetrics, UploadResultMiddleware
from knowledge_service.metrics import router as metrics_router
from knowledge_service.routes import health, router
from knowledge_service.security_headers import SecurityHeadersMiddleware
from shared import usecases
from shared.adapters import rabbitmq
from shared.adapters.embedding.configured import embedder_from_settings
from shared.adapters.postgres.migrate import migrate
from shared.adapters.postgres.pool import PoolConfig, create_pool
from shared.adapters.postgres.reads import PgReads
from shared.adapters.redis_lock import connect as redis_connect
from shared.adapters.s3 import POOL_CONNECTIONS as STORAGE_THREADS
from shared.adapters.s3 import ObjectStore, StorageConfig
from shared.bootstrap import usecase_deps
from shared.domain.errors import BrokerUnavailableError
from shared.settings import KnowledgeSettings

log = logging.getLogger("knowledge_service")


async def _open_publisher(settings: KnowledgeSettings, metrics: ApiMetrics,
                          ) -> tuple[AbstractConnection | None, rabbitmq.Publisher | None]:
    """A robust broker connection with the topology declared and a confirmed publisher; (None,
    None) when the broker is down at start-up (uploads then go to the outbox)."""
    try:
        connection = await rabbitmq.connect(
            settings.amqp_url.get_secret_value(), name="knowledge_service", heartbeat_s=settings.amqp_heartbeat_s,
            robust=True,
        )
        channel = await connection.channel()
        await rabbitmq.declare_topology(channel, delay_ms=settings.delay_ms)
        await channel.close()
        publisher = await rabbitmq.Publisher.open(connection, settings.amqp_publish_timeout_s,
                                                  app_id="knowledge_service",
                                                  on_failure=metrics.publish_failures.labels("api").inc)
    except BrokerUnavailableError as exc:
        log.error("broker unavailable at start-up; uploads go to the outbox", extra={"error": str(exc)})
        return None, None
    return connection, publisher


async def _open(settings: KnowledgeSettings, metrics: ApiMetrics) -> tuple[Resources, AbstractConnection | None]:
    """Everything the routes use, opened once (the composition root), and the broker connection."""
    # Storage calls (the SDK is blocking) run in the default executor: size it like the
    # storage connection pool, not asyncio's min(32, cores + 4) (6 here: concurrent uploads
    # queued behind each other's PUTs)
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(STORAGE_THREADS, thread_name_prefix="knowledge-service-io"))
    await migrate(settings.database_url)
    pool = await create_pool(PoolConfig.from_settings(settings), app_name="knowledge_service")
    store = ObjectStore(StorageConfig.from_settings(settings))
    await store.ensure_bucket()
    redis = redis_connect(settings)
    embedder = embedder_from_settings(settings)
    connection, publisher = await _open_publisher(settings, metrics)
    res = Resources(settings, pool, store, redis, embedder, publisher,
                    usecase_deps(settings, pool, store, publisher), PgReads(pool), metrics)
    return res, connection


async def _close(res: Resources, connection: AbstractConnection | None) -> None:
    await usecases.flush_marks()  # outbox marks written off the requests' path
    if connection is not None:
        await connection.close()
    await res.redis.aclose()
    await res.pool.close()
    close = getattr(res.embedder, "aclose", None)
    if close is not None:
        await close()


def create_app(settings: KnowledgeSettings) -> FastAPI:
    """Build the app; resources open in the lifespan and close when it ends. Each app has its own
    metrics registry (``GET /metrics``)."""
    metrics = ApiMetrics(CollectorRegistry())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        res, connection = await _open(settings, metrics)
        app.state.resources = res
        try:
            yield
        finally:
            await _close(res, connection)

    # /docs is served by knowledge_service.web from local files (FastAPI's default loads a CDN)
    app = FastAPI(title="RAG knowledge service", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)
    for exc_class, handler in EXCEPTION_HANDLERS.items():
        app.add_exception_handler(exc_class, handler)
    app.include_router(router)
    app.include_router(health)
    app.include_router(metrics_router)
    app.add_middleware(UploadResultMiddleware, metrics=metrics)
    app.add_middleware(SecurityHeadersMiddleware)  # X-Frame-Options, CSP, nosniff, no-referrer on every answer
    web.mount(app)
    return app
