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


def dispatched_units_sql(user: str) -> str:
    """The user's dispatched units (``user``: the SQL expression of the user id, e.g. ``$2``):
    tasks with a dispatch slot that are active (a split task gives its slot up at the split)
    plus parts with a slot that are not DONE (``shared.domain.dispatch``: the unit is
    ``(task_id, part)``)."""
    return (
        f"((SELECT count(*) FROM index_task WHERE user_id = {user} AND dispatched_at IS NOT NULL"
        f"   AND status IN {ACTIVE_SQL})"
        " + (SELECT count(*) FROM index_part p JOIN index_task pt ON pt.id = p.task_id"
        f"   WHERE pt.user_id = {user} AND p.dispatched_at IS NOT NULL AND p.status <> 'DONE'))"
    )


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
        f" AND {dispatched_units_sql('$2')} < $3"
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


async def insert_part_outbox(
    conn: asyncpg.Connection, msgs: Sequence[IndexMessage], dispatch_limit: int | None
) -> list[OutboxRow]:
    """Inside the split's transaction: one outbox row per part message (``msg.part`` set, all of
    one task), in part order. With ``dispatch_limit`` (K) the first parts take the user's free
    slots now (under the dispatch lock; none while the user has older held rows: FIFO) and their
    rows are released; the rest are held for the relay's round-robin. None: all held."""
    if not msgs:
        return []
    free = 0
    if dispatch_limit is not None:
        await conn.execute(DISPATCH_LOCK_SQL)
        free = int(await conn.fetchval(
            f"SELECT CASE WHEN EXISTS (SELECT 1 FROM outbox WHERE user_id = $1 AND released_at IS NULL) THEN 0"
            f" ELSE greatest(0, $2 - {dispatched_units_sql('$1')}) END",
            msgs[0].user_id, dispatch_limit,
        ))
    released = [i < free for i in range(len(msgs))]
    if free:
        await conn.execute(
            "UPDATE index_part SET dispatched_at = now() WHERE task_id = $1 AND part = ANY($2::int[])",
            msgs[0].task_id, [m.part for m in msgs[:free]],
        )
    ids = [uuid.uuid4() for _ in msgs]
    bodies = [m.to_json() for m in msgs]
    oids = await conn.fetch(
        "INSERT INTO outbox (task_id, user_id, part, message_id, exchange, routing_key, body, released_at)"
        " SELECT $1, $2, p, m, $3, $4, b::jsonb, CASE WHEN r THEN now() END"
        " FROM unnest($5::int[], $6::uuid[], $7::text[], $8::bool[]) WITH ORDINALITY AS u(p, m, b, r, n)"
        " ORDER BY n RETURNING id, part",
        msgs[0].task_id, msgs[0].user_id, EXCHANGE, ROUTING_KEY, [m.part for m in msgs], ids,
        [b.decode() for b in bodies], released,
    )
    by_part = {int(r["part"]): int(r["id"]) for r in oids}
    return [OutboxRow(by_part[m.part], mid, EXCHANGE, ROUTING_KEY, body, m.task_id, m.generation,  # type: ignore[index]
                      rel)
            for m, mid, body, rel in zip(msgs, ids, bodies, released, strict=True)]


async def insert_part_row(conn: asyncpg.Connection, msg: IndexMessage, *, released: bool) -> OutboxRow:
    """Inside the caller's transaction: one outbox row of a part message (a re-publish),
    ``released`` (the part holds a slot) or held for the relay."""
    message_id = uuid.uuid4()
    body = msg.to_json()
    oid = await conn.fetchval(
        "INSERT INTO outbox (task_id, user_id, part, message_id, exchange, routing_key, body, released_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, CASE WHEN $8 THEN now() END) RETURNING id",
        msg.task_id, msg.user_id, msg.part, message_id, EXCHANGE, ROUTING_KEY, body.decode(), released,
    )
    return OutboxRow(int(oid), message_id, EXCHANGE, ROUTING_KEY, body, msg.task_id, msg.generation, released)


async def delete_part_outbox(conn: asyncpg.Connection, task_id: int) -> None:
    """Inside a transaction that ends a split (swap, failure, new generation): its part rows not
    yet published go. A row a relay is publishing right now is skipped (SKIP LOCKED: the caller
    holds the document row and must not wait on a publish); that message is skipped by the
    worker like any late part message."""
    await conn.execute(
        "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE task_id = $1 AND part IS NOT NULL"
        " AND published_at IS NULL FOR UPDATE SKIP LOCKED)",
        task_id,
    )


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
    users, each user up to ``dispatch_limit`` (K) dispatched units (a task, or one part of a
    split task: :func:`dispatched_units_sql`), at most ``limit`` rows
    (``shared.domain.dispatch.choose_releases`` decides). Returns the released outbox ids (oldest
    first). Task and part rows locked by another transaction (a worker committing, an API
    re-arming) are skipped this pass (SKIP LOCKED: the relay never waits on a row while holding
    the lock).
    """
    async with conn.transaction():
        await conn.execute(DISPATCH_LOCK_SQL)
        rows = await conn.fetch(
            "SELECT h.id, h.task_id, h.user_id, h.part FROM (SELECT DISTINCT user_id FROM outbox"
            "   WHERE released_at IS NULL) u"
            " CROSS JOIN LATERAL (SELECT o.id, o.task_id, o.user_id, o.part FROM outbox o"
            "   WHERE o.released_at IS NULL AND o.user_id = u.user_id ORDER BY o.id LIMIT $1) h",
            dispatch_limit,
        )
        if not rows:
            return []
        held = await _held_rows(conn, rows)
        users = sorted({r["user_id"] for r in rows})
        counts = {
            r["user_id"]: int(r["n"]) for r in await conn.fetch(
                f"SELECT u AS user_id, {dispatched_units_sql('u')} AS n FROM unnest($1::bigint[]) AS u", users,
            )
        }
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
            [c.task_id for c in chosen if c.needs_slot and c.part is None],
        )
        await conn.execute(
            "UPDATE index_part p SET dispatched_at = now() FROM unnest($1::bigint[], $2::int[]) AS u(t, n)"
            " WHERE p.task_id = u.t AND p.part = u.n AND p.dispatched_at IS NULL",
            *_unzip([(c.task_id, c.part) for c in chosen if c.needs_slot and c.part is not None]),
        )
    return sorted(c.outbox_id for c in chosen)


def _unzip(pairs: Sequence[tuple[int, int | None]]) -> tuple[list[int], list[int | None]]:
    return [t for t, _ in pairs], [p for _, p in pairs]


async def _held_rows(conn: asyncpg.Connection, rows: Sequence[asyncpg.Record]) -> list[HeldRow]:
    """The held rows as the dispatch decision sees them: whether each unit needs a slot (an
    active task or a part not DONE that holds none); rows whose task or part is locked elsewhere
    are left out (next pass)."""
    task_ids = sorted({r["task_id"] for r in rows})
    tasks = {
        r["id"]: r for r in await conn.fetch(
            "SELECT id, status, dispatched_at FROM index_task WHERE id = ANY($1::bigint[])"
            " ORDER BY id FOR UPDATE SKIP LOCKED",
            task_ids,
        )
    }
    present = {r["id"] for r in await conn.fetch("SELECT id FROM index_task WHERE id = ANY($1::bigint[])", task_ids)}
    part_keys = sorted({(r["task_id"], r["part"]) for r in rows if r["part"] is not None})
    parts = {
        (r["task_id"], r["part"]): r for r in await conn.fetch(
            "SELECT p.task_id, p.part, p.status, p.dispatched_at FROM index_part p"
            " JOIN unnest($1::bigint[], $2::int[]) AS u(t, n) ON p.task_id = u.t AND p.part = u.n"
            " ORDER BY p.task_id, p.part FOR UPDATE OF p SKIP LOCKED",
            *_unzip(part_keys),
        )
    } if part_keys else {}
    held: list[HeldRow] = []
    for r in rows:
        t = tasks.get(r["task_id"])
        if t is None and r["task_id"] in present:
            continue  # locked elsewhere: next pass
        if r["part"] is None:
            needs_slot = t is not None and t["status"] in ACTIVE and t["dispatched_at"] is None
        else:
            p = parts.get((r["task_id"], r["part"]))
            needs_slot = (t is not None and t["status"] in ACTIVE and p is not None
                          and p["status"] != "DONE" and p["dispatched_at"] is None)
        held.append(HeldRow(r["id"], r["task_id"], r["user_id"], needs_slot, r["part"]))
    return held


async def dispatched_per_user(conn: asyncpg.Connection) -> dict[int, int]:
    """``{user_id: units dispatched (in the broker or running: tasks, and parts not DONE)}`` for
    users with any."""
    return {
        int(r["user_id"]): int(r["n"]) for r in await conn.fetch(
            "SELECT user_id, sum(n)::bigint AS n FROM ("
            "  SELECT user_id, count(*) AS n FROM index_task"
            f"  WHERE dispatched_at IS NOT NULL AND status IN {ACTIVE_SQL} GROUP BY user_id"
            "  UNION ALL SELECT t.user_id, count(*) FROM index_part p JOIN index_task t ON t.id = p.task_id"
            "  WHERE p.dispatched_at IS NOT NULL AND p.status <> 'DONE' GROUP BY t.user_id) x GROUP BY user_id"
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
