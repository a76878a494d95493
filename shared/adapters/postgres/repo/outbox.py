"""Repository of the transactional outbox and the fair-dispatch release (one advisory lock per release).

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

import asyncpg

from shared.adapters.postgres.repo.sql import ACTIVE_SQL
from shared.domain.dispatch import HeldRow, choose_releases
from shared.domain.messages import EXCHANGE, ROUTING_KEY, IndexMessage
from shared.domain.records import OutboxRow
from shared.domain.states import ACTIVE

# ------------------------------------------------------------------ documents and tasks (API)


# Advisory lock serializing every decision that gives a task one of its user's K slots (the
# API's inline release and the relay's round-robin release): counts read under it stay true
# until commit, so no user ever exceeds K, however many API processes and relays run.
DISPATCH_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('rag:dispatch', 0))"


async def _release_now(
    conn: asyncpg.Connection, msg: IndexMessage, dispatch_limit: int | None, *, new_task: bool = False
) -> bool:
    """Inside the caller's transaction: whether the new outbox row of ``msg`` may go to the broker
    now. Yes when its task already holds a slot; else, with ``dispatch_limit`` (K) given, when
    the user has fewer than K dispatched tasks and no older held row (then the task takes a
    slot here, under the dispatch lock). Otherwise the row is held for the relay.

    ``new_task``: the task row was inserted by this transaction (it holds no slot yet), which
    saves the read of its slot.
    """
    if not new_task:
        dispatched = await conn.fetchval(
            f"SELECT dispatched_at IS NOT NULL AND status IN {ACTIVE_SQL} FROM index_task WHERE id = $1",
            msg.task_id,
        )
        if dispatched:
            return True
        if dispatched is None:
            return False
    if dispatch_limit is None:
        return False
    # the lock first, in its own statement: the check below then reads a snapshot taken after it
    await conn.execute(DISPATCH_LOCK_SQL)
    took = await conn.fetchval(
        "UPDATE index_task SET dispatched_at = now() WHERE id = $1"
        f" AND (SELECT count(*) FROM index_task WHERE user_id = $2 AND dispatched_at IS NOT NULL"
        f"      AND status IN {ACTIVE_SQL}) < $3"
        " AND NOT EXISTS (SELECT 1 FROM outbox WHERE user_id = $2 AND released_at IS NULL) RETURNING true",
        msg.task_id, msg.user_id, dispatch_limit,
    )
    return bool(took)


async def insert_outbox(
    conn: asyncpg.Connection, msg: IndexMessage, dispatch_limit: int | None, *, new_task: bool = False
) -> OutboxRow:
    """Inside the caller's transaction: the outbox row of ``msg``, released or held (see
    :func:`_release_now`)."""
    released = await _release_now(conn, msg, dispatch_limit, new_task=new_task)
    message_id = uuid.uuid4()
    body = msg.to_json()
    oid = await conn.fetchval(
        "INSERT INTO outbox (task_id, user_id, message_id, exchange, routing_key, body, released_at)"
        " VALUES ($1, $2, $3, $4, $5, $6::jsonb, CASE WHEN $7 THEN now() END) RETURNING id",
        msg.task_id, msg.user_id, message_id, EXCHANGE, ROUTING_KEY, body.decode(), released,
    )
    return OutboxRow(int(oid), message_id, EXCHANGE, ROUTING_KEY, body, msg.task_id, msg.generation, released)


# ------------------------------------------------------------------ outbox
async def mark_published(conn: asyncpg.Connection, outbox_id: int) -> None:
    await conn.execute(
        "UPDATE outbox SET published_at = now(), attempts = attempts + 1 WHERE id = $1"
        " AND published_at IS NULL",
        outbox_id,
    )


async def note_publish_failure(conn: asyncpg.Connection, outbox_id: int, error: str) -> None:
    await conn.execute(
        "UPDATE outbox SET attempts = attempts + 1, last_error = $2 WHERE id = $1", outbox_id, error[:2000]
    )


async def release_held_outbox(
    conn: asyncpg.Connection, dispatch_limit: int, limit: int
) -> list[int]:
    """ONE transaction, under the dispatch lock: release held outbox rows round-robin across
    users, each user up to ``dispatch_limit`` (K) dispatched tasks, at most ``limit`` rows
    (``shared.domain.dispatch.choose_releases`` decides). Returns the released outbox ids (oldest
    first). Task rows locked by another transaction (a worker committing, an API re-arming) are
    skipped this pass (SKIP LOCKED: the relay never waits on a row while holding the lock).
    """
    async with conn.transaction():
        await conn.execute(DISPATCH_LOCK_SQL)
        rows = await conn.fetch(
            "SELECT h.id, h.task_id, h.user_id FROM (SELECT DISTINCT user_id FROM outbox"
            "   WHERE released_at IS NULL) u"
            " CROSS JOIN LATERAL (SELECT o.id, o.task_id, o.user_id FROM outbox o"
            "   WHERE o.released_at IS NULL AND o.user_id = u.user_id ORDER BY o.id LIMIT $1) h",
            dispatch_limit,
        )
        if not rows:
            return []
        task_ids = sorted({r["task_id"] for r in rows})
        tasks = {
            r["id"]: r for r in await conn.fetch(
                "SELECT id, status, dispatched_at FROM index_task WHERE id = ANY($1::bigint[])"
                " ORDER BY id FOR UPDATE SKIP LOCKED",
                task_ids,
            )
        }
        present = {r["id"] for r in await conn.fetch(
            "SELECT id FROM index_task WHERE id = ANY($1::bigint[])", task_ids)}
        users = sorted({r["user_id"] for r in rows})
        counts = {
            r["user_id"]: int(r["n"]) for r in await conn.fetch(
                "SELECT user_id, count(*) AS n FROM index_task WHERE user_id = ANY($1::bigint[])"
                f" AND dispatched_at IS NOT NULL AND status IN {ACTIVE_SQL} GROUP BY user_id",
                users,
            )
        }
        held: list[HeldRow] = []
        for r in rows:
            t = tasks.get(r["task_id"])
            if t is None and r["task_id"] in present:
                continue  # locked elsewhere: next pass
            needs_slot = t is not None and t["status"] in ACTIVE and t["dispatched_at"] is None
            held.append(HeldRow(r["id"], r["task_id"], r["user_id"], needs_slot))
        chosen = choose_releases(held, counts, dispatch_limit, limit)
        if not chosen:
            return []
        await conn.execute(
            "UPDATE outbox SET released_at = now() WHERE id = ANY($1::bigint[]) AND released_at IS NULL",
            [c.outbox_id for c in chosen],
        )
        await conn.execute(
            "UPDATE index_task SET dispatched_at = now() WHERE id = ANY($1::bigint[])"
            " AND dispatched_at IS NULL",
            [c.task_id for c in chosen if c.needs_slot],
        )
    return sorted(c.outbox_id for c in chosen)


async def dispatched_per_user(conn: asyncpg.Connection) -> dict[int, int]:
    """``{user_id: tasks dispatched (in the broker or running)}`` for users with any."""
    return {
        int(r["user_id"]): int(r["n"]) for r in await conn.fetch(
            "SELECT user_id, count(*) AS n FROM index_task"
            f" WHERE dispatched_at IS NOT NULL AND status IN {ACTIVE_SQL} GROUP BY user_id"
        )
    }


async def claim_pending_outbox(
    conn: asyncpg.Connection, grace_s: float, limit: int, ids: Sequence[int] = ()
) -> list[OutboxRow]:
    """Lock released, unpublished rows older than ``grace_s`` seconds, or named in ``ids`` (rows
    this relay released itself: no inline publish is coming for them) — FOR UPDATE SKIP LOCKED:
    several relays may run. Held rows are never returned. Call inside a transaction; the locks
    hold until it ends."""
    rows = await conn.fetch(
        "SELECT id, message_id, exchange, routing_key, body::text AS body, task_id,"
        " (body->>'generation')::int AS generation FROM outbox"
        " WHERE published_at IS NULL AND released_at IS NOT NULL"
        " AND (create_time < now() - make_interval(secs => $1) OR id = ANY($3::bigint[]))"
        " ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED",
        grace_s, limit, list(ids),
    )
    return [
        OutboxRow(r["id"], r["message_id"], r["exchange"], r["routing_key"], _compact(r["body"]), r["task_id"],
                  r["generation"])
        for r in rows
    ]


def _compact(body: str) -> bytes:
    return json.dumps(json.loads(body), separators=(",", ":")).encode()
