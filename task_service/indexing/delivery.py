"""One delivery in, one :class:`Outcome` (ack / reject / delay) out: decode, skip, lock, claim, finish.

Per delivery: decode (once, by the consumer) → skip what the database already settles (no
lock) → document lock → claim decision (pure) → claim (attempt + 1) → the claimed unit's run
(:mod:`task_service.indexing.document`) under the lease and the time limit → how it ended, as
an ``Outcome``. The consumer turns the ``Outcome`` into ack / reject / delayed re-publish and
binds the message's log fields; nothing here touches AMQP.

Cancellation (task hard limit, lost lease, worker shutdown) reaches the extraction too: the
sandbox child doing it is killed (``Extractor.cancel``), so no CPU is burnt for a dead task.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from enum import StrEnum

from shared.domain.errors import (
    FencedOut,
    IndexingError,
    InternalError,
    LockLostError,
    LockUnavailableError,
    StaleGenerationError,
    TaskTimeoutError,
    TransientError,
)
from shared.domain.fencing import Proceed, Reject, SettledTasks, Skip, SkipReason, decide_claim
from shared.domain.messages import IndexMessage, InvalidMessageError
from shared.domain.records import CacheNamespace
from shared.domain.states import TaskStatus
from shared.faults import fault_point
from shared.log import bind
from shared.ports import DocumentLock, Embedder, ObjectReader, ReleasedObjects, WorkerStore
from task_service.indexing.cache import EmbeddingCache
from task_service.indexing.config import HandlerConfig
from task_service.indexing.document import DocumentRun
from task_service.indexing.extraction import Extractor
from task_service.indexing.lease import run_with_lease
from task_service.indexing.model_turn import ModelTurn
from task_service.indexing.retrying import Retry, RetryingEmbedder, RetryingObjectReader, RetryingWorkerStore
from task_service.indexing.skips import SkipLog
from task_service.indexing.unit import ClaimedUnit, RunDeps
from task_service.metrics import WorkerMetrics

log = logging.getLogger(__name__)


def decode(body: bytes) -> IndexMessage | InvalidMessageError:
    """A delivery's body as an index message, or why it is not one (parsed once per delivery)."""
    try:
        return IndexMessage.from_json(body)
    except InvalidMessageError as exc:
        return exc


class Outcome(StrEnum):
    ACK = "ack"  # done: indexed, failed for good, or skipped
    REJECT = "reject"  # reject without requeue → dead-letter queue
    DELAY = "delay"  # re-publish to the delay queue (lock held / infrastructure down), then ack


def run_deps(*, config: HandlerConfig, db: WorkerStore, objects: ObjectReader, released: ReleasedObjects,
             embedder: Embedder, parse: Extractor, worker_name: str, metrics: WorkerMetrics) -> RunDeps:
    """The units' dependencies over the composition root's adapters: the store, the object
    reader and the embedder retrying transient failures, one model turn, one embedding cache
    (its namespace: the provider is part of the name, since an endpoint serving
    "all-MiniLM-L6-v2" is not our local copy)."""
    retry = Retry(config.retry_attempts, config.retry_initial_s, config.retry_max_s)
    store = RetryingWorkerStore(db, retry)
    ns = CacheNamespace.of(f"{config.embedding_provider}/{embedder.model_name}", embedder.dim,
                           config.embedding_model_revision or None)
    cache = EmbeddingCache(store, ns, enabled=config.cache_enabled, touch_interval_s=config.cache_touch_interval_s)
    return RunDeps(config=config, store=store, objects=RetryingObjectReader(objects, retry), released=released,
                   embedder=RetryingEmbedder(embedder, retry), parse=parse, cache=cache,
                   model_turn=ModelTurn(metrics), metrics=metrics, worker_name=worker_name)


class IndexHandler:
    """Handles deliveries of ``rag.index.queue``; all collaborators are ports, passed in by the
    composition root (``task_service.__main__``; in unit tests, ``tests/fakes.py``).
    ``lock``: document id → a new lock object for one unit of work."""

    def __init__(
        self, *, config: HandlerConfig, db: WorkerStore, lock: Callable[[int], DocumentLock], objects: ObjectReader,
        released: ReleasedObjects, embedder: Embedder, parse: Extractor, worker_name: str,
        metrics: WorkerMetrics | None = None, on_delivery_done: Callable[[], None] | None = None,
    ) -> None:
        self.metrics = metrics or WorkerMetrics.unregistered()
        self.worker_name = worker_name
        self.deps = run_deps(config=config, db=db, objects=objects, released=released, embedder=embedder,
                             parse=parse, worker_name=worker_name, metrics=self.metrics)
        self._s = config
        self._store = self.deps.store
        self._new_lock = lock
        self._on_done = on_delivery_done or (lambda: None)
        self._skips = SkipLog(self._store, worker_name, self.metrics)
        self._settled = SettledTasks()  # what earlier snapshots proved for good

    async def flush(self, timeout_s: float = 3.0) -> None:
        """Wait up to ``timeout_s`` seconds for the skip rows still being written."""
        await self._skips.flush(timeout_s)

    async def _skip(self, reason: str, msg: IndexMessage) -> Outcome:
        """Ack; the ``delivery_skip`` row is written in the background (:class:`SkipLog`)."""
        await self._skips.skip(reason, msg)
        return Outcome.ACK

    async def handle(self, msg: IndexMessage | InvalidMessageError, *, delay_attempts: int) -> Outcome:
        """Process one delivery: its body as decoded once by the consumer (:func:`decode`; an
        ``InvalidMessageError`` is rejected). ``delay_attempts``: times it already went through the delay queue.
        Afterwards (its commit done) ``on_delivery_done`` is called: a task that ended frees a
        dispatch slot, and the relay releases the next held message at once."""
        try:
            if isinstance(msg, InvalidMessageError):
                log.error("invalid message rejected", extra={"error": str(msg)[:500]})
                return Outcome.REJECT
            return await self._handle(msg, delay_attempts=delay_attempts)
        finally:
            self._on_done()

    async def _handle(self, msg: IndexMessage, *, delay_attempts: int) -> Outcome:
        early = await self._skip_without_lock(msg)
        if early is not None:
            return early
        lock = self._new_lock(msg.document_id)
        try:
            acquired = await lock.acquire()
        except LockUnavailableError as exc:
            log.warning("redis unavailable, delaying delivery", extra={"error": str(exc)})
            acquired = False
        if not acquired:
            if delay_attempts + 1 >= self._s.lock_retry_max_attempts:
                return await self._skip(SkipReason.LOCK_HELD_EXHAUSTED, msg)
            log.info("document lock held, delaying delivery", extra={"delay_attempts": delay_attempts})
            self.metrics.lock_held_retries.inc()
            return Outcome.DELAY
        try:
            return await self._locked(msg, lock)
        except TransientError as exc:
            log.warning("infrastructure unavailable before claim, delaying", extra={"error": str(exc)})
            return Outcome.DELAY
        finally:
            await lock.release()

    async def _skip_without_lock(self, msg: IndexMessage) -> Outcome | None:
        """A delivery the database already says to skip (its task succeeded or failed for good,
        its generation moved on, the task is gone) is acked without taking the document lock:
        a skip writes nothing but its record, so the lock would save no work. What a snapshot
        proved for good (an older generation, a terminal task) answers later duplicates without
        reading the database again (:class:`~shared.domain.fencing.SettledTasks`). DELAY when the database
        is unreachable. None: take the lock and decide again (claimable or rejectable)."""
        known = self._settled.skip(msg)
        if known is not None:
            return await self._skip(known.reason, msg)
        try:
            snap = await self._store.load_task_snapshot(msg.task_id)
        except TransientError as exc:  # the locked path would find it down too
            log.warning("infrastructure unavailable before claim, delaying", extra={"error": str(exc)})
            return Outcome.DELAY
        if snap is not None:
            self._settled.learn(snap)
        decision = decide_claim(msg, snap)
        return await self._skip(decision.reason, msg) if isinstance(decision, Skip) else None

    async def _locked(self, msg: IndexMessage, lock: DocumentLock) -> Outcome:
        snap = await self._store.load_task_snapshot(msg.task_id)
        decision = decide_claim(msg, snap)
        if isinstance(decision, Skip):
            return await self._skip(decision.reason, msg)
        if isinstance(decision, Reject):
            log.error("message rejected", extra={"reason": decision.reason})
            return Outcome.REJECT
        assert isinstance(decision, Proceed)
        claim = await self._store.claim_task(msg.task_id, msg.generation)
        if claim is None:
            return await self._skip(SkipReason.NOT_RUNNABLE, msg)
        with bind(attempt=claim.attempt):
            return await self._run_claimed(DocumentRun(self.deps, msg, claim), lock)

    async def _run_claimed(self, unit: ClaimedUnit, lock: DocumentLock) -> Outcome:
        """Run a claimed unit to a terminal state. A lost lock cancels the work and sends the
        delivery round the delay queue (the retry reclaims, or finds a newer claim and skips);
        a superseded claim or generation is acked as skipped."""
        started = time.monotonic()
        log.info("task claimed")

        async def renew() -> None:
            await lock.renew()
            if not await unit.heartbeat():
                raise StaleGenerationError("claim superseded (heartbeat fenced out)")

        limit_s = self._s.task_hard_limit_s
        try:
            async with asyncio.timeout(limit_s) as deadline:
                n = await run_with_lease(unit.run(deadline), renew=renew, period_s=self._s.lease_period_s)
        except LockLostError as exc:
            await self._skip(exc.error_code, unit.msg)
            return Outcome.DELAY
        except FencedOut as exc:
            return await self._skip(exc.error_code, unit.msg)
        except TimeoutError:
            if not deadline.expired():
                raise
            return await self._finish(unit, TaskStatus.TIMEOUT, TaskTimeoutError.error_code,
                                      f"task exceeded the hard limit of {limit_s:g} s")
        except IndexingError as exc:
            return await self._finish(unit, TaskStatus.FAILED, exc.error_code, str(exc))
        except Exception as exc:  # a bug or an untranslated library error: fail, don't loop
            log.exception("task failed with an unexpected error")
            return await self._finish(unit, TaskStatus.FAILED, InternalError.error_code, f"{type(exc).__name__}: {exc}")
        log.info("task indexed", extra={"chunks": n, "seconds": round(time.monotonic() - started, 3)})
        self.metrics.finished(TaskStatus.SUCCESS.value)
        self.metrics.embedded_chunks.inc(n)
        await fault_point("after_commit")
        return Outcome.ACK

    async def _finish(self, unit: ClaimedUnit, status: TaskStatus, code: str, message: str) -> Outcome:
        """End the unit's task unsuccessfully (fenced); a fenced-out finish is a skip. ACK."""
        log.warning("task finished unsuccessfully",
                    extra={"status": status.value, "error_code": code, "error": message})
        if await unit.finish(status, code, message):
            self.metrics.finished(status.value, code)
        else:
            await self._skip(SkipReason.STALE_GENERATION, unit.msg)
        return Outcome.ACK
