"""Progress writes against real PostgreSQL: fenced by the current claim, reset by a new generation,
and the approximate queue position of waiting tasks."""

from __future__ import annotations

import asyncpg

from shared.adapters.postgres.repo import sql as sql_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.domain.fencing import RequestKind
from shared.domain.records import Claim
from tests.integration.helpers import chunk_set, claim_attempt, commit, issue, new_document


async def _progress(conn: asyncpg.Connection, task_id: int) -> tuple[str | None, float | None]:
    r = await conn.fetchrow("SELECT stage, progress FROM index_task WHERE id = $1", task_id)
    return r["stage"], r["progress"]


async def test_only_the_current_claim_writes_progress(db: asyncpg.Connection) -> None:
    msg, _ = await new_document(db)
    assert await _progress(db, msg.task_id) == (None, None)
    assert await claim_attempt(db, msg.task_id, 1) == 1
    assert await _progress(db, msg.task_id) == ("DOWNLOADING", 0.0)  # the claim starts a run
    assert await tasks_repo.report_progress(db, Claim(msg.task_id, 1, 1), "EMBEDDING", 0.25)
    assert await claim_attempt(db, msg.task_id, 1) == 2  # a takeover: attempt 1 is stale
    assert not await tasks_repo.report_progress(db, Claim(msg.task_id, 1, 1), "EMBEDDING", 0.75)
    assert not await tasks_repo.report_progress(db, Claim(msg.task_id, 2, 2), "EMBEDDING", 0.75)  # no such generation
    assert await _progress(db, msg.task_id) == ("DOWNLOADING", 0.0)
    assert await tasks_repo.report_progress(db, Claim(msg.task_id, 1, 2), "PARSING", 0.0)
    assert await commit(db, msg, 1, 2, *chunk_set(2, "done"))
    assert await _progress(db, msg.task_id) == ("WRITING", 1.0)
    assert not await tasks_repo.report_progress(db, Claim(msg.task_id, 1, 2), "EMBEDDING", 0.5)  # SUCCESS: not RUNNING


async def test_a_new_generation_clears_the_last_run_and_waits_in_line(db: asyncpg.Connection) -> None:
    first, _ = await new_document(db)
    second, _ = await new_document(db)
    rows = await db.fetch(f"SELECT {sql_repo.TASK_COLUMNS} FROM index_task t WHERE t.id = ANY($1::bigint[])",
                          [first.task_id, second.task_id])
    position = {r["task_id"]: r["queue_position"] for r in rows}
    assert position[second.task_id] == position[first.task_id] + 1  # uploaded later, one place behind
    await claim_attempt(db, first.task_id, 1)
    await tasks_repo.report_progress(db, Claim(first.task_id, 1, 1), "EMBEDDING", 0.5)
    await db.execute("UPDATE index_task SET status = 'FAILED' WHERE id = $1", first.task_id)
    retried = await issue(db, first.task_id, RequestKind.RETRY)
    row = await db.fetchrow(f"SELECT {sql_repo.TASK_COLUMNS} FROM index_task t WHERE t.id = $1", first.task_id)
    assert (row["status"], row["stage"], row["progress"]) == ("RETRYING", None, None)
    assert row["generation"] == retried.generation == 2
    behind = await db.fetchval(f"SELECT queue_position FROM (SELECT {sql_repo.TASK_COLUMNS} FROM index_task t"
                               " WHERE t.id = $1) x", second.task_id)
    assert row["queue_position"] > behind  # re-armed after the second one: now behind it
