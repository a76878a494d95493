"""Reads of the event streams (``knowledge_service/streams.py``): what changed in a KB since a
watermark, and whether a stream may go on (its token unrevoked, its KB still there)."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from shared.adapters.postgres.repo.sql import _PENDING_JSON, _TASK_JSON, DOCUMENT_COLUMNS

# Documents of the KB whose row or task changed after $3 (indexes of sql/0016_stream_watermark.sql).
_CHANGED = (
    f"SELECT {DOCUMENT_COLUMNS}, {_TASK_JSON}, {_PENDING_JSON} FROM document_info d"
    " WHERE d.kb_id = $1 AND d.user_id = $2 AND d.id IN ("
    "  SELECT id FROM document_info WHERE kb_id = $1 AND update_time > $3"
    "  UNION SELECT document_id FROM index_task WHERE kb_id = $1 AND update_time > $3)"
    " ORDER BY d.id"
)


async def kb_changes(
    conn: asyncpg.Connection, user_id: int, kb_id: int, since: datetime | None
) -> tuple[datetime, list[asyncpg.Record], list[int]]:
    """``(now, documents, ids)``: the database's ``now()`` (the next watermark), the documents
    (as ``list_documents`` rows) of the user's KB changed after ``since`` (all of them when None),
    and the ids of every document of the KB (to notice removals). One snapshot (a read-only
    REPEATABLE READ transaction), three short index reads."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        now = await conn.fetchval("SELECT now()")
        if since is None:
            rows = await conn.fetch(
                f"SELECT {DOCUMENT_COLUMNS}, {_TASK_JSON}, {_PENDING_JSON} FROM document_info d"
                " WHERE d.kb_id = $1 AND d.user_id = $2 ORDER BY d.id", kb_id, user_id)
        else:
            rows = await conn.fetch(_CHANGED, kb_id, user_id, since)
        ids = await conn.fetch("SELECT id FROM document_info WHERE kb_id = $1 AND user_id = $2", kb_id, user_id)
    return now, list(rows), [r["id"] for r in ids]


async def stream_allowed(
    conn: asyncpg.Connection, token_sha256: bytes, user_id: int, kb_id: int | None = None
) -> tuple[bool, bool]:
    """``(token_ok, kb_ok)``: the token is unrevoked and still the user's; the KB (if given)
    still exists and is the user's (always True without ``kb_id``)."""
    r = await conn.fetchrow(
        "SELECT EXISTS (SELECT 1 FROM api_token WHERE token_sha256 = $1 AND revoked_at IS NULL AND user_id = $2)"
        " AS token_ok,"
        " ($3::bigint IS NULL OR EXISTS (SELECT 1 FROM knowledge_base WHERE id = $3 AND user_id = $2)) AS kb_ok",
        token_sha256, user_id, kb_id,
    )
    assert r is not None
    return bool(r["token_ok"]), bool(r["kb_ok"])
