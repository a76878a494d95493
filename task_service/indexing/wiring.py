"""How the delivery builds what its units run with: :func:`run_deps` and the :class:`PartPublisher`."""

from __future__ import annotations

import logging

from shared.domain.errors import BrokerUnavailableError, TransientError
from shared.domain.records import CacheNamespace, OutboxRow
from shared.ports import Embedder, ObjectReader, Publisher, ReleasedObjects, WorkerStore
from task_service.indexing.cache import EmbeddingCache
from task_service.indexing.config import HandlerConfig
from task_service.indexing.extraction import Extractor
from task_service.indexing.model_turn import ModelTurn
from task_service.indexing.retrying import Retry, RetryingEmbedder, RetryingObjectReader, RetryingWorkerStore
from task_service.indexing.unit import RunDeps
from task_service.metrics import WorkerMetrics

log = logging.getLogger(__name__)


class PartPublisher:
    """Publishes a split's part messages right after its commit, over the consumer's current
    broker session (:meth:`attach`, on every (re)connect). What it cannot publish (no session,
    no confirm) stays unpublished in the outbox, and the relay publishes it; a row published
    but not marked may be published twice, and the second delivery is skipped by its fence."""

    def __init__(self, store: WorkerStore) -> None:
        self._store = store
        self._publisher: Publisher | None = None

    def attach(self, publisher: Publisher | None) -> None:
        """Publish through ``publisher`` from now on (None: leave every row to the relay)."""
        self._publisher = publisher

    async def __call__(self, rows: list[OutboxRow]) -> None:
        """Publish the released ``rows`` with confirms, in order, marking each published; stops at
        the first failure (the relay publishes the rest). Never raises."""
        for row in rows:
            if not row.released:
                continue
            if self._publisher is None:
                log.warning("no broker session; the outbox relay will publish the parts")
                return
            try:
                await self._publisher.publish(row.body, exchange=row.exchange, routing_key=row.routing_key,
                                              message_id=str(row.message_id), correlation_id=str(row.task_id),
                                              headers=row.headers)
            except BrokerUnavailableError as exc:
                log.warning("part publish failed; the outbox relay will publish", extra={"error": str(exc)})
                return
            try:
                await self._store.mark_published(row.id)
            except TransientError as exc:
                log.warning("part outbox row not marked published", extra={"error": str(exc)})


def run_deps(*, config: HandlerConfig, db: WorkerStore, objects: ObjectReader, released: ReleasedObjects,
             embedder: Embedder, parse: Extractor, worker_name: str, metrics: WorkerMetrics
             ) -> tuple[RunDeps, PartPublisher]:
    """The units' dependencies over the composition root's adapters: the store, the object
    reader and the embedder retrying transient failures, one model turn, one embedding cache
    (its namespace: the provider is part of the name, since an endpoint serving
    "all-MiniLM-L6-v2" is not our local copy), and the part publisher (not yet attached)."""
    retry = Retry(config.retry_attempts, config.retry_initial_s, config.retry_max_s)
    store = RetryingWorkerStore(db, retry)
    ns = CacheNamespace.of(f"{config.embedding_provider}/{embedder.model_name}", embedder.dim,
                           config.embedding_model_revision or None)
    cache = EmbeddingCache(store, ns, enabled=config.cache_enabled, touch_interval_s=config.cache_touch_interval_s)
    publisher = PartPublisher(store)
    deps = RunDeps(config=config, store=store, objects=RetryingObjectReader(objects, retry), released=released,
                   embedder=RetryingEmbedder(embedder, retry), parse=parse, cache=cache, model_turn=ModelTurn(metrics),
                   metrics=metrics, worker_name=worker_name, publish_parts=publisher)
    return deps, publisher
