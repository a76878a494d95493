"""PostgreSQL adapters of the ``TaskStore`` and ``WorkerStore`` ports (asyncpg pool +
:mod:`shared.adapters.postgres.repo`).

Each method takes a pooled connection for one commit point; asyncpg / OS errors become
``DatabaseUnavailableError`` (``shared.adapters.postgres.pool.translate_errors``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg
import numpy.typing as npt

from shared.adapters.object_removal import remove_released_quietly
from shared.adapters.postgres.pool import connection
from shared.adapters.postgres.repo import cache as cache_repo
from shared.adapters.postgres.repo import chunks as chunks_repo
from shared.adapters.postgres.repo import dead_letters as dead_letters_repo
from shared.adapters.postgres.repo import documents as documents_repo
from shared.adapters.postgres.repo import outbox as outbox_repo
from shared.adapters.postgres.repo import runs as runs_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.adapters.s3 import ObjectStore
from shared.domain.errors import EnqueueContention
from shared.domain.fencing import EnqueueDecision, TaskSnapshot
from shared.domain.messages import IndexMessage
from shared.domain.records import Chunk, Duplicate, NewContent, OutboxRow, SkipRecord
from shared.domain.states import TaskStatus
from shared.ports import IssueRefused


class PgReleasedObjects:
    """:class:`shared.ports.ReleasedObjects` over the pool and the object store."""

    def __init__(self, pool: asyncpg.Pool, store: ObjectStore) -> None:
        self._pool = pool
        self._store = store

    async def remove_released(self) -> None:
        await remove_released_quietly(self._pool, self._store)


class _DeadLetter:
    __slots__ = ("task_id",)

    def __init__(self, task_id: int | None) -> None:
        self.task_id = task_id


class PgTaskStore:
    """The task/document store over an asyncpg pool (or a single connection, for CLIs)."""

    def __init__(self, pool: asyncpg.Pool, dispatch_limit: int | None = None) -> None:
        """``dispatch_limit``: K of fair dispatch (an upload or re-arm is released to the broker
        at once when its user has a free slot); None holds every new row for the relay."""
        self._pool = pool
        self._dispatch_limit = dispatch_limit

    async def load_task_snapshot(self, task_id: int) -> TaskSnapshot | None:
        async with connection(self._pool) as conn:
            return await tasks_repo.load_task_snapshot(conn, task_id)

    async def count_in_flight(self, user_id: int) -> int:
        async with connection(self._pool) as conn:
            return await tasks_repo.count_in_flight(conn, user_id)

    async def create_document(
        self, *, user_id: int, kb_id: int, content: NewContent, in_flight_limit: int, dedup: bool = False,
    ) -> tuple[IndexMessage, OutboxRow] | Duplicate | None:
        for _ in range(3):
            try:
                return await self._create_or_find(user_id, kb_id, content, in_flight_limit, dedup)
            except asyncpg.UniqueViolationError as exc:
                if not documents_repo.is_content_conflict(exc):
                    raise
                # a concurrent identical upload took the KB's content slot: the next pass finds it
        raise EnqueueContention("the knowledge base's content slot kept changing under concurrent uploads")

    async def _create_or_find(
        self, user_id: int, kb_id: int, content: NewContent, in_flight_limit: int, dedup: bool
    ) -> tuple[IndexMessage, OutboxRow] | Duplicate | None:
        async with connection(self._pool) as conn, conn.transaction():
            if dedup:  # the read and the user's in-flight lock in one round trip
                same = await documents_repo.find_same_content(conn, kb_id, content.sha256, lock_user=user_id)
                if same is not None:
                    return Duplicate(same["document_id"], same["task_id"], same["status"], same["task_status"],
                                     same["index_generation"])
            if not await tasks_repo.reserve_in_flight_slot(conn, user_id, in_flight_limit, locked=dedup):
                return None
            return await documents_repo.create_document_with_task(
                conn, kb_id=kb_id, user_id=user_id, filename=content.filename,
                content_type=content.content_type, size_bytes=content.size_bytes, sha256=content.sha256,
                object_key=content.object_key, dedup_slot=dedup, dispatch_limit=self._dispatch_limit,
            )

    async def issue_generation(
        self, snap: TaskSnapshot, decision: EnqueueDecision, content: NewContent | None,
        *, in_flight_limit: int | None,
    ) -> tuple[IndexMessage, OutboxRow] | IssueRefused:
        async with connection(self._pool) as conn:
            if in_flight_limit is None:
                issued = await tasks_repo.try_issue_generation(conn, snap, decision, content, self._dispatch_limit)
            else:
                async with conn.transaction():
                    if not await tasks_repo.reserve_in_flight_slot(conn, snap.user_id, in_flight_limit):
                        return IssueRefused.OVER_CAP
                    issued = await tasks_repo.try_issue_generation(conn, snap, decision, content, self._dispatch_limit)
        return IssueRefused.LOST_RACE if issued is None else issued

    async def mark_published(self, outbox_id: int) -> None:
        async with connection(self._pool) as conn:
            await outbox_repo.mark_published(conn, outbox_id)

    async def delete_document(self, document_id: int) -> bool:
        async with connection(self._pool) as conn:
            return await documents_repo.delete_document(conn, document_id)

    async def drop_pending(self, document_id: int) -> bool:
        async with connection(self._pool) as conn:
            return await documents_repo.drop_pending(conn, document_id)

    async def pending_dead_letter(self, dead_letter_id: int) -> _DeadLetter | None:
        async with connection(self._pool) as conn:
            row = await dead_letters_repo.pending_dead_letter(conn, dead_letter_id)
        return None if row is None else _DeadLetter(row["task_id"])

    async def mark_dead_letter_replayed(self, dead_letter_id: int) -> bool:
        async with connection(self._pool) as conn:
            return await dead_letters_repo.mark_dead_letter_replayed(conn, dead_letter_id)


class PgWorkerStore:
    """:class:`shared.ports.WorkerStore` over an asyncpg pool: one pooled connection per call."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def load_task_snapshot(self, task_id: int) -> TaskSnapshot | None:
        async with connection(self._pool) as conn:
            return await tasks_repo.load_task_snapshot(conn, task_id)

    async def claim_task(self, task_id: int, generation: int) -> int | None:
        async with connection(self._pool) as conn:
            return await tasks_repo.claim_task(conn, task_id, generation)

    async def heartbeat(self, task_id: int, generation: int, attempt: int) -> bool:
        async with connection(self._pool) as conn:
            return await tasks_repo.heartbeat(conn, task_id, generation, attempt)

    async def report_progress(self, task_id: int, generation: int, attempt: int, stage: str, progress: float) -> bool:
        async with connection(self._pool) as conn:
            return await tasks_repo.report_progress(conn, task_id, generation, attempt, stage, progress)

    async def document_source(self, document_id: int) -> tuple[str, str, str | None] | None:
        async with connection(self._pool) as conn:
            return await documents_repo.document_source(conn, document_id)

    async def claim_is_current(self, task_id: int, generation: int, attempt: int) -> bool:
        async with connection(self._pool) as conn:
            return await tasks_repo.claim_is_current(conn, task_id, generation, attempt)

    async def record_embedding_run(
        self, task_id: int, document_id: int, generation: int, attempt: int, chunk_count: int, worker: str,
        *, cache_hits: int = 0, cache_misses: int | None = None,
    ) -> None:
        async with connection(self._pool) as conn:
            await runs_repo.record_embedding_run(conn, task_id, document_id, generation, attempt, chunk_count, worker,
                                               cache_hits=cache_hits, cache_misses=cache_misses)

    async def cache_lookup(
        self, model: str, revision: str, dim: int, keys: Sequence[bytes]
    ) -> dict[bytes, npt.NDArray[Any]]:
        async with connection(self._pool) as conn:
            return await cache_repo.cache_lookup(conn, model, revision, dim, keys)

    async def cache_store(
        self, model: str, revision: str, dim: int, keys: Sequence[bytes], vectors: npt.NDArray[Any]
    ) -> int:
        async with connection(self._pool) as conn:
            return await cache_repo.cache_store(conn, model, revision, dim, keys, vectors)

    async def cache_touch(self, model: str, revision: str, keys: Sequence[bytes], min_age_s: float) -> int:
        async with connection(self._pool) as conn:
            return await cache_repo.cache_touch(conn, model, revision, keys, min_age_s)

    async def record_skips(self, skips: Sequence[SkipRecord], worker: str) -> None:
        async with connection(self._pool) as conn:
            await runs_repo.record_skips(conn, skips, worker)

    async def commit_chunks(
        self, *, task_id: int, document_id: int, kb_id: int, generation: int, attempt: int,
        chunks: Sequence[Chunk], embeddings: npt.NDArray[Any], warnings: Sequence[str] = (),
    ) -> bool:
        async with connection(self._pool) as conn:
            return await chunks_repo.commit_chunks(
                conn, task_id=task_id, document_id=document_id, kb_id=kb_id, generation=generation,
                attempt=attempt, chunks=chunks, embeddings=embeddings, warnings=warnings,
            )

    async def finish_unsuccessfully(
        self, *, task_id: int, document_id: int, generation: int, attempt: int, status: TaskStatus,
        error_code: str, error_message: str, warnings: Sequence[str] = (),
    ) -> bool:
        async with connection(self._pool) as conn:
            return await tasks_repo.finish_unsuccessfully(
                conn, task_id=task_id, document_id=document_id, generation=generation, attempt=attempt,
                status=status, error_code=error_code, error_message=error_message, warnings=warnings,
            )
