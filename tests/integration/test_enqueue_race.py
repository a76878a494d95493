"""Ten concurrent retry requests on one FAILED task make exactly one transition (real PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime

import asyncpg

from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.bootstrap import UsecaseConfig, usecase_deps
from shared.domain.fencing import Action, EnqueueRequest, RequestKind, decide_enqueue
from shared.domain.messages import IndexMessage
from shared.domain.records import Claim
from shared.domain.states import TaskStatus
from shared.settings import KnowledgeSettings
from shared.usecases import request_enqueue
from tests.fakes import STALE
from tests.integration.helpers import claim_attempt, new_document

RACERS = 10
RETRY = EnqueueRequest(RequestKind.RETRY)


async def _failed_task(pool: asyncpg.Pool) -> IndexMessage:
    async with pool.acquire() as conn:
        msg, _ = await new_document(conn)
        attempt = await claim_attempt(conn, msg.task_id, 1)
        assert attempt is not None
        assert await tasks_repo.finish_unsuccessfully(
            conn, Claim(msg.task_id, 1, attempt), document_id=msg.document_id,
            status=TaskStatus.FAILED, error_code="corrupt_document", error_message="boom",
        )
    return msg


async def _assert_one_transition(pool: asyncpg.Pool, msg: IndexMessage) -> None:
    async with pool.acquire() as conn:
        snap = await tasks_repo.load_task_snapshot(conn, msg.task_id)
        outbox = await conn.fetch("SELECT body FROM outbox WHERE task_id = $1 ORDER BY id", msg.task_id)
    assert snap is not None
    assert (snap.generation, snap.document_generation) == (2, 2)
    assert (snap.status, snap.retry_count) == (TaskStatus.RETRYING, 1)
    assert [IndexMessage.from_json(r["body"].encode()).generation for r in outbox] == [1, 2]


async def test_concurrent_request_enqueue_issues_once(pool: asyncpg.Pool, settings: KnowledgeSettings) -> None:
    msg = await _failed_task(pool)
    deps = usecase_deps(UsecaseConfig.from_settings(settings), pool, objects=None, publisher=None)  # type: ignore[arg-type]  # unused here

    results = await asyncio.gather(*(request_enqueue(deps, msg.task_id, RETRY) for _ in range(RACERS)))

    assert Counter(r.action for r in results) == {Action.ISSUE: 1, Action.EXISTING: RACERS - 1}
    issued = [r.message for r in results if r.action is Action.ISSUE]
    assert issued[0] is not None and issued[0].generation == 2
    await _assert_one_transition(pool, msg)


async def test_racers_that_decided_on_the_same_snapshot_issue_once(pool: asyncpg.Pool) -> None:
    """Forces the race: every racer reads the FAILED snapshot and decides ISSUE before any applies it."""
    msg = await _failed_task(pool)
    barrier = asyncio.Barrier(RACERS)

    async def racer() -> bool:
        async with pool.acquire() as conn:
            snap = await tasks_repo.load_task_snapshot(conn, msg.task_id)
            assert snap is not None
            decision = decide_enqueue(snap, RETRY, datetime.now(UTC), STALE)
            assert decision.action is Action.ISSUE
            await barrier.wait()
            return await tasks_repo.try_issue_generation(conn, snap, decision) is not None

    assert sorted(await asyncio.gather(*(racer() for _ in range(RACERS)))) == [False] * (RACERS - 1) + [True]
    await _assert_one_transition(pool, msg)
