"""Fair dispatch against real PostgreSQL: the release statement never lets a user exceed K
dispatched tasks, whatever runs concurrently (relays, API uploads with inline release, tasks
ending), and every held row is released exactly once."""

from __future__ import annotations

import asyncio
import random

import asyncpg
import pytest

from shared.adapters.postgres.repo import outbox as outbox_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.domain.fencing import RequestKind
from tests.integration.helpers import issue, new_document, new_kb

K = 3


def _of(released: list[int], ids: set[int]) -> list[int]:
    """The released ids among ``ids`` (other tests' held rows share the database)."""
    return [i for i in released if i in ids]


async def _finish_one(pool: asyncpg.Pool, rng: random.Random) -> None:
    """A worker ends one dispatched task (frees a slot)."""
    async with pool.acquire() as conn:
        ids = await conn.fetch(
            "SELECT id FROM index_task WHERE dispatched_at IS NOT NULL AND status = 'WAITING'")
        if ids:
            await conn.execute("UPDATE index_task SET status = 'SUCCESS' WHERE id = $1",
                               rng.choice(ids)["id"])


async def _watch(pool: asyncpg.Pool, users: list[int], worst: dict[int, int], done: asyncio.Event) -> None:
    """Record the highest committed dispatched count of each of ``users`` until ``done``."""
    async with pool.acquire() as conn:
        while not done.is_set():
            for user, n in (await outbox_repo.dispatched_per_user(conn)).items():
                if user in users:
                    worst[user] = max(worst.get(user, 0), n)
            await asyncio.sleep(0)


async def _drain(pool: asyncpg.Pool, users: list[int], rng: random.Random) -> int:
    """Finish tasks and release until ``users`` have no held row; returns how many are left held."""
    held = -1
    async with pool.acquire() as conn:
        for _ in range(200):
            await _finish_one(pool, rng)
            await outbox_repo.release_held_outbox(conn, K, 100)
            held = await conn.fetchval(
                "SELECT count(*) FROM outbox WHERE released_at IS NULL AND user_id = ANY($1::bigint[])", users)
            if held == 0:
                break
    return int(held)


async def test_concurrent_releases_never_exceed_k(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        kbs = [await new_kb(conn) for _ in range(3)]
        for kb in kbs:  # a backlog: 25 held rows for each user (no inline release)
            for _ in range(25):
                await new_document(conn, kb, dispatch_limit=None)
    users = [u for u, _ in kbs]
    rng = random.Random(7)
    worst: dict[int, int] = {}
    done = asyncio.Event()

    async def relay() -> None:
        for _ in range(40):
            async with pool.acquire() as conn:
                await outbox_repo.release_held_outbox(conn, K, 4)
            await _finish_one(pool, rng)

    async def uploads() -> None:  # the API's inline release, racing the relays
        for i in range(15):
            async with pool.acquire() as conn:
                await new_document(conn, kbs[i % 3], dispatch_limit=K)

    watcher = asyncio.create_task(_watch(pool, users, worst, done))
    await asyncio.gather(*(relay() for _ in range(6)), uploads(), uploads())
    held = await _drain(pool, users, rng)
    done.set()
    await watcher
    assert held == 0, "every held row is released in the end"
    assert worst and max(worst.values()) <= K, worst
    assert max(worst.values()) == K, "the cap was reached (the test exercised it)"
    async with pool.acquire() as conn:  # one row per task (one generation each), all released
        per_task = await conn.fetch(
            "SELECT task_id, count(*) AS n, bool_and(released_at IS NOT NULL) AS all_released FROM outbox"
            " WHERE user_id = ANY($1::bigint[]) GROUP BY task_id", users)
    assert len(per_task) == 3 * 25 + 2 * 15
    assert all(r["n"] == 1 and r["all_released"] for r in per_task)


async def test_a_late_user_is_released_before_an_earlier_users_backlog(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        a, b = await new_kb(conn), await new_kb(conn)
        a_rows = [(await new_document(conn, a, dispatch_limit=2))[1] for _ in range(10)]
        assert [r.released for r in a_rows] == [True, True] + [False] * 8  # A took its K = 2 inline
        _, b_row = await new_document(conn, b, dispatch_limit=2)
        assert b_row.released, "B has free slots: released at once, ahead of A's backlog"
        mine = {r.id for r in a_rows}
        assert _of(await outbox_repo.release_held_outbox(conn, 2, 100), mine) == [], "A is at its cap"
        await conn.execute("UPDATE index_task SET status = 'SUCCESS' WHERE id = $1",
                           (await conn.fetchval("SELECT task_id FROM outbox WHERE id = $1", a_rows[0].id)))
        assert _of(await outbox_repo.release_held_outbox(conn, 2, 100), mine) == [a_rows[2].id], \
            "one slot freed: the next of A"


async def test_held_tasks_are_not_republished_by_the_scanner(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        kb = await new_kb(conn)
        held_msg, held = await new_document(conn, kb, dispatch_limit=None)
        sent_msg, _ = await new_document(conn, await new_kb(conn), dispatch_limit=2)
        assert not held.released
        await conn.execute("UPDATE index_task SET update_time = now() - interval '1 hour'"
                           " WHERE id = ANY($1::bigint[])", [held_msg.task_id, sent_msg.task_id])
        old = {r["id"] for r in await tasks_repo.active_tasks_older_than(conn, 60, 10_000)}
    assert sent_msg.task_id in old and held_msg.task_id not in old


@pytest.mark.parametrize("terminal", ["FAILED", "SUCCESS"])
async def test_a_retry_from_a_terminal_state_waits_for_a_slot(pool: asyncpg.Pool, terminal: str) -> None:
    async with pool.acquire() as conn:
        kb = await new_kb(conn)
        first, _ = await new_document(conn, kb, dispatch_limit=1)
        second, held = await new_document(conn, kb, dispatch_limit=1)
        assert not held.released
        await conn.execute("UPDATE index_task SET status = $2 WHERE id = $1", first.task_id, terminal)
        assert _of(await outbox_repo.release_held_outbox(conn, 1, 100), {held.id}) == [held.id]
        kind = RequestKind.RETRY if terminal == "FAILED" else RequestKind.REINDEX
        await issue(conn, first.task_id, kind, force=True)  # re-armed: gives up its slot, waits
        assert await conn.fetchval("SELECT dispatched_at FROM index_task WHERE id = $1", first.task_id) is None
        assert (await outbox_repo.dispatched_per_user(conn))[kb[0]] == 1, "only the second holds a slot"
        assert await conn.fetchval("SELECT dispatched_at IS NOT NULL FROM index_task WHERE id = $1", second.task_id)
