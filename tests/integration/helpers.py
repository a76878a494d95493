"""Builders and an async poll for the integration tier (real services; no mocks)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

import asyncpg
import numpy as np

from shared.adapters.postgres.repo import chunks as chunks_repo
from shared.adapters.postgres.repo import documents as documents_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.adapters.postgres.repo import users as users_repo
from shared.domain.fencing import Action, EnqueueRequest, RequestKind, decide_enqueue
from shared.domain.messages import IndexMessage
from shared.domain.records import Chunk, ChunkCommit, Claim, NewContent, OutboxRow
from tests.fakes import STALE

T = TypeVar("T")
DIM = 384


async def apoll(fn: Callable[[], Awaitable[T | None]], *, deadline_s: float, interval: float = 0.05,
                what: str = "condition") -> T:
    """Await ``fn()`` until it returns something truthy; AssertionError after ``deadline_s`` seconds."""
    deadline = time.monotonic() + deadline_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = await fn()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {deadline_s}s waiting for {what} (last: {last!r})")


DISPATCH_LIMIT = 2  # K of the tests that do not set their own


async def new_document(conn: asyncpg.Connection, kb: tuple[int, int] | None = None, *,
                       dispatch_limit: int | None = DISPATCH_LIMIT) -> tuple[IndexMessage, OutboxRow]:
    """A document with its WAITING task (generation 1) and unpublished outbox row, released as the
    API would (``dispatch_limit`` = K; None holds it for the relay); in ``kb`` = ``(user_id,
    kb_id)``, else for a fresh user and KB."""
    user_id, kb_id = kb if kb is not None else await new_kb(conn)
    content = NewContent("doc.txt", "text/plain", 5, "0" * 64, f"kb/{kb_id}/{uuid.uuid4()}")
    return await documents_repo.create_document_with_task(
        conn, kb_id=kb_id, user_id=user_id, content=content, dispatch_limit=dispatch_limit,
    )


async def new_kb(conn: asyncpg.Connection) -> tuple[int, int]:
    """A fresh user and KB: ``(user_id, kb_id)``."""
    user_id = await users_repo.create_user(conn, f"it-{uuid.uuid4().hex}")
    return user_id, int((await users_repo.create_kb(conn, user_id, "kb", "all-MiniLM-L6-v2", DIM))["kb_id"])


def chunk_set(n: int, tag: str) -> tuple[list[Chunk], np.ndarray]:
    """``n`` chunks whose content starts with ``tag``, and ``(n, 384)`` unit float32 vectors."""
    rng = np.random.default_rng()
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [Chunk(i, f"{tag} chunk {i}", i + 1) for i in range(n)], vecs


async def commit(conn: asyncpg.Connection, msg: IndexMessage, generation: int, attempt: int,
                 chunks: list[Chunk], vecs: np.ndarray) -> bool:
    claim = Claim(msg.task_id, generation, attempt)
    return await chunks_repo.commit_chunks(conn, ChunkCommit(claim, msg.document_id, msg.kb_id, chunks, vecs))


async def claim_attempt(conn: asyncpg.Connection, task_id: int, generation: int) -> int | None:
    """Claim the task (``tasks_repo.claim_task``); the claim's attempt, None if not claimable."""
    claim = await tasks_repo.claim_task(conn, task_id, generation)
    return None if claim is None else claim.attempt


async def issue(conn: asyncpg.Connection, task_id: int, kind: RequestKind, *, force: bool = False) -> IndexMessage:
    """Decide and apply one enqueue request that must issue a new generation."""
    snap = await tasks_repo.load_task_snapshot(conn, task_id)
    assert snap is not None
    decision = decide_enqueue(snap, EnqueueRequest(kind, force), datetime.now(UTC), STALE)
    assert decision.action is Action.ISSUE, decision
    issued = await tasks_repo.try_issue_generation(conn, snap, decision)
    assert issued is not None
    return issued[0]


async def chunk_contents(conn: asyncpg.Connection, document_id: int) -> list[str]:
    rows = await conn.fetch(
        "SELECT content FROM document_chunk WHERE document_id = $1 ORDER BY chunk_index", document_id
    )
    return [r["content"] for r in rows]


async def index_document(conn: asyncpg.Connection, msg: IndexMessage, n: int, tag: str) -> None:
    """Claim ``msg``'s generation and commit ``n`` chunks tagged ``tag``."""
    attempt = await claim_attempt(conn, msg.task_id, msg.generation)
    assert attempt is not None
    assert await commit(conn, msg, msg.generation, attempt, *chunk_set(n, tag))
