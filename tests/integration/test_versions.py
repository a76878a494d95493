"""Document versions against real PostgreSQL and the real S3 server (issue 11, items 1 and 5):
the served version stays until the pending one commits; the fenced commit swaps them and queues
the replaced object; concurrent replacements release exactly the objects they superseded; the
orphan sweep removes only unreferenced objects older than its grace period."""

from __future__ import annotations

import asyncio
import io
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from shared.adapters import object_removal
from shared.adapters.postgres.repo import documents as documents_repo
from shared.adapters.postgres.repo import objects as objects_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.adapters.s3 import ObjectStore, StorageConfig
from shared.domain import records
from shared.domain.fencing import Action, EnqueueRequest, RequestKind, decide_enqueue
from shared.domain.messages import IndexMessage
from shared.domain.states import TaskStatus
from shared.settings import KnowledgeSettings
from task_service import cleanup
from tests.fakes import STALE
from tests.integration.conftest import Connect
from tests.integration.helpers import chunk_contents, chunk_set, claim_attempt, commit, index_document, new_document


def _content(kb_id: int, name: str) -> records.NewContent:
    return records.NewContent(name, "text/plain", 8, "1" * 64, f"kb/{kb_id}/{uuid.uuid4()}")


async def _replace(conn: asyncpg.Connection, task_id: int, content: records.NewContent) -> IndexMessage:
    """What the API's request loop does: decide on a fresh snapshot, apply conditionally, retry a lost race."""
    for _ in range(20):
        snap = await tasks_repo.load_task_snapshot(conn, task_id)
        assert snap is not None
        decision = decide_enqueue(snap, EnqueueRequest(RequestKind.NEW_CONTENT), datetime.now(UTC), STALE)
        assert decision.action is Action.ISSUE
        issued = await tasks_repo.try_issue_generation(conn, snap, decision, content)
        if issued is not None:
            return issued[0]
    raise AssertionError("never issued")


async def _doc(conn: asyncpg.Connection, document_id: int) -> asyncpg.Record:
    return await conn.fetchrow(
        "SELECT status, filename, object_key, pending_object_key, pending_filename, index_generation"
        " FROM document_info WHERE id = $1", document_id,
    )


async def _removals(conn: asyncpg.Connection) -> set[str]:
    return {r["object_key"] for r in await conn.fetch("SELECT object_key FROM object_removal")}


@pytest.fixture
async def clean_queue(db: asyncpg.Connection) -> None:
    await db.execute("DELETE FROM object_removal")


@pytest.mark.usefixtures("clean_queue")
async def test_pending_version_is_served_only_once_committed(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    await index_document(db, msg, 2, "old")
    served = await _doc(db, msg.document_id)
    new = _content(msg.kb_id, "v2.txt")

    gen2 = await _replace(db, msg.task_id, new)
    d = await _doc(db, msg.document_id)
    assert (d["status"], d["filename"], d["object_key"]) == ("INDEXED", "doc.txt", served["object_key"])
    assert (d["pending_filename"], d["pending_object_key"]) == ("v2.txt", new.object_key)
    assert await documents_repo.document_source(db, msg.document_id) == records.DocumentSource(
        new.object_key, "v2.txt", "text/plain")
    assert await _removals(db) == set()  # nothing released yet: the served object is still served

    attempt = await claim_attempt(db, msg.task_id, gen2.generation)
    assert attempt is not None
    assert await commit(db, msg, gen2.generation, attempt, *chunk_set(3, "new"))
    d = await _doc(db, msg.document_id)
    assert (d["status"], d["filename"], d["object_key"], d["pending_object_key"]) == (
        "INDEXED", "v2.txt", new.object_key, None)
    assert await _removals(db) == {served["object_key"]}  # queued by the commit, removed after it
    assert await chunk_contents(db, msg.document_id) == ["new chunk 0", "new chunk 1", "new chunk 2"]


@pytest.mark.usefixtures("clean_queue")
async def test_failed_pending_version_leaves_the_served_one(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    await index_document(db, msg, 2, "old")
    served = await _doc(db, msg.document_id)
    gen2 = await _replace(db, msg.task_id, _content(msg.kb_id, "blank.txt"))
    attempt = await claim_attempt(db, msg.task_id, gen2.generation)
    assert attempt is not None

    assert await tasks_repo.finish_unsuccessfully(
        db, records.Claim(msg.task_id, gen2.generation, attempt), document_id=msg.document_id,
        status=TaskStatus.FAILED, error_code="no_text", error_message="no extractable text",
    )
    d = await _doc(db, msg.document_id)
    assert (d["status"], d["filename"], d["object_key"]) == ("INDEXED", "doc.txt", served["object_key"])
    assert d["pending_filename"] == "blank.txt"
    assert await chunk_contents(db, msg.document_id) == ["old chunk 0", "old chunk 1"]
    row = await documents_repo.get_document(db, msg.user_id, msg.document_id)
    assert row is not None and row["pending"] is not None and row["status"] == "INDEXED"


@pytest.mark.usefixtures("clean_queue")
async def test_dropping_the_pending_version_fences_its_run(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    await index_document(db, msg, 1, "old")
    new = _content(msg.kb_id, "v2.txt")
    gen2 = await _replace(db, msg.task_id, new)
    attempt = await claim_attempt(db, msg.task_id, gen2.generation)
    assert attempt is not None

    assert await documents_repo.drop_pending(db, msg.document_id)
    assert not await documents_repo.drop_pending(db, msg.document_id)  # nothing left to drop
    assert not await commit(db, msg, gen2.generation, attempt, *chunk_set(2, "dropped"))
    d = await _doc(db, msg.document_id)
    assert (d["status"], d["filename"], d["pending_object_key"]) == ("INDEXED", "doc.txt", None)
    assert await chunk_contents(db, msg.document_id) == ["old chunk 0"]
    assert await _removals(db) == {new.object_key}
    task = await db.fetchrow("SELECT status, error_code FROM index_task WHERE id = $1", msg.task_id)
    assert (task["status"], task["error_code"]) == ("FAILED", "pending_dropped")


@pytest.mark.usefixtures("clean_queue")
@pytest.mark.parametrize("indexed", [True, False], ids=["served", "never-indexed"])
async def test_concurrent_replacements_release_exactly_what_they_superseded(
    db: asyncpg.Connection, connect: Connect, indexed: bool
) -> None:
    """Three replacements at once, each on its own connection: one object per live version stays."""
    msg, _ = await new_document(db)
    if indexed:
        await index_document(db, msg, 1, "old")
    first = await _doc(db, msg.document_id)
    contents = [_content(msg.kb_id, f"v{i}.txt") for i in range(3)]
    conns = [await connect() for _ in contents]
    try:
        await asyncio.gather(*(_replace(c, msg.task_id, n) for c, n in zip(conns, contents, strict=True)))
    finally:
        for c in conns:
            await c.close()
    d = await _doc(db, msg.document_id)
    live = {d["object_key"], d["pending_object_key"]} - {None}
    every = {first["object_key"], *(n.object_key for n in contents)}
    assert await _removals(db) == every - live  # each superseded object queued exactly once
    assert await db.fetchval("SELECT count(*) FROM object_removal") == len(every - live)
    if indexed:
        assert live == {first["object_key"], d["pending_object_key"]} and len(live) == 2
    else:
        assert len(live) == 1 and d["pending_object_key"] is None
    assert d["index_generation"] == 1 + 3  # one generation per replacement, none lost


# ------------------------------------------------------------------ real storage


@pytest.fixture
async def store(settings: KnowledgeSettings) -> ObjectStore:
    s = ObjectStore(StorageConfig.from_settings(settings))
    await s.ensure_bucket()
    return s


async def _put(store: ObjectStore, key: str) -> None:
    await store.put(key, io.BytesIO(b"content"), 7, 5 * 1024 * 1024)


@pytest.mark.usefixtures("clean_queue")
async def test_sweep_removes_only_old_unreferenced_objects(
    db: asyncpg.Connection, pool: asyncpg.Pool, store: ObjectStore
) -> None:
    msg, _ = await new_document(db)
    prefix = f"kb/sweep-{uuid.uuid4()}/"
    served, pending, orphan, released = (f"{prefix}{name}" for name in ("served", "pending", "orphan", "released"))
    await db.execute("UPDATE document_info SET object_key = $2 WHERE id = $1", msg.document_id, served)
    await db.execute("UPDATE document_info SET status = 'INDEXED' WHERE id = $1", msg.document_id)
    await _replace(db, msg.task_id, records.NewContent("p.txt", "text/plain", 7, "2" * 64, pending))
    for key in (served, pending, orphan, released):
        await _put(store, key)
    await objects_repo.queue_object_removal(db, released)

    # Within the grace period: only what a commit released goes; the young orphan may be an upload in flight.
    report = await cleanup.sweep_orphans(pool, store, grace_s=3600, prefix=prefix)
    assert report.released == 1 and report.orphans == [] and report.listed == 3
    assert [await store.exists(k) for k in (served, pending, orphan, released)] == [True, True, True, False]
    assert await _removals(db) == set()

    # Past the grace period: the unreferenced object goes, the served and pending ones stay.
    later = datetime.now(UTC) + timedelta(hours=2)
    report = await cleanup.sweep_orphans(pool, store, grace_s=3600, now=later, prefix=prefix, page=1)
    assert report.orphans == [orphan]
    assert [await store.exists(k) for k in (served, pending, orphan)] == [True, True, False]
    await documents_repo.delete_document(db, msg.document_id)
    assert await object_removal.remove_released(pool, store) == 2
    assert not await store.exists(served) and not await store.exists(pending)
