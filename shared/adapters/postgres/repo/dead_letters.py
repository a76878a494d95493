"""Repository of dead-lettered deliveries (record, list, replay).

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import asyncpg

from shared.domain.messages import IndexMessage


async def record_dead_letter(
    conn: asyncpg.Connection, *, message_id: str | None, msg: IndexMessage | None, reason: str, body: bytes,
    headers: dict[str, Any],
) -> int:
    return int(
        await conn.fetchval(
            "INSERT INTO dead_letter (message_id, task_id, document_id, generation, reason, body, headers)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb) RETURNING id",
            message_id, msg.task_id if msg else None, msg.document_id if msg else None,
            msg.generation if msg else None, reason, body, json.dumps(headers, default=str),
        )
    )


async def list_dead_letters(conn: asyncpg.Connection, include_replayed: bool = False) -> list[asyncpg.Record]:
    return list(
        await conn.fetch(
            "SELECT id, message_id, task_id, document_id, generation, reason, create_time, replayed_at"
            " FROM dead_letter WHERE $1 OR replayed_at IS NULL ORDER BY id",
            include_replayed,
        )
    )


@dataclass(frozen=True)
class PendingDeadLetter:
    """A dead letter not yet replayed (``task_id`` None: the message was not valid)."""

    task_id: int | None


async def pending_dead_letter(conn: asyncpg.Connection, dead_letter_id: int) -> PendingDeadLetter | None:
    task_id = await conn.fetchrow(
        "SELECT task_id FROM dead_letter WHERE id = $1 AND replayed_at IS NULL", dead_letter_id
    )
    return None if task_id is None else PendingDeadLetter(task_id["task_id"])


async def mark_dead_letter_replayed(conn: asyncpg.Connection, dead_letter_id: int) -> bool:
    return bool(await conn.fetchval(
        "UPDATE dead_letter SET replayed_at = now() WHERE id = $1 AND replayed_at IS NULL RETURNING id",
        dead_letter_id,
    ))
