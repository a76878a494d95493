"""A big document in parts against real PostgreSQL (``shared.adapters.postgres.repo.parts``): the
split, part claims and stage commits fenced by (generation, part attempt), the swap inside the
last part's commit, and every generation-issuing or deleting transaction leaving nothing staged."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import numpy as np
import pytest

from shared.adapters.postgres.repo import documents as documents_repo
from shared.adapters.postgres.repo import knowledge_bases as kb_repo
from shared.adapters.postgres.repo import parts as parts_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.domain.fencing import RequestKind
from shared.domain.messages import IndexMessage
from shared.domain.parts import PartStatus, plan_parts
from shared.domain.records import Claim, PartClaim, PartCommit, PartCommitted, SplitCommit
from shared.domain.states import TaskStatus
from tests.integration.conftest import Connect
from tests.integration.helpers import chunk_contents, chunk_set, claim_attempt, index_document, issue, new_document

N, SIZE = 10, 4  # three parts: 4 + 4 + 2


async def _split(conn: asyncpg.Connection, *, dispatch_limit: int | None = 2,
                 served: int = 0) -> tuple[IndexMessage, Claim, np.ndarray]:
    """A document (with ``served`` chunks already indexed when > 0) claimed and split into three
    parts; its staged vectors-to-be (row i for chunk i)."""
    msg, _ = await new_document(conn)
    if served:
        await index_document(conn, msg, served, "old")
        msg = await issue(conn, msg.task_id, RequestKind.REINDEX, force=True)
    attempt = await claim_attempt(conn, msg.task_id, msg.generation)
    assert attempt is not None
    claim = Claim(msg.task_id, msg.generation, attempt)
    chunks, vecs = chunk_set(N, "new")
    rows = await parts_repo.split_task(conn, SplitCommit(
        claim, msg.document_id, msg.kb_id, msg.user_id, chunks, plan_parts(N, SIZE), ("a warning",)), dispatch_limit)
    assert rows is not None and [IndexMessage.from_json(r.body).part for r in rows] == [0, 1, 2]
    return msg, claim, vecs


async def _claim(conn: asyncpg.Connection, msg: IndexMessage, part: int) -> PartClaim:
    claim = await parts_repo.claim_part(conn, msg.task_id, part, msg.generation)
    assert claim is not None
    return claim


def _commit(msg: IndexMessage, claim: PartClaim, vecs: np.ndarray) -> PartCommit:
    return PartCommit(claim, msg.document_id, msg.kb_id, vecs[claim.first_chunk:claim.end_chunk])


async def _leftovers(conn: asyncpg.Connection, task_id: int) -> dict[str, int]:
    """Rows of the task's split still present (all 0 once the task is terminal or re-armed)."""
    return {
        table: int(await conn.fetchval(f"SELECT count(*) FROM {table} WHERE task_id = $1", task_id))
        for table in ("index_split", "index_part", "staged_chunk", "staged_vector")
    } | {"part_outbox": int(await conn.fetchval(
        "SELECT count(*) FROM outbox WHERE task_id = $1 AND part IS NOT NULL AND published_at IS NULL", task_id))}


NOTHING = {"index_split": 0, "index_part": 0, "staged_chunk": 0, "staged_vector": 0, "part_outbox": 0}


async def _indexed(conn: asyncpg.Connection, document_id: int) -> list[tuple[int, str]]:
    return [(r["chunk_index"], r["content"]) for r in await conn.fetch(
        "SELECT c.chunk_index, c.content FROM document_chunk c JOIN document_vector v ON v.chunk_id = c.id"
        " WHERE c.document_id = $1 ORDER BY c.chunk_index", document_id)]


async def test_split_then_parts_then_swap_gives_one_contiguous_chunk_set(db: asyncpg.Connection) -> None:
    msg, _, vecs = await _split(db, served=3)
    task = await db.fetchrow("SELECT stage, progress, dispatched_at FROM index_task WHERE id = $1", msg.task_id)
    assert (task["stage"], task["progress"], task["dispatched_at"]) == ("EMBEDDING", 0, None)
    assert await chunk_contents(db, msg.document_id) == [f"old chunk {i}" for i in range(3)]  # served kept
    outcomes = []
    for part in (2, 0, 1):
        claim = await _claim(db, msg, part)
        staged = await parts_repo.read_part_chunks(db, claim)
        assert staged is not None and [c.index for c in staged] == list(range(claim.first_chunk, claim.end_chunk))
        outcomes.append(await parts_repo.commit_part(db, _commit(msg, claim, vecs)))
        if outcomes[-1] is PartCommitted.STAGED:
            assert await chunk_contents(db, msg.document_id) == [f"old chunk {i}" for i in range(3)]
    assert outcomes == [PartCommitted.STAGED, PartCommitted.STAGED, PartCommitted.SWAPPED]
    assert await _indexed(db, msg.document_id) == [(i, f"new chunk {i}") for i in range(N)]
    stored = await db.fetch("SELECT c.chunk_index, v.embedding, v.ann FROM document_chunk c"
                            " JOIN document_vector v ON v.chunk_id = c.id WHERE c.document_id = $1"
                            " ORDER BY c.chunk_index", msg.document_id)
    assert np.allclose(np.stack([r["embedding"].to_numpy() for r in stored]), vecs, atol=1e-6)
    assert not any(r["ann"] for r in stored)  # the ANN job indexes them later, off the commit
    task = await db.fetchrow("SELECT status, progress FROM index_task WHERE id = $1", msg.task_id)
    doc = await db.fetchrow("SELECT status, chunk_count, warnings::text AS w FROM document_info WHERE id = $1",
                            msg.document_id)
    assert (task["status"], task["progress"]) == ("SUCCESS", 1)
    assert (doc["status"], doc["chunk_count"], json.loads(doc["w"])) == ("INDEXED", N, ["a warning"])
    assert await _leftovers(db, msg.task_id) == NOTHING  # unpublished part rows: duplicates now, deleted


async def test_progress_is_the_documents_over_all_parts(db: asyncpg.Connection) -> None:
    msg, _, vecs = await _split(db)
    first = await _claim(db, msg, 0)
    assert await parts_repo.report_part_progress(db, first, 2)
    assert await db.fetchval("SELECT progress FROM index_task WHERE id = $1", msg.task_id) == pytest.approx(0.2)
    assert await parts_repo.commit_part(db, _commit(msg, first, vecs)) is PartCommitted.STAGED
    second = await _claim(db, msg, 1)
    assert await parts_repo.report_part_progress(db, second, 3)
    assert await db.fetchval("SELECT progress FROM index_task WHERE id = $1", msg.task_id) == pytest.approx(0.7)


async def test_a_split_task_is_refused_by_claim_task_and_says_so_in_its_snapshot(db: asyncpg.Connection) -> None:
    msg, _, _ = await _split(db)
    snap = await tasks_repo.load_task_snapshot(db, msg.task_id)
    assert snap is not None and snap.split
    assert await tasks_repo.claim_task(db, msg.task_id, msg.generation) is None


async def test_a_second_split_of_the_same_claim_writes_nothing(db: asyncpg.Connection) -> None:
    msg, claim, _ = await _split(db)
    chunks, _ = chunk_set(N, "again")
    again = await parts_repo.split_task(db, SplitCommit(
        claim, msg.document_id, msg.kb_id, msg.user_id, chunks, plan_parts(N, SIZE)), 2)
    assert again is None
    assert (await _leftovers(db, msg.task_id))["staged_chunk"] == N


async def test_a_split_with_a_stale_attempt_writes_nothing(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    await claim_attempt(db, msg.task_id, 1)
    await claim_attempt(db, msg.task_id, 1)
    chunks, _ = chunk_set(N, "paused")
    assert await parts_repo.split_task(db, SplitCommit(
        Claim(msg.task_id, 1, 1), msg.document_id, msg.kb_id, msg.user_id, chunks, plan_parts(N, SIZE)), 2) is None
    assert await _leftovers(db, msg.task_id) == NOTHING


async def test_a_stale_part_attempt_or_generation_is_refused_with_nothing_written(db: asyncpg.Connection) -> None:
    msg, _, vecs = await _split(db)
    old = await _claim(db, msg, 0)
    new = await _claim(db, msg, 0)
    assert new.attempt == old.attempt + 1
    assert await parts_repo.commit_part(db, _commit(msg, old, vecs)) is PartCommitted.FENCED
    assert not await parts_repo.report_part_progress(db, old, 1)
    assert not await parts_repo.part_claim_is_current(db, old)
    assert await parts_repo.part_claim_is_current(db, new)
    other_gen = PartClaim(new.task_id, new.part, new.generation + 1, new.attempt, new.first_chunk, new.chunk_count)
    assert await parts_repo.commit_part(db, _commit(msg, other_gen, vecs)) is PartCommitted.FENCED
    assert (await _leftovers(db, msg.task_id))["staged_vector"] == 0
    part = await db.fetchrow("SELECT status, attempt FROM index_part WHERE task_id = $1 AND part = 0", msg.task_id)
    assert (part["status"], part["attempt"]) == ("RUNNING", new.attempt)


async def test_a_part_redelivered_after_the_swap_changes_nothing(db: asyncpg.Connection) -> None:
    msg, _, vecs = await _split(db)
    claims = [await _claim(db, msg, p) for p in range(3)]
    for claim in claims:
        await parts_repo.commit_part(db, _commit(msg, claim, vecs))
    before = await _indexed(db, msg.document_id)
    assert await parts_repo.claim_part(db, msg.task_id, 1, msg.generation) is None
    assert await parts_repo.commit_part(db, _commit(msg, claims[1], vecs)) is PartCommitted.FENCED
    snap = await parts_repo.load_part_snapshot(db, msg.task_id, 1)
    assert snap is not None and snap.state is None and snap.task.status == "SUCCESS"
    assert await _indexed(db, msg.document_id) == before


async def test_a_done_part_is_not_claimed_again(db: asyncpg.Connection) -> None:
    msg, _, vecs = await _split(db)
    claim = await _claim(db, msg, 0)
    await parts_repo.commit_part(db, _commit(msg, claim, vecs))
    assert await parts_repo.claim_part(db, msg.task_id, 0, msg.generation) is None
    snap = await parts_repo.load_part_snapshot(db, msg.task_id, 0)
    assert snap is not None and snap.state is not None and snap.state.status is PartStatus.DONE


async def test_two_last_parts_committing_concurrently_swap_exactly_once(connect: Connect) -> None:
    setup = await connect()
    for _ in range(5):  # the race each round: both stage commits wait on the document row
        msg, _, vecs = await _split(setup)
        first = await _claim(setup, msg, 0)
        await parts_repo.commit_part(setup, _commit(msg, first, vecs))
        a, b = await _claim(setup, msg, 1), await _claim(setup, msg, 2)
        c1, c2 = await connect(), await connect()
        outcomes = await asyncio.gather(parts_repo.commit_part(c1, _commit(msg, a, vecs)),
                                        parts_repo.commit_part(c2, _commit(msg, b, vecs)))
        assert sorted(outcomes) == sorted([PartCommitted.STAGED, PartCommitted.SWAPPED])
        assert await _indexed(setup, msg.document_id) == [(i, f"new chunk {i}") for i in range(N)]
        assert (await _leftovers(setup, msg.task_id))["index_split"] == 0


async def test_a_failed_part_fails_the_task_and_leaves_nothing_staged(db: asyncpg.Connection) -> None:
    msg, _, _ = await _split(db, dispatch_limit=None)  # rows held: none published
    claim = await _claim(db, msg, 1)
    assert await parts_repo.finish_part_unsuccessfully(
        db, claim, document_id=msg.document_id, status=TaskStatus.FAILED, error_code="embedding_failed",
        error_message="the model refused")
    r = await db.fetchrow("SELECT t.status, t.error_code, d.status AS doc, d.warnings::text AS w FROM index_task t"
                          " JOIN document_info d ON d.id = t.document_id WHERE t.id = $1", msg.task_id)
    assert (r["status"], r["error_code"], r["doc"], json.loads(r["w"])) == (
        "FAILED", "embedding_failed", "FAILED", ["a warning"])
    assert await _leftovers(db, msg.task_id) == NOTHING


async def test_retry_reindex_replace_and_pending_drop_while_parts_run_leave_nothing(db: asyncpg.Connection) -> None:
    # reindex (a takeover re-arms the running task with a new generation) and content replacement
    for kind in (RequestKind.REINDEX, RequestKind.NEW_CONTENT):
        msg, _, vecs = await _split(db, dispatch_limit=None)
        claim = await _claim(db, msg, 0)
        await db.execute("UPDATE index_task SET update_time = now() - interval '1 day' WHERE id = $1", msg.task_id)
        await issue(db, msg.task_id, kind, force=True)
        assert await _leftovers(db, msg.task_id) == NOTHING, kind
        assert await parts_repo.commit_part(db, _commit(msg, claim, vecs)) is PartCommitted.FENCED
        assert await parts_repo.read_part_chunks(db, claim) is None
    # pending drop: a served document whose new content runs in parts
    msg, _, vecs = await _split(db, dispatch_limit=None, served=3)
    await db.execute("UPDATE document_info SET pending_object_key = 'kb/x/pending', pending_filename = 'p.txt',"
                     " pending_size_bytes = 1, pending_sha256 = 'ab', pending_create_time = now() WHERE id = $1",
                     msg.document_id)
    claim = await _claim(db, msg, 2)
    assert await documents_repo.drop_pending(db, msg.document_id)
    assert await _leftovers(db, msg.task_id) == NOTHING
    assert await parts_repo.commit_part(db, _commit(msg, claim, vecs)) is PartCommitted.FENCED
    assert await chunk_contents(db, msg.document_id) == [f"old chunk {i}" for i in range(3)]


async def test_a_dead_lettered_part_fails_the_task_and_drops_the_split(db: asyncpg.Connection) -> None:
    msg, _, _ = await _split(db, dispatch_limit=None)
    await _claim(db, msg, 0)
    assert await tasks_repo.fail_dead_lettered(db, msg.task_id, msg.generation, "delivery_limit", "dead-lettered")
    assert await db.fetchval("SELECT status FROM index_task WHERE id = $1", msg.task_id) == "FAILED"
    assert await _leftovers(db, msg.task_id) == NOTHING


async def test_document_and_kb_delete_while_parts_run_leave_nothing(db: asyncpg.Connection) -> None:
    msg, _, vecs = await _split(db, dispatch_limit=None)
    claim = await _claim(db, msg, 0)
    assert await documents_repo.delete_document(db, msg.document_id)
    assert await _leftovers(db, msg.task_id) == NOTHING
    assert await parts_repo.commit_part(db, _commit(msg, claim, vecs)) is PartCommitted.FENCED
    msg, _, _ = await _split(db, dispatch_limit=None)
    assert await kb_repo.delete_knowledge_base(db, msg.user_id, msg.kb_id) == 1
    assert await _leftovers(db, msg.task_id) == NOTHING


async def test_the_split_releases_parts_into_free_slots_only(db: asyncpg.Connection) -> None:
    msg, _, _ = await _split(db, dispatch_limit=2)  # the task gave its slot up: two parts take the two slots
    rows = await db.fetch("SELECT part, released_at IS NOT NULL AS released FROM outbox"
                          " WHERE task_id = $1 AND part IS NOT NULL ORDER BY part", msg.task_id)
    assert [(r["part"], r["released"]) for r in rows] == [(0, True), (1, True), (2, False)]
    dispatched = await db.fetch("SELECT part FROM index_part WHERE task_id = $1 AND dispatched_at IS NOT NULL"
                                " ORDER BY part", msg.task_id)
    assert [r["part"] for r in dispatched] == [0, 1]


async def test_a_part_embedding_run_records_its_part(db: asyncpg.Connection) -> None:
    from shared.adapters.postgres.repo import runs as runs_repo

    msg, _, _ = await _split(db)
    claim = await _claim(db, msg, 1)
    await runs_repo.record_embedding_run(db, claim, msg.document_id, claim.chunk_count, "w1", cache_hits=1)
    r = await db.fetchrow("SELECT part, attempt, cache_misses FROM embedding_run WHERE task_id = $1", msg.task_id)
    assert (r["part"], r["attempt"], r["cache_misses"]) == (1, claim.attempt, claim.chunk_count - 1)


async def test_a_parts_done_frees_its_slot_for_the_relay(db: asyncpg.Connection) -> None:
    from shared.adapters.postgres.repo import outbox as outbox_repo

    msg, _, vecs = await _split(db, dispatch_limit=2)
    held = await db.fetchval("SELECT id FROM outbox WHERE task_id = $1 AND part = 2", msg.task_id)
    assert held not in await outbox_repo.release_held_outbox(db, 2, 10_000)  # parts 0 and 1 hold both slots
    first = await _claim(db, msg, 0)
    await parts_repo.commit_part(db, _commit(msg, first, vecs))
    assert held in await outbox_repo.release_held_outbox(db, 2, 10_000)
    assert (await outbox_repo.dispatched_per_user(db))[msg.user_id] == 2  # parts 1 and 2


async def test_another_users_upload_is_released_while_a_book_holds_its_users_slots(db: asyncpg.Connection) -> None:
    from shared.adapters.postgres.repo import outbox as outbox_repo

    msg, _, _ = await _split(db, dispatch_limit=2)
    _, row = await new_document(db, dispatch_limit=None)  # held, of another user
    assert not row.released
    assert row.id in await outbox_repo.release_held_outbox(db, 2, 10_000)
    assert await db.fetchval("SELECT released_at FROM outbox WHERE task_id = $1 AND part = 2", msg.task_id) is None


async def test_the_task_shows_its_parts_in_the_api_and_null_once_swapped(db: asyncpg.Connection) -> None:
    from knowledge_service.routes import _document
    from knowledge_service.schemas import TaskOut, TaskParts

    msg, _, vecs = await _split(db, dispatch_limit=None)

    async def parts() -> tuple[TaskParts | None, TaskParts | None]:
        task = TaskOut.model_validate(dict((await tasks_repo.get_task(db, msg.user_id, msg.task_id)).items()))
        doc = _document(await documents_repo.get_document(db, msg.user_id, msg.document_id))
        assert doc.task is not None
        return task.parts, doc.task.parts

    assert await parts() == (TaskParts(total=3, done=0, running=0, waiting=3),) * 2
    done = await _claim(db, msg, 1)
    await parts_repo.commit_part(db, _commit(msg, done, vecs))
    await _claim(db, msg, 0)
    assert await parts() == (TaskParts(total=3, done=1, running=1, waiting=1),) * 2
    for p in (0, 2):
        await parts_repo.commit_part(db, _commit(msg, await _claim(db, msg, p), vecs))
    assert await parts() == (None, None)


async def test_stage_model_wait_is_accepted(db: asyncpg.Connection) -> None:
    from knowledge_service.schemas import TaskOut

    msg, _ = await new_document(db)
    attempt = await claim_attempt(db, msg.task_id, msg.generation)
    assert attempt is not None
    assert await tasks_repo.report_progress(db, Claim(msg.task_id, msg.generation, attempt), "MODEL_WAIT", 0.0)
    row = await tasks_repo.get_task(db, msg.user_id, msg.task_id)
    assert TaskOut.model_validate(dict(row.items())).stage == "MODEL_WAIT"


async def test_a_retry_after_a_failed_part_starts_afresh_on_the_single_claim(db: asyncpg.Connection) -> None:
    msg, _, _ = await _split(db)
    claim = await _claim(db, msg, 0)
    assert await parts_repo.finish_part_unsuccessfully(
        db, claim, document_id=msg.document_id, status=TaskStatus.TIMEOUT, error_code="timeout",
        error_message="no embedded batch for 120 s")
    retried = await issue(db, msg.task_id, RequestKind.RETRY)
    assert await _leftovers(db, msg.task_id) == NOTHING
    assert await parts_repo.claim_part(db, msg.task_id, 0, retried.generation) is None  # no split any more
    assert await claim_attempt(db, msg.task_id, retried.generation) is not None  # the document run again
    snap = await tasks_repo.load_task_snapshot(db, msg.task_id)
    assert snap is not None and not snap.split


async def test_a_stale_generations_part_message_after_a_new_split_claims_nothing(db: asyncpg.Connection) -> None:
    """A reindex while parts run, then a second split at the new generation: a part message of
    the first generation claims nothing of the second split."""
    msg, _, _ = await _split(db, dispatch_limit=None)
    await db.execute("UPDATE index_task SET update_time = now() - interval '1 day' WHERE id = $1", msg.task_id)
    new = await issue(db, msg.task_id, RequestKind.REINDEX, force=True)
    attempt = await claim_attempt(db, msg.task_id, new.generation)
    assert attempt is not None
    chunks, _ = chunk_set(N, "second")
    assert await parts_repo.split_task(db, SplitCommit(Claim(msg.task_id, new.generation, attempt), msg.document_id,
                                                       msg.kb_id, msg.user_id, chunks, plan_parts(N, SIZE)), None)
    assert await parts_repo.claim_part(db, msg.task_id, 0, msg.generation) is None
    snap = await parts_repo.load_part_snapshot(db, msg.task_id, 0)
    assert snap is not None and snap.state is not None and snap.state.generation == new.generation


async def test_progress_heartbeats_and_commits_of_parts_side_by_side_do_not_deadlock(connect: Connect) -> None:
    """Every part write takes the task row before the part row (the lock order), so parts
    reporting progress while others commit, and the last one swapping, never deadlock."""
    setup = await connect()
    msg, _, vecs = await _split(setup, dispatch_limit=None)
    claims = [await _claim(setup, msg, p) for p in range(3)]
    conns = [await connect() for _ in range(6)]

    async def report(conn: asyncpg.Connection, claim: PartClaim) -> None:
        for i in range(30):
            await parts_repo.report_part_progress(conn, claim, i % claim.chunk_count)
            await parts_repo.part_heartbeat(conn, claim)

    async def commit(conn: asyncpg.Connection, claim: PartClaim) -> PartCommitted:
        await asyncio.sleep(0)
        return await parts_repo.commit_part(conn, _commit(msg, claim, vecs))

    results = await asyncio.gather(
        report(conns[0], claims[0]), report(conns[1], claims[1]), report(conns[2], claims[2]),
        commit(conns[3], claims[0]), commit(conns[4], claims[1]), commit(conns[5], claims[2]),
    )
    assert sorted(str(r) for r in results[3:]) == sorted(["staged", "staged", "swapped"])
    assert await _indexed(setup, msg.document_id) == [(i, f"new chunk {i}") for i in range(N)]


async def test_a_split_that_fails_midway_stages_nothing_and_the_claim_can_split_again(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    attempt = await claim_attempt(db, msg.task_id, msg.generation)
    assert attempt is not None
    claim = Claim(msg.task_id, msg.generation, attempt)
    chunks, _ = chunk_set(N, "bad")
    chunks[7] = chunks[7].__class__(7, "a NUL \x00 PostgreSQL text refuses", 3)  # COPY fails on the 8th row
    with pytest.raises(asyncpg.PostgresError):
        await parts_repo.split_task(db, SplitCommit(claim, msg.document_id, msg.kb_id, msg.user_id, chunks,
                                                    plan_parts(N, SIZE)), 2)
    assert await _leftovers(db, msg.task_id) == NOTHING
    assert await db.fetchval("SELECT stage FROM index_task WHERE id = $1", msg.task_id) == "DOWNLOADING"
    good, _ = chunk_set(N, "good")
    assert await parts_repo.split_task(db, SplitCommit(claim, msg.document_id, msg.kb_id, msg.user_id, good,
                                                       plan_parts(N, SIZE)), 2) is not None


async def test_a_last_part_failing_inside_the_swap_keeps_the_served_version_and_is_redone(
    db: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from shared import faults

    msg, _, vecs = await _split(db, served=3)
    for p in (0, 1):
        await parts_repo.commit_part(db, _commit(msg, await _claim(db, msg, p), vecs))
    last = await _claim(db, msg, 2)
    monkeypatch.setenv("RAG_FAULT_POINTS", "in_swap=fail:")
    faults._points.cache_clear()
    try:
        with pytest.raises(faults.StorageUnavailableError):
            await parts_repo.commit_part(db, _commit(msg, last, vecs))
    finally:
        monkeypatch.delenv("RAG_FAULT_POINTS")
        faults._points.cache_clear()
        faults._fired.discard("in_swap")
    assert await chunk_contents(db, msg.document_id) == [f"old chunk {i}" for i in range(3)]
    part = await db.fetchrow("SELECT status FROM index_part WHERE task_id = $1 AND part = 2", msg.task_id)
    assert part["status"] == "RUNNING"
    assert await db.fetchval("SELECT count(*) FROM staged_vector WHERE task_id = $1", msg.task_id) == 8
    redo = await _claim(db, msg, 2)  # the redelivery, another worker
    assert await parts_repo.commit_part(db, _commit(msg, redo, vecs)) is PartCommitted.SWAPPED
    assert await _indexed(db, msg.document_id) == [(i, f"new chunk {i}") for i in range(N)]


async def _cache_parts(conn: asyncpg.Connection, msg: IndexMessage, vecs: np.ndarray) -> int:
    """Cache every staged text of the split (as its parts do after their stage commits); the
    owner's entry count."""
    from shared.adapters.postgres.repo import cache as cache_repo
    from shared.domain.records import CacheNamespace

    keys = [bytes(r[0]) for r in await conn.fetch(
        "SELECT text_sha256 FROM staged_chunk WHERE task_id = $1 ORDER BY chunk_index", msg.task_id)]
    await cache_repo.cache_store(conn, msg.user_id, msg.document_id, CacheNamespace("m", "r", 384), keys, vecs)
    return int(await conn.fetchval("SELECT count(*) FROM embedding_cache WHERE user_id = $1", msg.user_id))


async def test_a_split_fenced_out_or_deleted_releases_the_cache_entries_its_parts_wrote(db: asyncpg.Connection) -> None:
    """What a delete of the document releases for its chunks it releases for its staged chunks too
    (a deleted or re-armed split leaves no cache entry no chunk of the owner holds)."""
    msg, _, vecs = await _split(db, dispatch_limit=None)
    assert await _cache_parts(db, msg, vecs) == N
    assert await documents_repo.delete_document(db, msg.document_id)
    assert await db.fetchval("SELECT count(*) FROM embedding_cache WHERE user_id = $1", msg.user_id) == 0
    msg, _, vecs = await _split(db, dispatch_limit=None)
    assert await _cache_parts(db, msg, vecs) == N
    await db.execute("UPDATE index_task SET update_time = now() - interval '1 day' WHERE id = $1", msg.task_id)
    await issue(db, msg.task_id, RequestKind.NEW_CONTENT, force=True)
    assert await db.fetchval("SELECT count(*) FROM embedding_cache WHERE user_id = $1", msg.user_id) == 0


async def test_the_swap_keeps_the_cache_entries_of_the_texts_it_swapped_in(db: asyncpg.Connection) -> None:
    msg, _, vecs = await _split(db, dispatch_limit=None)
    assert await _cache_parts(db, msg, vecs) == N
    for part in range(3):
        claim = await _claim(db, msg, part)
        await parts_repo.commit_part(db, _commit(msg, claim, vecs))
    assert await db.fetchval("SELECT status FROM index_task WHERE id = $1", msg.task_id) == "SUCCESS"
    assert await db.fetchval("SELECT count(*) FROM embedding_cache WHERE user_id = $1", msg.user_id) == N
