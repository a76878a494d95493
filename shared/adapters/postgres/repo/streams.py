"""Reads of the event streams (``knowledge_service/streams.py``): what changed in a KB since a
watermark, and whether a stream may go on (its token unrevoked, its KB still there)."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

from shared.adapters.postgres.repo.sql import DOCUMENT_COLUMNS, PENDING_JSON, TASK_JSON

# One statement, one snapshot: the watermark, every document id of the KB, and the ids of those
# whose row or task changed after $3 (the indexes of sql/0013_stream_watermark.sql). An idle poll
# is this one round trip.
_PROBE = (
    "SELECT now() AS now,"
    " ARRAY(SELECT id FROM document_info WHERE kb_id = $1 AND user_id = $2 ORDER BY id) AS ids,"
    " ARRAY(SELECT id FROM document_info WHERE kb_id = $1 AND user_id = $2 AND update_time > $3"
    "  UNION SELECT t.document_id FROM index_task t JOIN document_info d ON d.id = t.document_id"
    "   WHERE t.kb_id = $1 AND d.user_id = $2 AND t.update_time > $3) AS changed"
)
_DOCUMENTS = (
    f"SELECT {DOCUMENT_COLUMNS}, {TASK_JSON}, {PENDING_JSON} FROM document_info d"
    " WHERE d.id = ANY($1::bigint[]) AND d.user_id = $2 ORDER BY d.id"
)


async def kb_changes(
    conn: asyncpg.Connection, user_id: int, kb_id: int, since: datetime | None
) -> tuple[datetime, list[asyncpg.Record], list[int]]:
    """``(now, documents, ids)``: the database's ``now()`` (the next watermark), the documents
    (as ``list_documents`` rows) of the user's KB changed after ``since`` (all of them when None),
    and the ids of every document of the KB (to notice removals). One short statement; a second
    one only when something changed."""
    probe = await conn.fetchrow(_PROBE, kb_id, user_id, since or datetime.min.replace(tzinfo=UTC))
    assert probe is not None
    ids = list(probe["ids"])
    wanted = ids if since is None else list(probe["changed"])
    rows = list(await conn.fetch(_DOCUMENTS, wanted, user_id)) if wanted else []
    return probe["now"], rows, ids


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
