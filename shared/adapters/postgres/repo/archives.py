"""Repository of an archive's expansion: ``expand_archive``, the archive's counterpart of
``commit_chunks`` (ARCHITECTURE.md "Flow 4: an archive").

Every function takes an open ``asyncpg`` connection. Lock order is always ``document_info`` row,
then ``index_task`` row (the archive's, then the new members' own, which nobody else sees yet).
"""

from __future__ import annotations

import asyncpg

from shared.adapters.postgres.repo.chunks import fence_claim, promote
from shared.adapters.postgres.repo.documents import find_same_content
from shared.adapters.postgres.repo.objects import queue_object_removal
from shared.adapters.postgres.repo.outbox import insert_outbox
from shared.adapters.postgres.repo.sql import Rollback
from shared.domain.messages import IndexMessage
from shared.domain.records import ArchiveCommit, ArchiveExpanded, ArchiveMember, OutboxRow
from shared.domain.states import DocumentStatus, TaskStatus
from shared.faults import fault_point

__all__ = ["expand_archive", "members_of"]


async def expand_archive(
    conn: asyncpg.Connection, commit: ArchiveCommit, dispatch_limit: int | None = None
) -> ArchiveExpanded | None:
    """ONE transaction, fenced on the archive's claim like ``commit_chunks``: per member not yet
    in the KB, its ``document_info`` (file name = member path, ``origin_document_id`` = the
    archive, generation 1, INDEXING), ``index_task`` (WAITING) and outbox row (released at once
    within the user's ``dispatch_limit`` slots, else held for the relay); then the archive's task
    SUCCESS and its document INDEXED with no chunks and the warnings.

    A member is not created when the archive already has one at that path (an earlier generation
    created it: a reindex re-plans) or when a document of the KB has its bytes (one warning each,
    as an upload's dedup answers). None when the fence is lost: nothing written (all or nothing).
    """
    try:
        async with conn.transaction():
            doc = await fence_claim(conn, commit.claim, commit.document_id)
            existing = await members_of(conn, commit.document_id)
            rows: list[OutboxRow] = []
            warnings, unused = list(commit.warnings), []
            for member in commit.members:
                if member.path in existing:
                    unused.append(member.object_key)
                    continue
                same = await find_same_content(conn, commit.kb_id, member.sha256)
                if same is not None:
                    warnings.append(f"{member.path}: not created (same content as document {same['document_id']})")
                    unused.append(member.object_key)
                    continue
                rows.append(await _create_member(conn, commit, member, dispatch_limit))
                await fault_point("in_expand")
            await conn.execute("DELETE FROM document_chunk WHERE document_id = $1", commit.document_id)
            await promote(conn, commit.document_id, 0, commit.claim.generation, warnings)
            if doc["pending_object_key"] is not None:  # the swap released the served object
                await queue_object_removal(conn, doc["object_key"])
    except Rollback:
        return None
    return ArchiveExpanded(rows, warnings, unused)


async def members_of(conn: asyncpg.Connection, archive_id: int) -> set[str]:
    """The member paths the archive document already has documents for."""
    rows = await conn.fetch("SELECT origin_member FROM document_info WHERE origin_document_id = $1", archive_id)
    return {r[0] for r in rows}


async def _create_member(
    conn: asyncpg.Connection, commit: ArchiveCommit, member: ArchiveMember, dispatch_limit: int | None
) -> OutboxRow:
    """Inside the expansion's transaction: the member's document, task and outbox row."""
    doc_id = await conn.fetchval(
        "INSERT INTO document_info (kb_id, user_id, filename, content_type, size_bytes, sha256, object_key,"
        " status, index_generation, origin_document_id, origin_member)"
        f" VALUES ($1,$2,$3,$4,$5,$6,$7,'{DocumentStatus.INDEXING}',1,$8,$3) RETURNING id",
        commit.kb_id, commit.user_id, member.path, member.content_type, member.size_bytes, member.sha256,
        member.object_key, commit.document_id,
    )
    task_id = await conn.fetchval(
        "INSERT INTO index_task (document_id, kb_id, user_id, generation, status)"
        f" VALUES ($1, $2, $3, 1, '{TaskStatus.WAITING}') RETURNING id",
        doc_id, commit.kb_id, commit.user_id,
    )
    msg = IndexMessage(task_id=int(task_id), document_id=int(doc_id), kb_id=commit.kb_id, user_id=commit.user_id,
                       generation=1)
    return await insert_outbox(conn, msg, dispatch_limit, new_task=True)
