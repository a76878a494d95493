"""The archive's one fenced transaction (``shared.adapters.postgres.repo.archives.expand_archive``)
against real PostgreSQL: all or nothing, fenced like ``commit_chunks``, no member twice on a
redelivery or a reindex, members kept (origin NULL) when the archive is deleted."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from shared.adapters.postgres.repo import archives as archives_repo
from shared.adapters.postgres.repo import documents as documents_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.domain.fencing import RequestKind
from shared.domain.messages import IndexMessage
from shared.domain.records import ArchiveCommit, ArchiveMember, Claim
from tests.integration.helpers import claim_attempt, issue, new_document


def _members(kb_id: int, paths: list[str], tag: str = "") -> list[ArchiveMember]:
    return [ArchiveMember(p, f"kb/{kb_id}/arc/{uuid.uuid4()}", "text/plain", 10 + i,
                          f"{tag}{i:x}".rjust(64, "a"), ) for i, p in enumerate(paths)]


def _commit(msg: IndexMessage, generation: int, attempt: int, members: list[ArchiveMember],
            warnings: tuple[str, ...] = ()) -> ArchiveCommit:
    return ArchiveCommit(Claim(msg.task_id, generation, attempt), msg.document_id, msg.kb_id, msg.user_id,
                         members, warnings)


async def _member_rows(conn: asyncpg.Connection, archive_id: int) -> list[asyncpg.Record]:
    return list(await conn.fetch(
        "SELECT d.id, d.filename, d.status, d.origin_member, t.status AS task_status,"
        " (SELECT count(*) FROM outbox o WHERE o.task_id = t.id) AS outbox"
        " FROM document_info d JOIN index_task t ON t.document_id = d.id"
        " WHERE d.origin_document_id = $1 ORDER BY d.id", archive_id))


async def test_expansion_creates_every_member_and_finishes_the_archive(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    attempt = await claim_attempt(db, msg.task_id, 1)
    assert attempt == 1
    members = _members(msg.kb_id, ["docs/a.txt", "b.pdf", "c/d/e.docx"])
    done = await archives_repo.expand_archive(db, _commit(msg, 1, attempt, members, ("bin/x.exe: not indexed",)))

    assert done is not None and len(done.rows) == 3 and not done.unused
    rows = await _member_rows(db, msg.document_id)
    assert [(r["filename"], r["origin_member"], r["status"], r["task_status"], r["outbox"]) for r in rows] == [
        (p, p, "INDEXING", "WAITING", 1) for p in ("docs/a.txt", "b.pdf", "c/d/e.docx")]
    archive = await db.fetchrow("SELECT status, chunk_count, warnings FROM document_info WHERE id = $1",
                                msg.document_id)
    assert (archive["status"], archive["chunk_count"]) == ("INDEXED", 0)
    assert "bin/x.exe: not indexed" in archive["warnings"]
    assert (await tasks_repo.load_task_snapshot(db, msg.task_id)).status == "SUCCESS"  # type: ignore[union-attr]


async def test_a_stale_attempt_creates_nothing(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    await claim_attempt(db, msg.task_id, 1)
    await claim_attempt(db, msg.task_id, 1)  # a redelivery claimed it again: attempt 2 owns it

    assert await archives_repo.expand_archive(db, _commit(msg, 1, 1, _members(msg.kb_id, ["a.txt"]))) is None
    assert await _member_rows(db, msg.document_id) == []
    assert await db.fetchval("SELECT status FROM document_info WHERE id = $1", msg.document_id) == "INDEXING"


async def test_a_constraint_failing_midway_leaves_nothing(db: asyncpg.Connection) -> None:
    """The third member's object key is another document's (``object_key`` is UNIQUE): the whole
    transaction rolls back, the first two members included, and the archive's task stays RUNNING."""
    msg, _ = await new_document(db)
    other, _ = await new_document(db)
    taken = await db.fetchval("SELECT object_key FROM document_info WHERE id = $1", other.document_id)
    attempt = await claim_attempt(db, msg.task_id, 1)
    assert attempt is not None
    members = _members(msg.kb_id, ["a.txt", "b.txt", "c.txt"])
    members[2] = ArchiveMember("c.txt", taken, "text/plain", 1, "f" * 64)

    with pytest.raises(asyncpg.UniqueViolationError):
        await archives_repo.expand_archive(db, _commit(msg, 1, attempt, members))
    assert await _member_rows(db, msg.document_id) == []
    assert await db.fetchval("SELECT count(*) FROM outbox WHERE user_id = $1", msg.user_id) == 1  # the upload's
    assert (await tasks_repo.load_task_snapshot(db, msg.task_id)).status == "RUNNING"  # type: ignore[union-attr]


async def test_a_redelivery_after_the_commit_creates_no_member_twice(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    attempt = await claim_attempt(db, msg.task_id, 1)
    assert attempt is not None
    members = _members(msg.kb_id, ["a.txt", "b.txt"])
    assert await archives_repo.expand_archive(db, _commit(msg, 1, attempt, members)) is not None

    # the same delivery again (the ack was lost): the task is SUCCESS, the fence refuses it
    assert await archives_repo.expand_archive(db, _commit(msg, 1, attempt, members)) is None
    assert await claim_attempt(db, msg.task_id, 1) is None
    # a reindex (generation 2) re-plans the same archive: the members exist, none is created again
    await issue(db, msg.task_id, RequestKind.REINDEX, force=True)
    attempt2 = await claim_attempt(db, msg.task_id, 2)
    assert attempt2 is not None
    again = _members(msg.kb_id, ["a.txt", "b.txt", "new.txt"], tag="b")
    done = await archives_repo.expand_archive(db, _commit(msg, 2, attempt2, again))
    assert done is not None and len(done.rows) == 1 and set(done.unused) == {again[0].object_key, again[1].object_key}
    assert [r["filename"] for r in await _member_rows(db, msg.document_id)] == ["a.txt", "b.txt", "new.txt"]


async def test_a_member_whose_bytes_the_kb_holds_is_reported_not_created(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    attempt = await claim_attempt(db, msg.task_id, 1)
    assert attempt is not None
    same = "0" * 64  # new_document's content hash: the archive document itself holds it
    members = [ArchiveMember("copy.txt", f"kb/{msg.kb_id}/arc/{uuid.uuid4()}", "text/plain", 5, same)]
    done = await archives_repo.expand_archive(db, _commit(msg, 1, attempt, members))
    assert done is not None and done.rows == [] and done.unused == [members[0].object_key]
    assert done.warnings == [f"copy.txt: not created (same content as document {msg.document_id})"]


async def test_deleting_the_archive_keeps_its_members(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    attempt = await claim_attempt(db, msg.task_id, 1)
    assert attempt is not None
    assert await archives_repo.expand_archive(db, _commit(msg, 1, attempt, _members(msg.kb_id, ["a.txt"])))

    member_id = (await _member_rows(db, msg.document_id))[0]["id"]
    assert await documents_repo.delete_document(db, msg.document_id)
    row = await db.fetchrow("SELECT origin_document_id, origin_member, status FROM document_info WHERE id = $1",
                            member_id)
    assert (row["origin_document_id"], row["origin_member"], row["status"]) == (None, "a.txt", "INDEXING")


async def test_document_reads_carry_the_origin_and_the_member_count(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    attempt = await claim_attempt(db, msg.task_id, 1)
    assert attempt is not None
    assert await archives_repo.expand_archive(db, _commit(msg, 1, attempt, _members(msg.kb_id, ["a.txt", "b.txt"])))

    archive = await documents_repo.get_document(db, msg.user_id, msg.document_id)
    assert archive is not None and (archive["member_count"], archive["origin_document_id"]) == (2, None)
    rows, total = await documents_repo.page_documents(db, msg.user_id, msg.kb_id, 0, 10, origin=msg.document_id)
    assert total == 2 and [r["filename"] for r in rows] == ["a.txt", "b.txt"]
    assert {(r["origin_document_id"], r["origin_filename"], r["member_count"]) for r in rows} == {
        (msg.document_id, "doc.txt", 0)}
    _, everything = await documents_repo.page_documents(db, msg.user_id, msg.kb_id, 0, 10)
    assert everything == 3
