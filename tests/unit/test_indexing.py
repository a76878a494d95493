"""``task_service.indexing``: ``IndexHandler.handle`` for every outcome, over the in-memory fakes (no services)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import pytest

from shared.domain.errors import (
    CorruptDocumentError,
    DatabaseUnavailableError,
    EmbeddingUnavailableError,
    IndexingError,
    InternalError,
    ParseLimitError,
    StorageUnavailableError,
    TaskTimeoutError,
)
from shared.domain.fencing import SkipReason
from shared.domain.messages import IndexMessage
from shared.domain.records import ChunkCommit, DocumentSource
from shared.domain.states import DocumentStatus, TaskStatus
from task_service.indexing.config import HandlerConfig
from task_service.indexing.delivery import IndexHandler, Outcome, decode
from task_service.indexing.retrying import Retry, RetryingEmbedder, RetryingWorkerStore
from task_service.pipeline.readers.archive.plan import ArchiveLimits
from tests.fakes import FakeEmbedder, FakeExtractor, FakeLocks, FakeObjectStore, FakeReleasedObjects, FakeStore

TEXT = b"first paragraph\n\nsecond paragraph\n\nthird"


def config(**kw: float) -> HandlerConfig:
    base: dict[str, float | str] = dict(lock_retry_max_attempts=3, lease_period_s=30.0, budget_base_s=30.0,
                                        budget_per_chunk_s=0.0, embed_stall_timeout_s=30.0, split_min_chunks=1000,
                                        part_chunks=2, retry_attempts=3, retry_initial_s=0.0, retry_max_s=0.0,
                                        cache_enabled=False,
                                        embedding_provider="sentence-transformers", embedding_model_revision="",
                                        cache_touch_interval_s=3600.0, embed_chunks=16)
    base.update(kw)
    base.setdefault("archive_limits", ArchiveLimits())  # type: ignore[arg-type]
    return HandlerConfig(**base)  # type: ignore[arg-type]


class World:
    """One handler over fresh fakes, with one WAITING document stored as TEXT."""

    def __init__(self, *, extractor: FakeExtractor | None = None, embedder: FakeEmbedder | None = None,
                 objects: FakeObjectStore | None = None, **cfg: float) -> None:
        self.store = FakeStore()
        self.msg = self.store.add_document()
        self.locks = FakeLocks()
        self.objects = objects or FakeObjectStore({"k1": TEXT})
        self.embedder = embedder or FakeEmbedder()
        self.extractor = extractor or FakeExtractor()
        self.released = FakeReleasedObjects(self.store, self.objects)
        self.handler = IndexHandler(config=config(**cfg), db=self.store, lock=self.locks, objects=self.objects,
                                    released=self.released, embedder=self.embedder, parse=self.extractor,
                                    worker_name="test")

    async def handle(self, body: bytes | None = None, delay_attempts: int = 0) -> Outcome:
        outcome = await self.handler.handle(decode(self.msg.to_json() if body is None else body),
                                            delay_attempts=delay_attempts)
        await self.handler.flush()  # skip rows are written in the background
        return outcome

    @property
    def task(self) -> object:
        return self.store.tasks[self.msg.task_id]


async def test_success_commits_every_chunk_and_acks() -> None:
    w = World()
    assert await w.handle() is Outcome.ACK
    t = w.store.tasks[w.msg.task_id]
    assert (t.status, t.attempt) == (TaskStatus.SUCCESS, 1)
    assert w.store.documents[w.msg.document_id].status is DocumentStatus.INDEXED
    assert [c.content for c in w.store.documents[w.msg.document_id].chunks] == [
        "first paragraph", "second paragraph", "third"]
    assert w.embedder.calls == 1 and w.store.embedding_runs == 1 and w.locks.held == set()
    assert w.released.calls == 1  # a swapped-out version's object is removed after the commit


async def test_invalid_message_is_rejected() -> None:
    assert await World().handle(b'{"taskId": "x"}') is Outcome.REJECT


async def test_ids_that_disagree_with_the_row_are_rejected() -> None:
    w = World()
    bad = IndexMessage(task_id=w.msg.task_id, document_id=w.msg.document_id, kb_id=99, user_id=w.msg.user_id,
                       generation=1)
    assert await w.handle(bad.to_json()) is Outcome.REJECT


async def test_missing_task_is_skipped() -> None:
    w = World()
    gone = IndexMessage(task_id=999, document_id=998, kb_id=1, user_id=1, generation=1)
    assert await w.handle(gone.to_json()) is Outcome.ACK
    assert w.store.skips == [SkipReason.TASK_MISSING]


async def test_stale_generation_is_skipped_without_embedding() -> None:
    w = World()
    w.store.documents[w.msg.document_id].generation = 2
    w.store.tasks[w.msg.task_id].generation = 2
    assert await w.handle() is Outcome.ACK
    assert w.store.skips == [SkipReason.STALE_GENERATION] and w.embedder.calls == 0


async def test_a_backlog_of_duplicates_writes_its_skip_rows_in_few_round_trips() -> None:
    w = World()
    w.store.tasks[w.msg.task_id].status = TaskStatus.SUCCESS
    outcomes = [await w.handler.handle(w.msg, delay_attempts=0) for _ in range(200)]
    await w.handler.flush()
    assert outcomes == [Outcome.ACK] * 200
    assert w.store.skips == [SkipReason.NOT_RUNNABLE] * 200  # every row written, none lost
    assert w.store.skip_writes < 200 / 10  # batched: the writer takes every row waiting at once


async def test_finished_task_is_not_runnable() -> None:
    w = World()
    w.store.tasks[w.msg.task_id].status = TaskStatus.SUCCESS
    assert await w.handle() is Outcome.ACK
    assert w.store.skips == [SkipReason.NOT_RUNNABLE]


async def test_lock_held_delays_until_the_attempts_are_exhausted() -> None:
    w = World(lock_retry_max_attempts=3)
    w.locks.held.add(w.msg.document_id)
    assert await w.handle(delay_attempts=0) is Outcome.DELAY
    assert await w.handle(delay_attempts=1) is Outcome.DELAY
    assert await w.handle(delay_attempts=2) is Outcome.ACK  # 2 + 1 >= 3
    assert w.store.skips == [SkipReason.LOCK_HELD_EXHAUSTED]
    assert w.store.tasks[w.msg.task_id].attempt == 0


async def test_redis_down_delays() -> None:
    w = World()
    w.locks.down = True
    assert await w.handle() is Outcome.DELAY


async def test_database_down_before_the_claim_delays_after_retries() -> None:
    w = World(retry_attempts=2)
    w.store.fail_next["load_task_snapshot"] = DatabaseUnavailableError("down")
    assert await w.handle() is Outcome.ACK  # one failure is retried inside the task
    w2 = World(retry_attempts=1)
    w2.store.fail_next["load_task_snapshot"] = DatabaseUnavailableError("down")
    assert await w2.handle() is Outcome.DELAY
    assert w2.locks.held == set()


@pytest.mark.parametrize("error", [CorruptDocumentError("bad zip"), ParseLimitError("too big")])
async def test_a_bad_document_fails_with_its_code(error: IndexingError) -> None:
    w = World(extractor=FakeExtractor(error))
    assert await w.handle() is Outcome.ACK
    t = w.store.tasks[w.msg.task_id]
    assert (t.status, t.error_code) == (TaskStatus.FAILED, error.error_code)
    assert w.embedder.calls == 0


async def test_an_unexpected_exception_fails_as_internal_error() -> None:
    w = World(extractor=FakeExtractor(ZeroDivisionError("bug")))
    assert await w.handle() is Outcome.ACK
    t = w.store.tasks[w.msg.task_id]
    assert (t.status, t.error_code) == (TaskStatus.FAILED, InternalError.error_code)
    assert t.error_message == "ZeroDivisionError: bug"


async def test_storage_down_for_every_retry_fails_the_task() -> None:
    w = World(objects=FakeObjectStore(down=True))
    assert await w.handle() is Outcome.ACK
    t = w.store.tasks[w.msg.task_id]
    assert (t.status, t.error_code) == (TaskStatus.FAILED, StorageUnavailableError.error_code)


async def test_embedding_down_fails_after_retries() -> None:
    w = World(embedder=FakeEmbedder(error=EmbeddingUnavailableError("503")))
    assert await w.handle() is Outcome.ACK
    assert w.embedder.calls == 3
    assert w.store.tasks[w.msg.task_id].error_code == EmbeddingUnavailableError.error_code


async def test_the_budget_times_the_task_out_and_cancels_the_extraction() -> None:
    w = World(extractor=FakeExtractor(block=True), budget_base_s=0.05)
    assert await w.handle() is Outcome.ACK
    t = w.store.tasks[w.msg.task_id]
    assert (t.status, t.error_code) == (TaskStatus.TIMEOUT, TaskTimeoutError.error_code)
    assert t.error_message == "task exceeded its budget of 0.05 s"  # before chunking: the base only
    assert w.extractor.cancelled == 1


async def test_a_newer_generation_before_embedding_is_skipped() -> None:
    w = World()
    store = w.store
    real = store.document_source

    async def supersede(document_id: int) -> DocumentSource | None:
        store.documents[document_id].generation += 1  # new content arrives mid-run
        return await real(document_id)

    store.document_source = supersede  # type: ignore[method-assign]
    assert await w.handle() is Outcome.ACK
    assert w.embedder.calls == 0 and store.skips == [SkipReason.STALE_GENERATION]
    assert store.tasks[w.msg.task_id].status is TaskStatus.RUNNING  # the new generation's to run


async def test_deleted_document_mid_run_is_skipped() -> None:
    w2 = World()
    real = w2.store.document_source

    async def deleted(document_id: int) -> DocumentSource | None:
        await real(document_id)
        return None

    w2.store.document_source = deleted  # type: ignore[method-assign]
    assert await w2.handle() is Outcome.ACK
    assert w2.store.skips == [SkipReason.STALE_GENERATION]


async def test_fenced_out_at_commit_is_skipped_not_failed() -> None:
    w = World()
    store = w.store
    real = store.commit_chunks

    async def reclaimed(commit: ChunkCommit) -> bool:
        store.tasks[w.msg.task_id].attempt += 1  # another worker reclaimed it
        return await real(commit)

    store.commit_chunks = reclaimed  # type: ignore[method-assign]
    assert await w.handle() is Outcome.ACK
    assert store.skips == [SkipReason.STALE_GENERATION]
    assert store.tasks[w.msg.task_id].status is TaskStatus.RUNNING


async def test_lost_lock_sends_the_delivery_round_the_delay_queue() -> None:
    w = World(extractor=FakeExtractor(block=True), lease_period_s=0.01)
    w.locks.lost.add(w.msg.document_id)
    assert await w.handle() is Outcome.DELAY
    assert w.store.skips == ["lock_lost"] and w.extractor.cancelled == 1
    assert w.locks.held == set()


async def test_cached_chunks_never_reach_the_model() -> None:
    """Issue 13: a second document with the same chunk texts is served by the embedding cache."""
    w = World(cache_enabled=True)
    assert await w.handle() is Outcome.ACK
    assert (w.embedder.calls, w.store.cache_misses, len(w.store.cache)) == (1, 3, 3)
    w.msg = w.store.add_document()  # same stored text → same chunks
    assert await w.handle() is Outcome.ACK
    assert w.store.tasks[w.msg.task_id].status is TaskStatus.SUCCESS
    assert (w.embedder.calls, w.store.cache_misses, w.store.embedding_runs) == (1, 3, 2)
    assert len(w.store.documents[w.msg.document_id].chunks) == 3


async def test_another_users_document_of_the_same_text_calls_the_model_again() -> None:
    """Issue 18: the cache is per user; user 2's upload of user 1's text is embedded anew (no
    timing oracle), and each user's entries stay their own."""
    w = World(cache_enabled=True)
    assert await w.handle() is Outcome.ACK
    w.msg = w.store.add_document(user_id=2, kb_id=2)  # same stored text, another tenant
    assert await w.handle() is Outcome.ACK
    assert (w.embedder.calls, w.store.cache_misses) == (2, 6)
    assert sorted({owner for owner, *_ in w.store.cache}) == [1, 2] and len(w.store.cache) == 6


async def test_without_the_cache_every_run_calls_the_model() -> None:
    w = World()  # cache_enabled defaults to False
    assert await w.handle() is Outcome.ACK
    w.msg = w.store.add_document()
    assert await w.handle() is Outcome.ACK
    assert (w.embedder.calls, w.store.cache_misses, len(w.store.cache)) == (2, 6, 0)


async def test_progress_is_reported_per_stage_and_embedding_goes_in_batches() -> None:
    w = World(embed_chunks=2)
    assert await w.handle() is Outcome.ACK
    # within a second: every stage change written, the progress steps inside EMBEDDING throttled
    assert w.store.tasks[w.msg.task_id].progress == [
        ("PARSING", 0.0), ("CHUNKING", 0.0), ("EMBEDDING", 0.0), ("WRITING", 1.0)]
    assert w.embedder.calls == 2  # 3 chunks, at most 2 per call


async def test_embedding_goes_longest_first_across_the_document_and_rows_stay_in_chunk_order() -> None:
    w = World(embed_chunks=2, embedder=FakeEmbedder(by_text=True))
    assert await w.handle() is Outcome.ACK
    # as encode() orders one call: each call pads to similar lengths
    assert w.embedder.batches == [["second paragraph", "first paragraph"], ["third"]]
    doc = w.store.documents[w.msg.document_id]
    assert doc.embeddings is not None
    for chunk, row in zip(doc.chunks, doc.embeddings, strict=True):
        np.testing.assert_array_equal(row, w.embedder.vector(chunk.content))


async def test_a_progress_write_fenced_out_stops_the_run_before_embedding() -> None:
    w = World()

    def taken_over() -> None:  # another worker claims the task while this one parses
        w.store.tasks[w.msg.task_id].attempt += 1

    w.extractor.on_chunking = taken_over
    assert await w.handle() is Outcome.ACK
    assert w.embedder.calls == 0 and w.store.embedding_runs == 0
    assert w.store.skips == [SkipReason.STALE_GENERATION.value]
    assert w.store.tasks[w.msg.task_id].progress == [("PARSING", 0.0)]


# ------------------------------------------------------------------ the model turn (PREFETCH > 1)


class GatedEmbedder(FakeEmbedder):
    """Each ``embed`` call records its first text and waits until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.started: list[str] = []

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.started.append(texts[0])
        await self.gate.wait()
        return await super().embed(texts)


async def _until(probe: Callable[[], bool], limit_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit_s
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


def _two_documents(**cfg: float) -> tuple[World, IndexMessage, GatedEmbedder]:
    embedder = GatedEmbedder()
    w = World(embedder=embedder, objects=FakeObjectStore({"k1": TEXT, "k2": b"other one\n\nother two"}), **cfg)
    second = w.store.add_document()
    w.store.documents[second.document_id].content = dataclasses.replace(
        w.store.documents[second.document_id].content, object_key="k2")
    return w, second, embedder


async def test_a_second_delivery_is_parsed_while_the_first_embeds_and_embeds_after_it() -> None:
    w, second, embedder = _two_documents()
    first = asyncio.create_task(w.handler.handle(w.msg, delay_attempts=0))
    await _until(lambda: len(embedder.started) == 1)
    other = asyncio.create_task(w.handler.handle(second, delay_attempts=0))
    await _until(lambda: w.store.tasks[second.task_id].status is TaskStatus.RUNNING
                 and w.extractor.calls == 2)  # claimed and chunked while the first holds the model
    assert embedder.started == ["second paragraph"]  # the second waits for the model turn
    embedder.gate.set()
    assert await asyncio.gather(first, other) == [Outcome.ACK, Outcome.ACK]
    assert embedder.started == ["second paragraph", "other one"]  # first come, first served
    assert {w.store.tasks[m.task_id].status for m in (w.msg, second)} == {TaskStatus.SUCCESS}
    assert [c.content for c in w.store.documents[second.document_id].chunks] == ["other one", "other two"]


async def test_the_wait_for_the_model_turn_does_not_count_against_the_budget() -> None:
    w, second, embedder = _two_documents(budget_base_s=0.2)
    embedder.gate.set()
    async with asyncio.timeout(None) as holder, w.handler.deps.model_turn.hold(holder):  # another delivery's turn
        other = asyncio.create_task(w.handler.handle(second, delay_attempts=0))
        await _until(lambda: w.extractor.calls == 1)
        await asyncio.sleep(0.4)  # twice the budget passes while the delivery waits for the turn
        assert not other.done() and embedder.started == []
    assert await other is Outcome.ACK
    assert w.store.tasks[second.task_id].status is TaskStatus.SUCCESS
    # what the user saw meanwhile: MODEL_WAIT, not CHUNKING at 0 %
    assert w.store.tasks[second.task_id].progress[:3] == [("PARSING", 0.0), ("CHUNKING", 0.0), ("MODEL_WAIT", 0.0)]


async def test_the_budget_still_counts_the_tasks_own_time_after_the_wait() -> None:
    w, second, _ = _two_documents(budget_base_s=0.2, embed_stall_timeout_s=60.0)
    async with asyncio.timeout(None) as holder, w.handler.deps.model_turn.hold(holder):
        other = asyncio.create_task(w.handler.handle(second, delay_attempts=0))
        await _until(lambda: w.extractor.calls == 1)
        await asyncio.sleep(0.3)
    assert await other is Outcome.ACK  # the gate stays closed: its own embedding outlives the limit
    t = w.store.tasks[second.task_id]
    assert (t.status, t.error_code) == (TaskStatus.TIMEOUT, TaskTimeoutError.error_code)
    assert t.error_message == "task exceeded its budget of 0.2 s"
    assert not w.handler.deps.model_turn.locked()  # the timed-out task gave its turn back


@pytest.mark.parametrize("owner, model_calls", [(1, 1), (2, 2)], ids=["same user", "another user"])
async def test_a_copy_waiting_for_the_model_turn_is_served_by_the_cache(owner: int, model_calls: int) -> None:
    """With PREFETCH 2 two copies run at once: the second's turn starts while the first is still
    committing (its cache write not done), yet its chunks never reach the model: the turn hands
    its fresh vectors on, to the same user only (the cache is per user)."""
    embedder = GatedEmbedder()
    w = World(embedder=embedder, cache_enabled=True)
    copy = w.store.add_document(user_id=owner, kb_id=owner)  # same stored text → same chunks
    real_commit, first_committing = w.store.commit_chunks, asyncio.Event()

    async def slow_commit(commit: ChunkCommit) -> bool:
        if commit.document_id == w.msg.document_id:
            await first_committing.wait()  # the first run is still in its commit
        return await real_commit(commit)

    w.store.commit_chunks = slow_commit  # type: ignore[method-assign]
    first = asyncio.create_task(w.handler.handle(w.msg, delay_attempts=0))
    await _until(lambda: len(embedder.started) == 1)
    second = asyncio.create_task(w.handler.handle(copy, delay_attempts=0))
    await _until(lambda: w.extractor.calls == 2)
    embedder.gate.set()
    assert await second is Outcome.ACK  # done while the first has not committed
    assert not first.done()
    first_committing.set()
    assert await first is Outcome.ACK
    assert (embedder.calls, w.store.cache_misses) == (model_calls, 3 * model_calls)
    assert len(w.store.documents[copy.document_id].chunks) == 3 and len(w.store.cache) == 3 * model_calls


# ------------------------------------------------------------------ the retrying ports


async def test_the_retrying_store_retries_a_transient_failure_and_gives_up_after_its_attempts() -> None:
    store = FakeStore()
    msg = store.add_document()
    store.fail_next["document_source"] = DatabaseUnavailableError("down")
    source = await RetryingWorkerStore(store, Retry(2, 0.0, 0.0)).document_source(msg.document_id)
    assert source is not None and source.object_key == "k1"
    store.fail_next["document_source"] = DatabaseUnavailableError("down")
    with pytest.raises(DatabaseUnavailableError):
        await RetryingWorkerStore(store, Retry(1, 0.0, 0.0)).document_source(msg.document_id)


async def test_a_permanent_error_is_not_retried() -> None:
    embedder = FakeEmbedder(error=CorruptDocumentError("refused"))
    with pytest.raises(CorruptDocumentError):
        await RetryingEmbedder(embedder, Retry(5, 0.0, 0.0)).embed(["x"])
    assert embedder.calls == 1


async def test_a_heartbeat_waiting_on_the_commits_row_lock_does_not_hold_up_the_lock_renewal() -> None:
    """While the run's own commit holds the task row, its heartbeat waits on that row's lock: the
    Redis lock (TTL LOCK_TTL_S) must still be renewed every period, or a slow commit loses it."""
    w = World(lease_period_s=0.01)
    never = asyncio.Event()

    async def stuck(claim: object) -> bool:  # the UPDATE waits on the row the commit holds
        await never.wait()
        return True

    real_commit = w.store.commit_chunks

    async def slow_commit(commit: ChunkCommit) -> bool:
        await _until(lambda: w.locks.renewals >= 5)  # renewals go on while the heartbeat waits
        return await real_commit(commit)

    w.store.heartbeat = stuck  # type: ignore[method-assign,assignment]
    w.store.commit_chunks = slow_commit  # type: ignore[method-assign]
    async with asyncio.timeout(10):
        assert await w.handle() is Outcome.ACK
    assert w.store.tasks[w.msg.task_id].status is TaskStatus.SUCCESS
