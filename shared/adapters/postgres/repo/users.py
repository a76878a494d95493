"""Repository of users, API tokens and knowledge bases.

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row.
"""

from __future__ import annotations

from typing import Any

import asyncpg


# ------------------------------------------------------------------ users, tokens, KBs
async def create_user(conn: asyncpg.Connection, name: str) -> int:
    return int(await conn.fetchval("INSERT INTO app_user (name) VALUES ($1) RETURNING id", name))


async def create_token(conn: asyncpg.Connection, user_id: int, token_sha256: bytes) -> int:
    return int(
        await conn.fetchval(
            "INSERT INTO api_token (user_id, token_sha256) VALUES ($1, $2) RETURNING id",
            user_id, token_sha256,
        )
    )


async def user_for_token(conn: asyncpg.Connection, token_sha256: bytes) -> int | None:
    """The user owning an unrevoked token with this SHA-256 (an index lookup on the digest)."""
    v = await conn.fetchval(
        "SELECT user_id FROM api_token WHERE token_sha256 = $1 AND revoked_at IS NULL", token_sha256
    )
    return None if v is None else int(v)


async def revoke_token(conn: asyncpg.Connection, token_sha256: bytes) -> bool:
    r = await conn.fetchval(
        "UPDATE api_token SET revoked_at = now() WHERE token_sha256 = $1 AND revoked_at IS NULL"
        " RETURNING id",
        token_sha256,
    )
    return r is not None


async def create_kb(conn: asyncpg.Connection, user_id: int, name: str, model: str, dim: int) -> asyncpg.Record:
    """The new row: ``kb_id, name, embedding_model, embedding_dim, create_time``."""
    row = await conn.fetchrow(
        "INSERT INTO knowledge_base (user_id, name, embedding_model, embedding_dim)"
        " VALUES ($1, $2, $3, $4) RETURNING id AS kb_id, name, embedding_model, embedding_dim, create_time",
        user_id, name, model, dim,
    )
    assert row is not None
    return row


async def create_knowledge_base(
    conn: asyncpg.Connection, user_id: int, name: str, model: str, dim: int
) -> dict[str, Any]:
    """:func:`create_kb` as a plain dict (the ``TaskStore`` port's answer)."""
    return dict((await create_kb(conn, user_id, name, model, dim)).items())


async def list_kbs(conn: asyncpg.Connection, user_id: int) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            "SELECT id AS kb_id, name, embedding_model, embedding_dim, create_time"
            " FROM knowledge_base WHERE user_id = $1 ORDER BY id",
            user_id,
        )
    )


async def kb_owned(conn: asyncpg.Connection, user_id: int, kb_id: int) -> bool:
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM knowledge_base WHERE id = $1 AND user_id = $2)", kb_id, user_id
        )
    )
