"""``create_app``: the FastAPI application and its lifespan (the API's composition root)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from knowledge_service import web
from knowledge_service.config import ApiConfig
from knowledge_service.deps import Resources
from knowledge_service.errors_http import EXCEPTION_HANDLERS
from knowledge_service.metrics import ApiMetrics, UploadResultMiddleware
from knowledge_service.metrics import router as metrics_router
from knowledge_service.routes import health, router
from knowledge_service.security_headers import SecurityHeadersMiddleware
from shared import usecases
from shared.adapters import rabbitmq
from shared.adapters.embedding import SentenceTransformerEmbedder
from shared.adapters.embedding.configured import EmbedderConfig, build_configured
from shared.adapters.embedding.local import set_torch_threads
from shared.adapters.postgres.migrate import migrate
from shared.adapters.postgres.pool import PoolConfig, create_pool
from shared.adapters.postgres.reads import PgReads, PgSearch
from shared.adapters.redis_lock import RedisConfig
from shared.adapters.redis_lock import connect as redis_connect
from shared.adapters.s3 import POOL_CONNECTIONS as STORAGE_THREADS
from shared.adapters.s3 import ObjectStore, StorageConfig
from shared.bootstrap import UsecaseConfig, usecase_deps
from shared.settings import KnowledgeSettings

log = logging.getLogger("knowledge_service")


async def _open_publisher(settings: KnowledgeSettings, metrics: ApiMetrics) -> rabbitmq.FailoverPublisher:
    """A confirmed publisher over every broker node ``AMQP_URL`` names, reconnecting to any of them
    after its node is lost; connected (and the topology declared) now if a node answers, else at
    the first publish (uploads meanwhile go to the outbox)."""
    publisher = rabbitmq.FailoverPublisher(
        rabbitmq.BrokerConfig.from_settings(settings), name="knowledge_service", app_id="knowledge_service",
        on_failure=metrics.publish_failures.labels("api").inc,
    )
    if not await publisher.ensure_open():
        log.error("broker unavailable at start-up; uploads go to the outbox until a node answers")
    return publisher


async def _open(settings: KnowledgeSettings, metrics: ApiMetrics) -> Resources:
    """Everything the routes use, opened once (the composition root)."""
    # Storage calls (the SDK is blocking) run in the default executor: size it like the
    # storage connection pool, not asyncio's min(32, cores + 4) (6 here: concurrent uploads
    # queued behind each other's PUTs)
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(STORAGE_THREADS, thread_name_prefix="knowledge-service-io"))
    await migrate(settings.database_url)
    pool = await create_pool(PoolConfig.from_settings(settings), app_name="knowledge_service")
    store = ObjectStore(StorageConfig.from_settings(settings))
    await store.ensure_bucket()
    redis = redis_connect(RedisConfig.from_settings(settings))
    embedder = build_configured(EmbedderConfig.from_settings(settings, threads=settings.search_embed_threads))
    if isinstance(embedder, SentenceTransformerEmbedder) and embedder.runtime == "torch":
        set_torch_threads(settings.search_embed_threads)  # a query's encode() beside a busy worker
    publisher = await _open_publisher(settings, metrics)
    deps = usecase_deps(UsecaseConfig.from_settings(settings), pool, store, publisher)
    return Resources(ApiConfig.from_settings(settings), store, redis, embedder, publisher, deps,
                     PgReads(pool), PgSearch(pool), metrics)


async def _close(res: Resources) -> None:
    await usecases.flush_marks()  # outbox marks written off the requests' path
    if res.publisher is not None:
        await res.publisher.close()
    await res.redis.aclose()
    await res.reads.close()  # the pool: every read and write went through it
    close = getattr(res.embedder, "aclose", None)
    if close is not None:
        await close()


def create_app(settings: KnowledgeSettings) -> FastAPI:
    """Build the app; resources open in the lifespan and close when it ends. Each app has its own
    metrics registry (``GET /metrics``)."""
    metrics = ApiMetrics(CollectorRegistry())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        res = await _open(settings, metrics)
        app.state.resources = res
        try:
            yield
        finally:
            await _close(res)

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
