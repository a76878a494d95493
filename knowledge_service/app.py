"""``create_app``: the FastAPI application and its lifespan (the API's composition root)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import redis.asyncio as aioredis
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from knowledge_service import web
from knowledge_service.deps import Resources
from knowledge_service.errors_http import EXCEPTION_HANDLERS
from knowledge_service.metrics import ApiMetrics, UploadResultMiddleware
from knowledge_service.metrics import router as metrics_router
from knowledge_service.routes import health, router
from knowledge_service.search.term_stats import TermStatsCache
from shared import usecases
from shared.adapters import rabbitmq
from shared.adapters.embedding import SentenceTransformerEmbedder
from shared.adapters.embedding.configured import embedder_from_settings
from shared.adapters.embedding.local import set_torch_threads
from shared.adapters.postgres.migrate import migrate
from shared.adapters.postgres.pool import create_pool
from shared.adapters.s3 import POOL_CONNECTIONS as STORAGE_THREADS
from shared.adapters.s3 import ObjectStore
from shared.bootstrap import usecase_deps
from shared.domain.errors import BrokerUnavailableError
from shared.settings import KnowledgeSettings

log = logging.getLogger("knowledge_service")


def create_app(settings: KnowledgeSettings) -> FastAPI:
    """Build the app; resources open in the lifespan and close when it ends. Each app has its own
    metrics registry (``GET /metrics``)."""
    metrics = ApiMetrics(CollectorRegistry())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Storage calls (the SDK is blocking) run in the default executor: size it like the
        # storage connection pool, not asyncio's min(32, cores + 4) (6 here: concurrent uploads
        # queued behind each other's PUTs)
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(STORAGE_THREADS, thread_name_prefix="knowledge-service-io"))
        await migrate(settings.database_url)
        pool = await create_pool(settings, app_name="knowledge_service")
        store = ObjectStore(settings)
        await store.ensure_bucket()
        redis = aioredis.from_url(
            settings.redis_url.get_secret_value(),
            socket_timeout=settings.redis_timeout_s,
            socket_connect_timeout=settings.redis_timeout_s,
        )
        embedder = embedder_from_settings(settings)
        if isinstance(embedder, SentenceTransformerEmbedder):
            set_torch_threads(settings.search_embed_threads)
        connection = None
        publisher = None
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
        app.state.resources = Resources(settings, pool, store, redis, embedder, publisher,
                                        usecase_deps(settings, pool, store, publisher), metrics,
                                        TermStatsCache(settings.search_term_stats_ttl_s))
        try:
            yield
        finally:
            await usecases.flush_marks()  # outbox marks written off the requests' path
            if connection is not None:
                await connection.close()
            await redis.aclose()
            await pool.close()
            close = getattr(embedder, "aclose", None)
            if close is not None:
                await close()

    # /docs is served by knowledge_service.web from local files (FastAPI's default loads a CDN)
    app = FastAPI(title="RAG knowledge service", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)
    for exc_class, handler in EXCEPTION_HANDLERS.items():
        app.add_exception_handler(exc_class, handler)
    app.include_router(router)
    app.include_router(health)
    app.include_router(metrics_router)
    app.add_middleware(UploadResultMiddleware, metrics=metrics)
    web.mount(app)
    return app
