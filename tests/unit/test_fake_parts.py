"""The in-memory WorkerStore's part flow (tests/fakes.py) keeps the real store's rules: the
handler's unit tests rely on them (the real store's are tests/integration/test_parts.py)."""

from __future__ import annotations

import numpy as np
import pytest

from shared.domain.fencing import Action, EnqueueDecision
from shared.domain.messages import IndexMessage
from shared.domain.parts import PartStatus, plan_parts
from shared.domain.records import Chunk, Claim, PartClaim, PartCommit, PartCommitted, SplitCommit
from shared.domain.states import DocumentStatus, TaskStatus
from tests.fakes import FakeStore

N, SIZE = 10, 4


async def _split(store: FakeStore) -> tuple[IndexMessage, Claim]:
    msg = store.add_document()
    claim = await store.claim_task(msg.task_id, msg.generation)
    assert claim is not None
    chunks = [Chunk(i, f"chunk {i}", 2) for i in range(N)]
    rows = await store.split_task(SplitCommit(claim, msg.document_id, msg.kb_id, msg.user_id, chunks,
                                              plan_parts(N, SIZE), ("a warning",)))
    assert rows is not None and [IndexMessage.from_json(r.body).part for r in rows] == [0, 1, 2]
    return msg, claim


def _vectors(claim: PartClaim) -> np.ndarray:
    return np.array([[float(claim.first_chunk + i)] * 4 for i in range(claim.chunk_count)], dtype=np.float32)


async def _run_part(store: FakeStore, msg: IndexMessage, part: int) -> PartCommitted:
    claim = await store.claim_part(msg.task_id, part, msg.generation)
    assert claim is not None
    chunks = await store.read_part_chunks(claim)
    assert chunks is not None and [c.index for c in chunks] == list(range(claim.first_chunk, claim.end_chunk))
    return await store.commit_part(PartCommit(claim, msg.document_id, msg.kb_id, _vectors(claim)))


async def test_split_then_parts_then_swap_gives_one_contiguous_chunk_set() -> None:
    store = FakeStore()
    msg, _ = await _split(store)
    assert [await _run_part(store, msg, p) for p in (2, 0, 1)] == [
        PartCommitted.STAGED, PartCommitted.STAGED, PartCommitted.SWAPPED]
    doc = store.documents[msg.document_id]
    assert [c.index for c in doc.chunks] == list(range(N)) and doc.status is DocumentStatus.INDEXED
    assert doc.embeddings is not None and doc.embeddings[:, 0].tolist() == list(range(N))
    assert store.tasks[msg.task_id].status is TaskStatus.SUCCESS and msg.task_id not in store.splits


async def test_a_split_task_is_not_claimed_again_and_its_snapshot_says_so() -> None:
    store = FakeStore()
    msg, _ = await _split(store)
    snap = await store.load_task_snapshot(msg.task_id)
    assert snap is not None and snap.split
    assert await store.claim_task(msg.task_id, msg.generation) is None


async def test_a_stale_part_attempt_is_refused_with_nothing_written() -> None:
    store = FakeStore()
    msg, _ = await _split(store)
    old = await store.claim_part(msg.task_id, 0, msg.generation)
    new = await store.claim_part(msg.task_id, 0, msg.generation)
    assert old is not None and new is not None and new.attempt == old.attempt + 1
    assert await store.commit_part(PartCommit(old, msg.document_id, msg.kb_id, _vectors(old))) is PartCommitted.FENCED
    assert store.splits[msg.task_id].vectors == {}
    assert not await store.report_part_progress(old, 1) and await store.report_part_progress(new, 1)


async def test_a_done_part_is_not_claimed_and_a_part_after_the_swap_changes_nothing() -> None:
    store = FakeStore()
    msg, _ = await _split(store)
    await _run_part(store, msg, 0)
    assert await store.claim_part(msg.task_id, 0, msg.generation) is None
    snap = await store.load_part_snapshot(msg.task_id, 0)
    assert snap is not None and snap.state is not None and snap.state.status is PartStatus.DONE
    await _run_part(store, msg, 1)
    await _run_part(store, msg, 2)
    assert await store.claim_part(msg.task_id, 1, msg.generation) is None
    after = await store.load_part_snapshot(msg.task_id, 1)
    assert after is not None and after.state is None and after.task.status is TaskStatus.SUCCESS


async def test_a_new_generation_drops_the_split_and_its_unpublished_part_rows() -> None:
    store = FakeStore()
    msg, _ = await _split(store)
    assert len(store.unpublished_part_rows(msg.task_id)) == 3
    part = await store.claim_part(msg.task_id, 0, msg.generation)
    snap = await store.load_task_snapshot(msg.task_id)
    assert snap is not None and part is not None
    issued = await store.issue_generation(snap, EnqueueDecision(Action.ISSUE, TaskStatus.WAITING), None,
                                          in_flight_limit=None)
    assert not isinstance(issued, str)
    assert msg.task_id not in store.splits and store.unpublished_part_rows(msg.task_id) == []
    assert await store.commit_part(PartCommit(part, msg.document_id, msg.kb_id, _vectors(part))) \
        is PartCommitted.FENCED


async def test_a_failed_part_fails_the_task_and_drops_the_split() -> None:
    store = FakeStore()
    msg, _ = await _split(store)
    part = await store.claim_part(msg.task_id, 1, msg.generation)
    assert part is not None
    assert await store.finish_part_unsuccessfully(part, document_id=msg.document_id, status=TaskStatus.FAILED,
                                                  error_code="embedding_failed", error_message="no")
    assert store.tasks[msg.task_id].status is TaskStatus.FAILED and msg.task_id not in store.splits


async def test_parts_that_do_not_cover_the_chunks_are_refused() -> None:
    store = FakeStore()
    msg = store.add_document()
    claim = await store.claim_task(msg.task_id, msg.generation)
    assert claim is not None
    with pytest.raises(ValueError):
        await store.split_task(SplitCommit(claim, msg.document_id, msg.kb_id, msg.user_id,
                                           [Chunk(i, "x", 1) for i in range(N)], plan_parts(N - 1, SIZE)))
