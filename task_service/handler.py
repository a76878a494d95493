"""The imperative shell of the worker: one delivery in, one outcome (ack / reject / delay) out.

Per delivery: decode → document lock → load task → claim decision (pure) → claim (attempt+1)
→ download → extract (parse + chunk, in the sandbox child) → fence check → embed → fenced
commit. The consumer turns the returned :class:`Outcome` into ack / reject / delayed
re-publish; nothing here touches AMQP.

Cancellation (task hard limit, lost lease, worker shutdown) reaches the extraction too: the
sandbox child doing it is killed (``Extractor.cancel``), so no CPU is burnt for a dead task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from shared.adapters.embedding.vectors import empty_matrix
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
from shared.domain.formats import parser_filename
from shared.domain.messages import IndexMessage, InvalidMessageError
from shared.domain.records import ChunkCommit, Claim, SkipRecord
from shared.domain.retry_policy import transient_retrying
from shared.domain.states import TaskStatus
from shared.faults import fault_point
from shared.log import bind
from shared.ports import DocumentLock, Embedder, ObjectReader, ReleasedObjects, WorkerStore
from shared.settings import WorkerSettings
from task_service import embedding_cache
from task_service.lease import run_with_lease
from task_service.metrics import WorkerMetrics
from task_service.pipeline.extract import Extraction, StageCallback
from task_service.progress import ProgressThrottle, Stage, embedded_share

log = logging.getLogger(__name__)
R = TypeVar("R")
#: delivery_skip rows waiting for the background writer, at most (then a skip waits for it).
MAX_PENDING_SKIPS = 1000
#: A wait for the model turn at least this long is logged, seconds.
MODEL_WAIT_LOGGED_S = 0.1
CACHE_WRITE_BATCH = 1000  # vectors per embedding-cache INSERT (≈1.5 MB of parameters at 384-d)


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


class Extractor(Protocol):
    """Parse + chunk one document (``sandbox.SandboxedParser`` or ``InProcessParser``)."""

    def __call__(self, data: bytes, filename: str, cancel: threading.Event | None = None,
                 on_stage: StageCallback | None = None) -> Extraction:
        """Blocking; raises ``IndexingError`` subclasses for the document's faults. ``on_stage``
        is called from the calling thread when extraction enters a stage (``"CHUNKING"``)."""
        ...

    def cancel(self, token: threading.Event) -> None:
        """Abandon the call made with ``token`` (kill the process doing it); returns at once."""
        ...


@dataclass(frozen=True)
class HandlerConfig:
    """The handler's settings (seconds): built once from WorkerSettings by the composition root
    (:meth:`from_settings`); no defaults here, the settings hold them."""

    lock_retry_max_attempts: int
    lease_period_s: float  # lock renewal + task heartbeat period
    task_hard_limit_s: float
    retry_attempts: int  # transient failures: attempts, first and largest backoff
    retry_initial_s: float
    retry_max_s: float
    # embedding cache: on/off (EMBEDDING_CACHE_MAX_ROWS > 0), namespace, last_used touch period
    cache_enabled: bool
    embedding_provider: str
    embedding_model_revision: str
    cache_touch_interval_s: float
    embed_chunks: int  # chunks per embedding call, a progress report after each

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> HandlerConfig:
        return cls(
            lock_retry_max_attempts=s.lock_retry_max_attempts, lease_period_s=min(s.lock_renew_s, s.heartbeat_s),
            task_hard_limit_s=s.task_hard_limit_s, retry_attempts=s.transient_retry_attempts,
            retry_initial_s=s.transient_retry_initial_s, retry_max_s=s.transient_retry_max_s,
            cache_enabled=s.embedding_cache_max_rows > 0, embedding_provider=s.embedding_provider,
            embedding_model_revision=s.embedding_model_revision,
            cache_touch_interval_s=s.embedding_cache_touch_interval_s,
            embed_chunks=max(1, min(s.embed_progress_chunks, s.embedding_batch_size)),
        )


@dataclass(frozen=True)
class _Run:
    msg: IndexMessage
    claim: Claim
    warnings: list[str] = field(default_factory=list)  # the extraction's, once it has run
    throttle: ProgressThrottle = field(default_factory=ProgressThrottle)


class IndexHandler:
    """Handles deliveries of ``rag.index.queue``; all collaborators are ports, passed in by the
    composition root (``task_service.__main__``; in unit tests, ``tests/fakes.py``).
    ``lock``: document id → a new lock object for one unit of work."""

    def __init__(
        self,
        *,
        config: HandlerConfig,
        db: WorkerStore,
        lock: Callable[[int], DocumentLock],
        objects: ObjectReader,
        released: ReleasedObjects,
        embedder: Embedder,
        parse: Extractor,
        worker_name: str,
        metrics: WorkerMetrics | None = None,
        on_delivery_done: Callable[[], None] | None = None,
    ) -> None:
        self._s = config
        self._repo = db
        self._new_lock = lock
        self._store = objects
        self._released = released
        self._embedder = embedder
        self._parse = parse
        self.worker_name = worker_name
        self.metrics = metrics or WorkerMetrics.unregistered()
        self._on_done = on_delivery_done or (lambda: None)
        # One model turn at a time, first come first served (asyncio.Lock wakes waiters in order).
        self._model_turn = asyncio.Lock()
        # The last turn's fresh vectors, (owner, {text key: vector}), with the cache on: its run may
        # still be committing (its cache write comes after) when the next turn looks up the cache.
        self._last_turn: tuple[int, dict[bytes, Any]] | None = None
        self._skip_rows: list[SkipRecord] = []  # delivery_skip rows not yet written
        self._skip_writer: asyncio.Task[None] | None = None
        self._settled = SettledTasks()  # what earlier snapshots proved for good
        # the provider is part of the name: an endpoint serving "all-MiniLM-L6-v2" is not our local copy
        self._cache_ns = embedding_cache.namespace(
            f"{config.embedding_provider}/{embedder.model_name}", embedder.dim, config.embedding_model_revision or None,
            str(getattr(embedder, "variant", "")),
        )

    # -------------------------------------------------------------- plumbing

    def _retrying(self) -> Any:
        s = self._s
        return transient_retrying(s.retry_attempts, s.retry_initial_s, s.retry_max_s)

    async def _db(self, fn: Callable[..., Awaitable[R]], *args: Any, **kw: Any) -> R:
        """Run one store call, retrying transient failures."""
        async for attempt in self._retrying():
            with attempt:
                return await fn(*args, **kw)
        raise AssertionError("unreachable")

    async def _skip(self, reason: str, msg: IndexMessage) -> Outcome:
        """Ack; the ``delivery_skip`` row is written in the background, batched with the others
        waiting (off the ack's path: a worker draining a backlog of duplicates acks at once and
        writes many rows per round trip). Past :data:`MAX_PENDING_SKIPS` waiting rows a skip
        waits for the writer; :meth:`flush` waits for all of them."""
        log.info("delivery skipped", extra={"reason": reason})
        self.metrics.skipped.labels(str(reason)).inc()
        self._skip_rows.append(SkipRecord(str(reason), msg.task_id, msg.document_id, msg.generation))
        if self._skip_writer is None or self._skip_writer.done():
            self._skip_writer = asyncio.create_task(self._write_skips())
        elif len(self._skip_rows) >= MAX_PENDING_SKIPS:
            await asyncio.shield(self._skip_writer)
        return Outcome.ACK

    async def _write_skips(self) -> None:
        while self._skip_rows:
            rows, self._skip_rows = self._skip_rows, []
            try:
                await self._db(self._repo.record_skips, rows, self.worker_name)
            except TransientError:
                log.warning("could not record skips", extra={"rows": len(rows)})

    async def flush(self, timeout_s: float = 3.0) -> None:
        """Wait up to ``timeout_s`` seconds for the skip rows still being written."""
        if self._skip_writer is not None and not self._skip_writer.done():
            await asyncio.wait({self._skip_writer}, timeout=timeout_s)

    # -------------------------------------------------------------- entry

    async def handle(self, msg: IndexMessage | InvalidMessageError, *, delay_attempts: int) -> Outcome:
        """Process one delivery: its body as decoded once by the consumer (:func:`decode`; an
        ``InvalidMessageError`` is rejected). ``delay_attempts``: times it already went through the delay queue.
        Afterwards (its commit done) ``on_delivery_done`` is called: a task that ended frees a
        dispatch slot, and the relay releases the next held message at once."""
        try:
            return await self._handle(msg, delay_attempts=delay_attempts)
        finally:
            self._on_done()

    async def _handle(self, msg: IndexMessage | InvalidMessageError, *, delay_attempts: int) -> Outcome:
        if isinstance(msg, InvalidMessageError):
            log.error("invalid message rejected", extra={"error": str(msg)[:500]})
            return Outcome.REJECT
        with bind(task_id=msg.task_id, document_id=msg.document_id, generation=msg.generation):
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
            snap = await self._db(self._repo.load_task_snapshot, msg.task_id)
        except TransientError as exc:  # the locked path would find it down too
            log.warning("infrastructure unavailable before claim, delaying", extra={"error": str(exc)})
            return Outcome.DELAY
        if snap is not None:
            self._settled.learn(snap)
        decision = decide_claim(msg, snap)
        return await self._skip(decision.reason, msg) if isinstance(decision, Skip) else None

    async def _locked(self, msg: IndexMessage, lock: DocumentLock) -> Outcome:
        snap = await self._db(self._repo.load_task_snapshot, msg.task_id)
        decision = decide_claim(msg, snap)
        if isinstance(decision, Skip):
            return await self._skip(decision.reason, msg)
        if isinstance(decision, Reject):
            log.error("message rejected", extra={"reason": decision.reason})
            return Outcome.REJECT
        assert isinstance(decision, Proceed)
        claim = await self._db(self._repo.claim_task, msg.task_id, msg.generation)
        if claim is None:
            return await self._skip(SkipReason.NOT_RUNNABLE, msg)
        with bind(attempt=claim.attempt):
            return await self._run_claimed(_Run(msg, claim), lock)

    async def _run_claimed(self, run: _Run, lock: DocumentLock) -> Outcome:
        """Run a claimed task to a terminal state. A lost lock cancels the work and sends the
        delivery round the delay queue (the retry reclaims, or finds a newer claim and skips);
        a superseded claim or generation is acked as skipped."""
        started = time.monotonic()
        run.throttle.written(started, Stage.DOWNLOADING, 0.0)  # the claim wrote it
        log.info("task claimed")

        async def renew() -> None:
            await lock.renew()
            alive = await self._repo.heartbeat(run.claim)
            if not alive:
                raise StaleGenerationError("claim superseded (heartbeat fenced out)")

        period = self._s.lease_period_s
        try:
            async with asyncio.timeout(self._s.task_hard_limit_s) as deadline:
                n = await run_with_lease(self._pipeline(run, deadline), renew=renew, period_s=period)
        except LockLostError as exc:
            await self._skip(exc.error_code, run.msg)
            return Outcome.DELAY
        except FencedOut as exc:
            await self._skip(exc.error_code, run.msg)
            return Outcome.ACK
        except TimeoutError:
            if not deadline.expired():
                raise
            await self._finish(run, TaskStatus.TIMEOUT, TaskTimeoutError.error_code,
                               f"task exceeded the hard limit of {self._s.task_hard_limit_s:g} s")
            return Outcome.ACK
        except IndexingError as exc:
            await self._finish(run, TaskStatus.FAILED, exc.error_code, str(exc))
            return Outcome.ACK
        except Exception as exc:  # a bug or an untranslated library error: fail, don't loop
            log.exception("task failed with an unexpected error")
            await self._finish(run, TaskStatus.FAILED, InternalError.error_code, f"{type(exc).__name__}: {exc}")
            return Outcome.ACK
        log.info("task indexed", extra={"chunks": n, "seconds": round(time.monotonic() - started, 3)})
        self.metrics.finished(TaskStatus.SUCCESS.value)
        self.metrics.embedded_chunks.inc(n)
        await fault_point("after_commit")
        return Outcome.ACK

    async def _finish(self, run: _Run, status: TaskStatus, code: str, message: str) -> None:
        log.warning("task finished unsuccessfully",
                    extra={"status": status.value, "error_code": code, "error": message})
        ok = await self._db(
            self._repo.finish_unsuccessfully, run.claim, document_id=run.msg.document_id, status=status,
            error_code=code, error_message=message, warnings=run.warnings,
        )
        if ok:
            self.metrics.finished(status.value, code)
        else:
            await self._skip(SkipReason.STALE_GENERATION, run.msg)

    # -------------------------------------------------------------- the pipeline

    async def _pipeline(self, run: _Run, deadline: asyncio.Timeout) -> int:
        msg = run.msg
        source = await self._db(self._repo.document_source, msg.document_id)
        if source is None:
            raise StaleGenerationError("document deleted")
        object_key, filename, content_type = source
        # The API typed the bytes at upload: a name without an allowed extension parses as that type.

        await fault_point("before_download", filename)
        with self.metrics.stage("download"):
            data = await self._with_retries(self._store.get, object_key)
        await fault_point("before_parse")
        await self._report(run, Stage.PARSING)
        extraction = await self._extract(run, data, parser_filename(filename, content_type))
        self.metrics.observe_stage("parse", extraction.parse_s)
        self.metrics.observe_stage("chunk", extraction.chunk_s)
        chunks = extraction.chunks
        run.warnings[:] = extraction.warnings
        texts = [c.content for c in chunks]
        async with self._model(deadline):
            # Fence before the expensive call: a stale run never reaches the model.
            if not await self._db(self._repo.claim_is_current, run.claim):
                raise StaleGenerationError("generation or claim superseded before embedding")
            cached = await self._cache_lookup(msg.user_id, texts)
            p = embedding_cache.plan(texts, cached)
            await self._db(self._repo.record_embedding_run, run.claim, msg.document_id, len(chunks), self.worker_name,
                           cache_hits=p.hits, cache_misses=p.misses)
            log.info("embedding", extra={"chunks": len(chunks), "cache_hits": p.hits, "cache_misses": p.misses})
            await fault_point("during_embed")
            with self.metrics.stage("embed"):
                fresh = (await self._embed(run, list(p.miss_texts)) if p.miss_texts
                         else empty_matrix(self._embedder.dim))
            self._last_turn = (msg.user_id, dict(zip(p.miss_keys, fresh, strict=True))) if self._cache_on else None
        # The model is free again: the next delivery embeds while this one commits.
        embeddings = embedding_cache.assemble(p, cached, fresh, self._embedder.dim)
        await self._report(run, Stage.WRITING, 1.0)
        with self.metrics.stage("write"):
            committed = await self._db(self._repo.commit_chunks, ChunkCommit(
                run.claim, msg.document_id, msg.kb_id, chunks, embeddings, extraction.warnings))
        if not committed:
            raise StaleGenerationError("fenced out at commit")
        await self._cache_update(msg, p, fresh, hit_keys=[k for k in p.keys if k in cached])
        await self._released.remove_released()  # a swapped-out version's object
        return len(chunks)

    @contextlib.asynccontextmanager
    async def _model(self, deadline: asyncio.Timeout) -> AsyncIterator[None]:
        """Hold the worker's model turn, first come first served.

        With ``PREFETCH`` > 1 this is the worker's pipeline: a delivery that arrives while
        another embeds is claimed, downloaded, parsed and chunked at once, then waits here, so
        the model goes from one document to the next without waiting for a download or a parse
        or a commit (the turn ends before the commit; a copy of the same texts embedding next
        reads the vectors just embedded from the turn's hand-off, see :meth:`_cache_lookup`).
        The wait is not the task's own time: the hard limit is suspended meanwhile and resumes
        with what was left of it. A wait is
        at most the others' turns, each within their own limit, so a claim is at most
        ``PREFETCH x TASK_HARD_LIMIT_S`` old (what the scanner allows, below
        ``CONSUMER_TIMEOUT_S`` by the settings' check). Raises nothing of its own."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        when = deadline.when()
        deadline.reschedule(None)
        try:
            await self._model_turn.acquire()
        finally:
            waited = loop.time() - started
            if when is not None:
                deadline.reschedule(when + waited)
        try:
            if waited >= MODEL_WAIT_LOGGED_S:
                log.info("model turn after waiting", extra={"waited_s": round(waited, 3)})
            self.metrics.observe_stage("model_wait", waited)
            yield
        finally:
            self._model_turn.release()

    # -------------------------------------------------------------- embedding cache

    @property
    def _cache_on(self) -> bool:
        return self._s.cache_enabled

    async def _cache_lookup(self, owner: int, texts: list[str]) -> Mapping[bytes, Any]:
        """``owner``'s cached vectors of ``texts`` (``{}`` when the cache is disabled): a tenant
        never reads another's entries. The previous model turn's fresh vectors of the same owner
        count as cached: that run's cache write may not have happened yet (it follows its
        commit, after the turn), and a copy of its texts must not reach the model again. The
        vectors are values of a pure function of the text, whether or not that run commits."""
        if not self._cache_on or not texts:
            return {}
        ns = self._cache_ns
        keys = [embedding_cache.text_key(t) for t in texts]
        found = dict(await self._db(self._repo.cache_lookup, owner, ns.model, ns.revision, ns.dim, keys))
        if self._last_turn is not None and self._last_turn[0] == owner:
            handed = self._last_turn[1]
            found.update({k: handed[k] for k in keys if k in handed and k not in found})
        return found

    async def _cache_update(self, msg: IndexMessage, p: embedding_cache.Plan, fresh: Any,
                            hit_keys: list[bytes]) -> None:
        """After the fenced commit, in its own transactions: add this run's new vectors under the
        document's user, and touch the hits' ``last_used`` (at most once per
        ``EMBEDDING_CACHE_TOUCH_INTERVAL_S``). A document deleted meanwhile gets no entry.

        Not inside the commit: the cache holds values of a pure function (text → vector), so
        losing a write costs one re-embedding later, never correctness; outside, the fenced
        transaction stays as short as before, never waits on another worker inserting the same
        key, and cannot be failed by the cache. Only a committed run writes (a fenced-out run
        writes nothing anywhere). Failures are logged, not raised: the document is indexed.
        """
        if not self._cache_on:
            return
        ns = self._cache_ns
        try:
            for i in range(0, len(p.miss_keys), CACHE_WRITE_BATCH):  # bounded statements for 20,000-chunk documents
                await self._db(self._repo.cache_store, msg.user_id, msg.document_id, ns.model, ns.revision, ns.dim,
                               list(p.miss_keys[i:i + CACHE_WRITE_BATCH]), fresh[i:i + CACHE_WRITE_BATCH])
            if hit_keys:
                await self._db(self._repo.cache_touch, msg.user_id, ns.model, ns.revision, hit_keys,
                               self._s.cache_touch_interval_s)
        except TransientError as exc:
            log.warning("embedding cache not updated", extra={"error": str(exc)})

    async def _embed(self, run: _Run, texts: list[str]) -> Any:
        """Embed in calls of ``embed_progress_chunks`` (at most ``embedding_batch_size``),
        reporting EMBEDDING progress (embedded / total) between calls; a (len(texts), dim) matrix
        in input order.

        The texts go longest first across the whole document, as sentence-transformers'
        ``encode()`` orders one call: each call then pads to similar lengths (a call of 16 texts
        in document order pads to its longest)."""
        import numpy as np

        step = max(1, self._s.embed_chunks)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        ordered = [texts[i] for i in order]
        await self._report(run, Stage.EMBEDDING, 0.0)
        parts = []
        for at in range(0, len(ordered), step):
            parts.append(await self._with_retries(self._embedder.embed, ordered[at:at + step]))
            await fault_point("embed_batch")
            await self._report(run, Stage.EMBEDDING, embedded_share(at + step, len(ordered)))
        done = parts[0] if len(parts) == 1 else np.concatenate(parts)
        out = np.empty_like(done)
        out[order] = done
        return out

    async def _report(self, run: _Run, stage: Stage, progress: float = 0.0) -> None:
        """Write the run's stage and progress if the throttle allows it (about once a second).
        Best effort: a database failure is logged, not fatal; a write fenced out raises
        ``StaleGenerationError`` (a newer claim owns the task: stop working)."""
        if not run.throttle.should_write(time.monotonic(), stage, progress):
            return
        try:
            alive = await self._db(self._repo.report_progress, run.claim, stage.value, progress)
        except TransientError as exc:
            log.warning("progress not written", extra={"stage": stage.value, "error": str(exc)})
            return
        if not alive:
            raise StaleGenerationError("claim superseded (progress write fenced out)")

    async def _extract(self, run: _Run, data: bytes, filename: str) -> Extraction:
        """Parse + chunk in a thread (the sandbox call blocks on its child); if this task is
        cancelled meanwhile, the extraction is cancelled too (its child killed). A stage the
        extractor reports (CHUNKING) is written from the event loop, before this returns."""
        loop = asyncio.get_running_loop()
        reports: list[concurrent.futures.Future[None]] = []

        def on_stage(stage: str, progress: float = 0.0) -> None:  # in the extractor's thread
            reports.append(asyncio.run_coroutine_threadsafe(self._report(run, Stage(stage), progress), loop))

        token = threading.Event()
        try:
            extraction = await asyncio.to_thread(self._parse, data, filename, token, on_stage)
        except asyncio.CancelledError:
            self._parse.cancel(token)
            for f in reports:
                f.cancel()
            raise
        for f in reports:
            await asyncio.wrap_future(f)
        return extraction

    async def _with_retries(self, fn: Callable[..., Awaitable[R]], *args: Any) -> R:
        async for attempt in self._retrying():
            with attempt:
                return await fn(*args)
        raise AssertionError("unreachable")
