"""A big document in parts, on the worker's side (ARCHITECTURE.md "Flow 3"), over the fakes: the
document run splits, every part is claimed under its own lock, embedded and staged, the last
one swaps; small documents keep the single path; stall and budget per unit."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from shared.domain.errors import EmbeddingRejectedError, TaskTimeoutError
from shared.domain.fencing import SkipReason
from shared.domain.messages import IndexMessage
from shared.domain.parts import PartStatus
from shared.domain.states import DocumentStatus, TaskStatus
from task_service.indexing.delivery import Outcome
from tests.fakes import FakeEmbedder, FakeObjectStore, FakePublisher
from tests.unit.test_indexing import GatedEmbedder, World, _until

#: 7 paragraphs → 7 chunks with the fake extractor; split at 4 into parts of 3: [0-2], [3-5], [6]
BIG = b"\n\n".join(f"paragraph number {i}".encode() for i in range(7))
SPLIT = {"split_min_chunks": 4, "part_chunks": 3}


def big_world(embedder: FakeEmbedder | None = None, **cfg: float) -> tuple[World, FakePublisher]:
    """A World whose document is BIG, split by SPLIT, with a publisher attached."""
    w = World(objects=FakeObjectStore({"k1": BIG}), embedder=embedder or FakeEmbedder(by_text=True),
              **{**SPLIT, **cfg})
    publisher = FakePublisher()
    w.handler.attach_publisher(publisher)
    return w, publisher


def part_messages(publisher: FakePublisher) -> list[IndexMessage]:
    return [IndexMessage.from_json(body) for body, *_ in publisher.sent]


async def handle(w: World, msg: IndexMessage) -> Outcome:
    outcome = await w.handler.handle(msg, delay_attempts=0)
    await w.handler.flush()
    return outcome


async def test_a_big_document_is_split_and_its_parts_published_without_embedding() -> None:
    w, publisher = big_world()
    assert await w.handle() is Outcome.ACK
    split = w.store.splits[w.msg.task_id]
    assert [(p.first_chunk, p.chunk_count) for p in split.parts.values()] == [(0, 3), (3, 3), (6, 1)]
    assert [m.part for m in part_messages(publisher)] == [0, 1, 2]
    assert {m.document() for m in part_messages(publisher)} == {w.msg}
    assert w.store.published() == [True, True, True]  # marked: the relay will not publish them again
    assert w.embedder.calls == 0 and w.store.tasks[w.msg.task_id].status is TaskStatus.RUNNING


async def test_every_part_embeds_its_chunks_and_the_last_swaps_one_contiguous_chunk_set() -> None:
    w, publisher = big_world()
    await w.handle()
    outcomes = [await handle(w, m) for m in part_messages(publisher)]
    assert outcomes == [Outcome.ACK] * 3
    doc = w.store.documents[w.msg.document_id]
    assert (w.store.tasks[w.msg.task_id].status, doc.status) == (TaskStatus.SUCCESS, DocumentStatus.INDEXED)
    assert [c.index for c in doc.chunks] == list(range(7)) and w.store.swaps == 1
    assert doc.embeddings is not None
    for chunk, row in zip(doc.chunks, doc.embeddings, strict=True):
        np.testing.assert_array_equal(row, w.embedder.vector(chunk.content))
    assert sorted(w.store.part_runs) == [(w.msg.task_id, p, 1) for p in range(3)]  # each part embedded once
    assert w.msg.task_id not in w.store.splits  # nothing left staged
    assert w.locks.taken == [w.msg.document_id] + [(w.msg.document_id, p) for p in range(3)]  # a lock per part


async def test_a_small_document_keeps_the_single_path() -> None:
    w, publisher = big_world(split_min_chunks=8)
    assert await w.handle() is Outcome.ACK
    assert w.store.tasks[w.msg.task_id].status is TaskStatus.SUCCESS
    assert publisher.sent == [] and w.store.splits == {} and w.store.part_runs == []


async def test_a_part_runs_while_the_documents_lock_is_held_and_waits_for_its_own() -> None:
    w, publisher = big_world()
    await w.handle()
    first, second, *_ = part_messages(publisher)
    w.locks.held.add(w.msg.document_id)  # another delivery of the document holds its lock
    assert await handle(w, first) is Outcome.ACK
    w.locks.held.add((w.msg.document_id, second.part or 0))
    assert await handle(w, second) is Outcome.DELAY  # the part's own lock is held
    assert w.store.splits[w.msg.task_id].parts[1].status is PartStatus.WAITING


async def test_a_part_delivered_again_is_never_embedded_twice_nor_after_the_swap() -> None:
    w, publisher = big_world()
    await w.handle()
    parts = part_messages(publisher)
    await handle(w, parts[0])
    assert await handle(w, parts[0]) is Outcome.ACK  # DONE: skipped
    for m in parts[1:]:
        await handle(w, m)
    chunks_before = list(w.store.documents[w.msg.document_id].chunks)
    assert await handle(w, parts[2]) is Outcome.ACK  # after the swap: nothing changes
    assert w.store.skips[0] == SkipReason.PART_DONE and len(w.store.skips) == 2
    assert len(w.store.part_runs) == 3 and w.store.swaps == 1
    assert w.store.documents[w.msg.document_id].chunks == chunks_before


async def test_the_document_delivered_again_after_the_split_is_skipped() -> None:
    w, _ = big_world()
    await w.handle()
    assert await w.handle() is Outcome.ACK
    assert w.store.skips == [SkipReason.ALREADY_SPLIT] and w.store.tasks[w.msg.task_id].attempt == 1


@pytest.mark.parametrize("how", ["delete", "replace"])
async def test_a_delete_or_replacement_while_parts_run_fences_them_out_and_leaves_nothing_staged(how: str) -> None:
    w, publisher = big_world()
    await w.handle()
    parts = part_messages(publisher)
    await handle(w, parts[0])
    if how == "delete":
        await w.store.delete_document(w.msg.document_id)
    else:
        w.store._drop_split(w.msg.task_id)  # what the generation-issuing transaction does
        w.store.documents[w.msg.document_id].generation += 1
        w.store.tasks[w.msg.task_id].generation += 1
    assert [await handle(w, m) for m in parts[1:]] == [Outcome.ACK, Outcome.ACK]
    assert w.store.splits == {} and len(w.store.part_runs) == 1 and w.store.swaps == 0
    assert w.store.skips == [SkipReason.TASK_MISSING if how == "delete" else SkipReason.STALE_GENERATION] * 2


async def test_a_part_that_fails_for_good_fails_the_task_and_deletes_the_split() -> None:
    w, publisher = big_world()
    await w.handle()
    w.embedder.error = EmbeddingRejectedError("400 input")
    assert await handle(w, part_messages(publisher)[1]) is Outcome.ACK
    t = w.store.tasks[w.msg.task_id]
    assert (t.status, t.error_code) == (TaskStatus.FAILED, EmbeddingRejectedError.error_code)
    assert w.store.splits == {}


async def test_a_stalled_model_times_the_part_out_with_the_stall_named() -> None:
    embedder = GatedEmbedder()  # never opens: no batch completes
    w, publisher = big_world(embedder=embedder, embed_stall_timeout_s=0.05)
    await w.handle()
    assert await handle(w, part_messages(publisher)[0]) is Outcome.ACK
    t = w.store.tasks[w.msg.task_id]
    assert (t.status, t.error_code, t.error_message) == (
        TaskStatus.TIMEOUT, TaskTimeoutError.error_code, "no embedded batch for 0.05 s")


async def test_a_parts_budget_grows_with_its_chunks() -> None:
    embedder = GatedEmbedder()
    w, publisher = big_world(embedder=embedder, budget_base_s=0.05, budget_per_chunk_s=0.01)
    await w.handle()
    assert await handle(w, part_messages(publisher)[0]) is Outcome.ACK  # 3 chunks: 0.05 + 3 x 0.01
    assert w.store.tasks[w.msg.task_id].error_message == "part 0 exceeded its budget of 0.08 s"


async def test_a_copy_of_a_split_document_is_served_by_the_cache_per_part() -> None:
    w, publisher = big_world(cache_enabled=True)
    await w.handle()
    for m in part_messages(publisher):
        await handle(w, m)
    calls = w.embedder.calls
    w.msg = w.store.add_document()  # same stored text, same user → every part hits
    publisher.sent.clear()
    await w.handle()
    assert [await handle(w, m) for m in part_messages(publisher)] == [Outcome.ACK] * 3
    assert w.embedder.calls == calls and w.store.tasks[w.msg.task_id].status is TaskStatus.SUCCESS


async def test_the_split_leaves_its_parts_to_the_relay_without_a_broker_session() -> None:
    w, _ = big_world()
    w.handler.attach_publisher(None)
    assert await w.handle() is Outcome.ACK
    assert w.store.published() == [False, False, False]  # still in the outbox, for the relay


async def test_parts_of_one_document_wait_for_the_model_turn_first_come_first_served() -> None:
    embedder = GatedEmbedder()
    w, publisher = big_world(embedder=embedder)
    await w.handle()
    parts = part_messages(publisher)
    runs = [asyncio.create_task(w.handler.handle(m, delay_attempts=0)) for m in parts]
    await _until(lambda: len(embedder.started) == 1)
    assert not any(r.done() for r in runs)  # the other two wait for the turn, claimed
    assert [w.store.splits[w.msg.task_id].parts[p].status for p in range(3)] == [PartStatus.RUNNING] * 3
    embedder.gate.set()
    assert await asyncio.gather(*runs) == [Outcome.ACK] * 3
    assert embedder.started == ["paragraph number 0", "paragraph number 3", "paragraph number 6"]
    assert w.store.swaps == 1


async def test_a_refused_part_publish_leaves_that_part_and_the_rest_to_the_relay() -> None:
    w, _ = big_world()
    w.handler.attach_publisher(FakePublisher(fail=True))
    assert await w.handle() is Outcome.ACK  # the split committed: the delivery is done
    assert w.store.published() == [False, False, False] and len(w.store.splits) == 1
