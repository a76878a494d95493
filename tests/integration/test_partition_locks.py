"""Issue 19 item 1: a session cut off inside its transaction ends, and its row locks delay only
their own document (never a scanner pass over all of them).

Real PostgreSQL; the partitioned session is a connection that stops talking inside its
transaction (what the server sees of a client behind a partition: nothing), or one behind a
frozen :class:`tests.tcp_proxy.TcpProxy`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from urllib.parse import urlsplit

import asyncpg
import pytest

from shared.adapters.postgres.pool import PoolConfig, connection, create_pool, row_locked
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.domain.errors import DatabaseUnavailableError
from shared.domain.scan_policy import ScanThresholds
from shared.settings import KnowledgeSettings
from task_service.jobs.scanner import ScanReport, scan_tasks
from tests.integration.conftest import Connect
from tests.integration.helpers import apoll, new_document
from tests.tcp_proxy import TcpProxy

LOCK_TIMEOUT_S = 0.5
IDLE_S = 1.0


@pytest.fixture
async def short_pool(settings: KnowledgeSettings) -> AsyncIterator[asyncpg.Pool]:
    """A production pool whose lock waits give up after 0.5 s and whose idle transactions end after 1 s."""
    config = replace(PoolConfig.from_settings(settings, max_size=4), lock_timeout_s=LOCK_TIMEOUT_S,
                     idle_in_transaction_timeout_s=IDLE_S)
    p = await create_pool(config, app_name="partition-test")
    yield p
    await p.close()


async def _running_task(conn: asyncpg.Connection, stale_s: float) -> tuple[int, int]:
    """A RUNNING task (claimed, attempt 1) last heard of ``stale_s`` seconds ago: ``(task_id, document_id)``."""
    msg, _ = await new_document(conn)
    assert await tasks_repo.claim_task(conn, msg.task_id, msg.generation) is not None
    await conn.execute("UPDATE index_task SET update_time = now() - make_interval(secs => $2),"
                       " start_time = now() - make_interval(secs => $2) WHERE id = $1", msg.task_id, stale_s)
    return msg.task_id, msg.document_id


async def _hold_row_locks(conn: asyncpg.Connection, document_id: int, task_id: int) -> None:
    """What a worker inside its commit holds: the document row and the task row, then silence."""
    await conn.execute("BEGIN")
    await conn.execute("SELECT 1 FROM document_info WHERE id = $1 FOR UPDATE", document_id)
    await conn.execute("UPDATE index_task SET stage = 'WRITING' WHERE id = $1", task_id)


async def test_a_session_silent_inside_its_transaction_is_ended_and_its_locks_freed(
    db: asyncpg.Connection, short_pool: asyncpg.Pool
) -> None:
    task_id, document_id = await _running_task(db, 0)
    await db.execute("UPDATE index_task SET status = 'RETRYING' WHERE id = $1", task_id)
    generation = await db.fetchval("SELECT generation FROM index_task WHERE id = $1", task_id)
    async with short_pool.acquire() as holder:  # a pooled session: it carries the idle timeout
        await _hold_row_locks(holder, document_id, task_id)
        pid = holder.get_server_pid()
        t0 = time.monotonic()
        with pytest.raises(DatabaseUnavailableError) as caught:  # a rival's claim gives up after lock_timeout
            async with connection(short_pool) as conn:
                await tasks_repo.claim_task(conn, task_id, generation)
        assert row_locked(caught.value)
        assert time.monotonic() - t0 < LOCK_TIMEOUT_S + 2

        async def claimed() -> bool:
            try:
                async with connection(short_pool) as conn:
                    return await tasks_repo.claim_task(conn, task_id, generation) is not None
            except DatabaseUnavailableError:
                return False

        await apoll(claimed, deadline_s=IDLE_S + 5, interval=0.2, what="the silent session ended by the server")
        assert time.monotonic() - t0 < IDLE_S + 5
        # the server ended that session: nothing it wrote can commit
        assert not await db.fetchval("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)",
                                     pid)
        assert await db.fetchval("SELECT stage FROM index_task WHERE id = $1", task_id) == "DOWNLOADING"


async def test_the_scanner_passes_over_a_locked_task_and_handles_the_others(
    db: asyncpg.Connection, connect: Connect, short_pool: asyncpg.Pool
) -> None:
    """"scan failed: canceling statement due to statement timeout" stopped the whole pass on
    main: one locked task (oldest first) now delays only itself."""
    locked_task, locked_doc = await _running_task(db, 3600)  # the oldest: the pass meets it first
    free_task, _ = await _running_task(db, 1800)
    holder = await connect()  # a client behind a partition, its session not (yet) ended
    await _hold_row_locks(holder, locked_doc, locked_task)
    th = ScanThresholds(heartbeat_timeout=timedelta(seconds=60), hard_limit=timedelta(hours=5),
                        requeue_after=timedelta(hours=5))
    report = ScanReport()
    t0 = time.monotonic()
    await asyncio.wait_for(scan_tasks(short_pool, th, report), timeout=30)
    assert time.monotonic() - t0 < 10
    assert free_task in report.timed_out and locked_task not in report.timed_out
    assert await db.fetchval("SELECT status FROM index_task WHERE id = $1", free_task) == "TIMEOUT"
    await holder.execute("ROLLBACK")
    report = ScanReport()
    await scan_tasks(short_pool, th, report)  # the next pass, once the rows are free
    assert locked_task in report.timed_out


async def test_a_frozen_proxy_holds_bytes_and_closes_nothing_until_healed(services_env: dict[str, str]) -> None:
    url = urlsplit(services_env["DATABASE_URL"])
    proxy = await TcpProxy.start(url.hostname or "127.0.0.1", url.port or 5432)
    try:
        conn = await asyncpg.connect(proxy.dsn(services_env["DATABASE_URL"]))
        proxy.freeze()
        query = asyncio.ensure_future(conn.fetchval("SELECT 41 + 1"))
        done, _ = await asyncio.wait({query}, timeout=0.5)
        assert not done and not conn.is_closed()  # silence, not an error
        proxy.heal()
        assert await asyncio.wait_for(query, timeout=5) == 42
        await conn.close()
    finally:
        await proxy.close()
