"""Repository of ``object_removal``: the deferred deletion of stored objects.

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg


# ------------------------------------------------------------------ object removal (after commit)
async def queue_object_removal(conn: asyncpg.Connection, object_key: str) -> None:
    """Inside the transaction that stops referring to ``object_key``: remove it after commit."""
    await conn.execute("INSERT INTO object_removal (object_key) VALUES ($1)", object_key)


async def queue_object_removals(conn: asyncpg.Connection, object_keys: Sequence[str]) -> None:
    """:func:`queue_object_removal` of many keys in one statement."""
    if object_keys:
        await conn.execute("INSERT INTO object_removal (object_key) SELECT unnest($1::text[])", list(object_keys))


async def claim_object_removals(conn: asyncpg.Connection, limit: int) -> list[tuple[int, str]]:
    """``[(id, object_key)]`` queued for removal, locked (FOR UPDATE SKIP LOCKED: several
    cleaners may run). Call inside a transaction; delete the rows with :func:`forget_object_removals`."""
    rows = await conn.fetch(
        "SELECT id, object_key FROM object_removal ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED", limit
    )
    return [(int(r["id"]), str(r["object_key"])) for r in rows]


async def forget_object_removals(conn: asyncpg.Connection, ids: Sequence[int]) -> None:
    await conn.execute("DELETE FROM object_removal WHERE id = ANY($1::bigint[])", list(ids))


async def unreferenced_keys(conn: asyncpg.Connection, keys: Sequence[str]) -> list[str]:
    """The ``keys`` that no document refers to (as its served or its pending object)."""
    rows = await conn.fetch(
        "SELECT k FROM unnest($1::text[]) AS k WHERE NOT EXISTS (SELECT 1 FROM document_info WHERE object_key = k)"
        " AND NOT EXISTS (SELECT 1 FROM document_info WHERE pending_object_key = k)",
        list(keys),
    )
    return [str(r["k"]) for r in rows]
