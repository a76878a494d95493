"""One delivery in, one :class:`Outcome` (ack / reject / delay) out: decode, skip, lock, claim, finish.

Per delivery: decode (once, by the consumer) → skip what the database already settles (no
lock) → the unit's lock → claim decision (pure) → claim (attempt + 1) → the claimed unit's run
under the lease and its budget → how it ended, as an ``Outcome``. The unit is picked by
``message.part``: a document message claims the task (:mod:`task_service.indexing.document`), a
part message claims that part under its own lock (:mod:`task_service.indexing.part`);
everything else (decode, skip memory, delay queue, delivery limit, DLQ) is shared. The consumer
turns the ``Outcome`` into ack / reject / delayed re-publish and binds the message's log
fields; nothing here touches AMQP but the part publisher it is handed.

Time (ARCHITECTURE.md "Time: progress-based"): a unit runs within its budget (``TASK_BUDGET_BASE_S``
+ its chunks x ``TASK_BUDGET_PER_CHUNK_S``, model-turn waits excluded) and ends TIMEOUT early
when its model completes no batch for ``EMBED_STALL_TIMEOUT_S``; no fixed clock bounds a
document. Cancellation (budget, lost lease, worker shutdown) reaches the extraction too: the
sandbox child doing it is killed (``Extractor.cancel``), so no CPU is burnt for a dead task.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
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
from shared.domain.fencing import (
    ClaimDecision,
    Proceed,
    Reject,
    SettledTasks,
    Skip,
    SkipReason,
    decide_claim,
    decide_part_claim,
)
from shared.domain.messages import IndexMessage, InvalidMessageError
from shared.domain.states import TaskStatus
from shared.faults import fault_point
from shared.log import bind
from shared.ports import DocumentLock, Embedder, ObjectReader, Publisher, ReleasedObjects, WorkerStore
from task_service.indexing.config import HandlerConfig
from task_service.indexing.document import DocumentRun
from task_service.indexing.extraction import Extractor
from task_service.indexing.lease import run_with_lease
from task_service.indexing.part import PartRun
from task_service.indexing.skips import SkipLog
from task_service.indexing.unit import ClaimedUnit, UnitDone
from task_service.indexing.wiring import run_deps
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


class IndexHandler:
    """Handles deliveries of ``rag.index.queue``; all collaborators are ports, passed in by the
    composition root (``task_service.__main__``; in unit tests, ``tests/fakes.py``).
    ``lock``: (document id, part or None) → a new lock object for one unit of work."""

    def __init__(
        self, *, config: HandlerConfig, db: WorkerStore, lock: Callable[[int, int | None], DocumentLock],
        objects: ObjectReader, released: ReleasedObjects, embedder: Embedder, parse: Extractor, worker_name: str,
        metrics: WorkerMetrics | None = None, on_delivery_done: Callable[[], None] | None = None,
    ) -> None:
        self.metrics = metrics or WorkerMetrics.unregistered()
        self.worker_name = worker_name
        self.deps, self._parts = run_deps(config=config, db=db, objects=objects, released=released,
                                          embedder=embedder, parse=parse, worker_name=worker_name, metrics=self.metrics)
        self._s = config
        self._store = self.deps.store
        self._new_lock = lock
        self._on_done = on_delivery_done or (lambda: None)
        self._skips = SkipLog(self._store, worker_name, self.metrics)
        self._settled = SettledTasks()  # what earlier snapshots proved for good

    def attach_publisher(self, publisher: Publisher | None) -> None:
        """The broker session's confirmed publisher, for a split's part messages (the consumer
        attaches each new session's; None: the outbox relay publishes them)."""
        self._parts.attach(publisher)

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
        lock = self._new_lock(msg.document_id, msg.part)
        try:
            acquired = await lock.acquire()
        except LockUnavailableError as exc:
            log.warning("redis unavailable, delaying delivery", extra={"error": str(exc)})
            acquired = False
        if not acquired:  # the document's lock for a document message, the part's for a part message
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
            decision = await self._decide(msg)
        except TransientError as exc:  # the locked path would find it down too
            log.warning("infrastructure unavailable before claim, delaying", extra={"error": str(exc)})
            return Outcome.DELAY
        return await self._skip(decision.reason, msg) if isinstance(decision, Skip) else None

    async def _decide(self, msg: IndexMessage) -> ClaimDecision:
        """The claim decision on a fresh snapshot: of the task (:func:`decide_claim`), or of the
        task with the message's part (:func:`decide_part_claim`). Raises ``TransientError``."""
        if msg.part is None:
            snap = await self._store.load_task_snapshot(msg.task_id)
            if snap is not None:
                self._settled.learn(snap)
            return decide_claim(msg, snap)
        part = await self._store.load_part_snapshot(msg.task_id, msg.part)
        if part is not None:
            self._settled.learn(part.task)
        return decide_part_claim(msg, part)

    async def _claim(self, msg: IndexMessage) -> ClaimedUnit | None:
        """Claim the message's unit (the task, attempt + 1, or its part, part attempt + 1); None
        when it is not claimable any more."""
        if msg.part is None:
            claim = await self._store.claim_task(msg.task_id, msg.generation)
            return None if claim is None else DocumentRun(self.deps, msg, claim)
        part = await self._store.claim_part(msg.task_id, msg.part, msg.generation)
        return None if part is None else PartRun(self.deps, msg, part)

    async def _locked(self, msg: IndexMessage, lock: DocumentLock) -> Outcome:
        decision = await self._decide(msg)
        if isinstance(decision, Skip):
            return await self._skip(decision.reason, msg)
        if isinstance(decision, Reject):
            log.error("message rejected", extra={"reason": decision.reason})
            return Outcome.REJECT
        assert isinstance(decision, Proceed)
        unit = await self._claim(msg)
        if unit is None:
            return await self._skip(SkipReason.NOT_RUNNABLE, msg)
        with bind(attempt=unit.claim.attempt):
            return await self._run_claimed(unit, lock)

    async def _run_claimed(self, unit: ClaimedUnit, lock: DocumentLock) -> Outcome:
        """Run a claimed unit to a terminal state. A lost lock cancels the work and sends the
        delivery round the delay queue (the retry reclaims, or finds a newer claim and skips);
        a superseded claim or generation is acked as skipped."""
        started = time.monotonic()
        log.info("task claimed" if unit.msg.part is None else "part claimed")

        async def renew() -> None:
            """The lock first, then the heartbeat, which waits at most one lease period: while
            the unit's own commit holds the task row the heartbeat waits on its lock, and the
            next renewal of the Redis lock (TTL ``LOCK_TTL_S``) must not wait behind it."""
            await lock.renew()
            try:
                async with asyncio.timeout(self._s.lease_period_s):
                    alive = await unit.heartbeat()
            except TimeoutError:
                log.warning("heartbeat still waiting after a lease period (its row is locked); the next period "
                            "tries again", extra={"period_s": self._s.lease_period_s})
                return
            if not alive:
                raise StaleGenerationError("claim superseded (heartbeat fenced out)")

        try:
            done = await self._within_budget(unit, renew)
        except LockLostError as exc:
            await self._skip(exc.error_code, unit.msg)
            return Outcome.DELAY
        except FencedOut as exc:
            return await self._skip(exc.error_code, unit.msg)
        except TaskTimeoutError as exc:  # its budget spent, or the model stalled
            return await self._finish(unit, TaskStatus.TIMEOUT, exc.error_code, str(exc))
        except IndexingError as exc:
            return await self._finish(unit, TaskStatus.FAILED, exc.error_code, str(exc))
        except Exception as exc:  # a bug or an untranslated library error: fail, don't loop
            log.exception("task failed with an unexpected error")
            return await self._finish(unit, TaskStatus.FAILED, InternalError.error_code, f"{type(exc).__name__}: {exc}")
        fields: dict[str, object] = {"chunks": done.chunks, "seconds": round(time.monotonic() - started, 3)}
        log.info(done.event, extra=fields | ({"parts": done.parts} if done.parts else {}))
        if done.indexed:
            self.metrics.finished(TaskStatus.SUCCESS.value)
        self.metrics.embedded_chunks.inc(done.committed)
        await fault_point("after_commit")
        return Outcome.ACK

    async def _within_budget(self, unit: ClaimedUnit, renew: Callable[[], Awaitable[None]]) -> UnitDone:
        """``unit.run`` under the lease (``renew`` each period) and the unit's budget; a budget
        spent raises ``TaskTimeoutError`` naming it."""
        budget = unit.budget
        try:
            async with asyncio.timeout(budget.total_s) as deadline:
                return await run_with_lease(unit.run(deadline), renew=renew, period_s=self._s.lease_period_s)
        except TimeoutError:
            if not deadline.expired():
                raise
            what = "task" if unit.msg.part is None else f"part {unit.msg.part}"
            raise TaskTimeoutError(f"{what} exceeded its budget of {budget.total_s:g} s") from None

    async def _finish(self, unit: ClaimedUnit, status: TaskStatus, code: str, message: str) -> Outcome:
        """End the unit's task unsuccessfully (fenced); a fenced-out finish is a skip. ACK."""
        log.warning("task finished unsuccessfully",
                    extra={"status": status.value, "error_code": code, "error": message})
        if await unit.finish(status, code, message):
            self.metrics.finished(status.value, code)
        else:
            await self._skip(SkipReason.STALE_GENERATION, unit.msg)
        return Outcome.ACK
