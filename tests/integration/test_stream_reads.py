"""Issue 18: the KB stream's watermark reads on real PostgreSQL: the first read has every
document; later ones only the documents whose row or task changed after the watermark, the ids
of every document (removals), and nothing of another user's KB; the indexes of sql/0013 serve
them; the guard sees a revoked token and a deleted KB."""

from __future__ import annotations

import asyncpg

from knowledge_service.deps import token_digest
from shared.adapters.postgres.repo import streams as streams_repo
from shared.adapters.postgres.repo import users as users_repo
from tests.integration.conftest import Connect
from tests.integration.helpers import new_document, new_kb


async def _ids(rows: list[asyncpg.Record]) -> list[int]:
    return [int(r["document_id"]) for r in rows]


async def test_watermark_reads_only_what_changed(connect: Connect) -> None:
    conn = await connect()
    user_id, kb_id = await new_kb(conn)
    docs = [(await new_document(conn, (user_id, kb_id)))[0].document_id for _ in range(3)]
    other = (await new_document(conn))[0].document_id  # another user's KB
    now, rows, ids = await streams_repo.kb_changes(conn, user_id, kb_id, None)
    assert await _ids(rows) == docs and ids == docs
    assert rows[0]["task"] is not None  # the same row shape as the document list
    _, rows, ids = await streams_repo.kb_changes(conn, user_id, kb_id, now)
    assert rows == [] and ids == docs  # nothing changed since
    await conn.execute("UPDATE index_task SET progress = 0.5, update_time = now() WHERE document_id = $1", docs[1])
    await conn.execute("DELETE FROM document_info WHERE id = $1", docs[2])
    later, rows, ids = await streams_repo.kb_changes(conn, user_id, kb_id, now)
    assert await _ids(rows) == [docs[1]] and ids == docs[:2] and later >= now
    assert other not in ids
    _, rows, ids = await streams_repo.kb_changes(conn, user_id + 10_000_000, kb_id, None)
    assert rows == [] and ids == []  # not the owner: nothing


async def test_the_watermark_reads_use_the_kb_update_time_indexes(connect: Connect) -> None:
    conn = await connect()
    names = {r["indexname"] for r in await conn.fetch("SELECT indexname FROM pg_indexes")}
    assert {"document_info_kb_update_idx", "index_task_kb_update_idx"} <= names


async def test_the_guard_sees_a_revoked_token_and_a_deleted_kb(connect: Connect) -> None:
    conn = await connect()
    user_id, kb_id = await new_kb(conn)
    digest = token_digest("rag_stream_guard_" + str(kb_id))
    await users_repo.create_token(conn, user_id, digest)
    assert await streams_repo.stream_allowed(conn, digest, user_id, kb_id) == (True, True)
    assert await streams_repo.stream_allowed(conn, digest, user_id + 1, None) == (False, True)  # not the user's
    await conn.execute("DELETE FROM knowledge_base WHERE id = $1", kb_id)
    assert await streams_repo.stream_allowed(conn, digest, user_id, kb_id) == (True, False)
    assert await users_repo.revoke_token(conn, digest)
    assert await streams_repo.stream_allowed(conn, digest, user_id, None) == (False, True)
