"""Read-mostly queries for operators: metric samples, tokens, stuck-task lookups (one function per
statement, like :mod:`shared.adapters.postgres.repo`)."""

from __future__ import annotations

import asyncpg

from shared.adapters.postgres.repo.sql import ACTIVE_SQL
from shared.domain.records import OpsSample


async def ping(conn: asyncpg.Connection) -> bool:
    """True once the database answered a trivial statement (readiness)."""
    return bool(await conn.fetchval("SELECT true"))


async def outbox_backlog(conn: asyncpg.Connection) -> int:
    """Unpublished outbox rows (the partial index ``outbox_pending_idx``)."""
    return int(await conn.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL"))


async def sample(conn: asyncpg.Connection) -> OpsSample:
    """Outbox backlog, pending dead letters and active tasks by status (partial indexes only)."""
    row = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM outbox WHERE published_at IS NULL) AS outbox,"
        " (SELECT count(*) FROM dead_letter WHERE replayed_at IS NULL) AS dead"
    )
    active = await conn.fetch(
        "SELECT status, count(*) AS n, extract(epoch FROM now() - min(update_time))::float8 AS age"
        f" FROM index_task WHERE status IN {ACTIVE_SQL} GROUP BY status"
    )
    return OpsSample(int(row["outbox"]), int(row["dead"]),
                  {r["status"]: (int(r["n"]), float(r["age"] or 0.0)) for r in active})


async def user_id_by_name(conn: asyncpg.Connection, name: str) -> int | None:
    v = await conn.fetchval("SELECT id FROM app_user WHERE name = $1", name)
    return None if v is None else int(v)


async def list_tokens(conn: asyncpg.Connection, user_name: str | None) -> list[asyncpg.Record]:
    """Tokens (never the secret: id, user, a fingerprint = first 8 hex digits of the SHA-256,
    creation and revocation times), optionally of one user."""
    return list(await conn.fetch(
        "SELECT t.id, u.name AS user, left(encode(t.token_sha256, 'hex'), 8) AS fingerprint,"
        " t.create_time, t.revoked_at FROM api_token t JOIN app_user u ON u.id = t.user_id"
        " WHERE $1::text IS NULL OR u.name = $1 ORDER BY t.id",
        user_name,
    ))


async def revoke_token_id(conn: asyncpg.Connection, token_id: int) -> bool:
    return await conn.fetchval(
        "UPDATE api_token SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id", token_id
    ) is not None
