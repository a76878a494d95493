"""PostgreSQL adapters of the ``TaskStore`` and ``WorkerStore`` ports (asyncpg pool +
:mod:`shared.adapters.postgres.repo`).

Each method takes a pooled connection for one commit point; asyncpg / OS errors become
``DatabaseUnavailableError`` (``shared.adapters.postgres.pool.translate_errors``).
"""

from __future__ import annotations

import asyncpg

from shared.adapters.object_removal import remove_released_quietly
from shared.adapters.postgres.pool import Pooled, connection
from shared.adapters.postgres.repo import ann as ann_repo
from shared.adapters.postgres.repo import archives as archives_repo
from shared.adapters.postgres.repo import cache as cache_repo
from shared.adapters.postgres.repo import chunks as chunks_repo
from shared.adapters.postgres.repo import dead_letters as dead_letters_repo
from shared.adapters.postgres.repo import documents as documents_repo
from shared.adapters.postgres.repo import knowledge_bases as kb_repo
from shared.adapters.postgres.repo import ops as ops_repo
from shared.adapters.postgres.repo import outbox as outbox_repo
from shared.adapters.postgres.repo import parts as parts_repo
from shared.adapters.postgres.repo import runs as runs_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.adapters.postgres.repo import term_stats as term_stats_repo
from shared.adapters.postgres.repo import users as users_repo
from shared.adapters.s3 import ObjectStore
from shared.domain.errors import EnqueueContention, KnowledgeBaseNotFound
from shared.domain.fencing import EnqueueDecision, TaskSnapshot
from shared.domain.messages import IndexMessage
from shared.domain.records import ArchiveCommit, ArchiveExpanded, Duplicate, NewContent, OutboxRow, SplitCommit
from shared.ports import IssueRefused


class PgReleasedObjects:
    """:class:`shared.ports.ReleasedObjects` over the pool and the object store."""

    def __init__(self, pool: asyncpg.Pool, store: ObjectStore) -> None:
        self._pool = pool
        self._store = store

    async def remove_released(self, *, at_most: int = 100) -> None:
        await remove_released_quietly(self._pool, self._store, at_most=at_most)


class PgTaskStore:
    """:class:`shared.ports.TaskStore` over an asyncpg pool: one pooled connection per call; the
    plain reads and writes are the repository functions themselves (:class:`Pooled`)."""

    def __init__(self, pool: asyncpg.Pool, dispatch_limit: int | None = None) -> None:
        """``dispatch_limit``: K of fair dispatch (an upload or re-arm is released to the broker
        at once when its user has a free slot); None holds every new row for the relay."""
        self.pool = pool
        self._dispatch_limit = dispatch_limit

    load_task_snapshot = Pooled(tasks_repo.load_task_snapshot)
    count_in_flight = Pooled(tasks_repo.count_in_flight)
    mark_published = Pooled(outbox_repo.mark_published)
    delete_document = Pooled(documents_repo.delete_document)
    drop_pending = Pooled(documents_repo.drop_pending)
    pending_dead_letter = Pooled(dead_letters_repo.pending_dead_letter)
    mark_dead_letter_replayed = Pooled(dead_letters_repo.mark_dead_letter_replayed)
    create_knowledge_base = Pooled(users_repo.create_knowledge_base)
    rename_knowledge_base = Pooled(kb_repo.rename_knowledge_base)
    delete_knowledge_base = Pooled(kb_repo.delete_knowledge_base)

    async def create_document(
        self, *, user_id: int, kb_id: int, content: NewContent, in_flight_limit: int, dedup: bool = False,
    ) -> tuple[IndexMessage, OutboxRow] | Duplicate | None:
        for _ in range(3):
            try:
                return await self._create_or_find(user_id, kb_id, content, in_flight_limit, dedup)
            except asyncpg.ForeignKeyViolationError as exc:  # the KB was deleted while the body streamed
                raise KnowledgeBaseNotFound() from exc
            except asyncpg.UniqueViolationError as exc:
                if not documents_repo.is_content_conflict(exc):
                    raise
                # a concurrent identical upload took the KB's content slot: the next pass finds it
        raise EnqueueContention("the knowledge base's content slot kept changing under concurrent uploads")

    async def _create_or_find(
        self, user_id: int, kb_id: int, content: NewContent, in_flight_limit: int, dedup: bool
    ) -> tuple[IndexMessage, OutboxRow] | Duplicate | None:
        async with connection(self.pool) as conn, conn.transaction():
            if dedup:  # the read and the user's in-flight lock in one round trip
                same = await documents_repo.find_same_content(conn, kb_id, content.sha256, lock_user=user_id)
                if same is not None:
                    return Duplicate(same["document_id"], same["task_id"], same["status"], same["task_status"],
                                     same["index_generation"])
            if not await tasks_repo.reserve_in_flight_slot(conn, user_id, in_flight_limit, locked=dedup):
                return None
            return await documents_repo.create_document_with_task(
                conn, kb_id=kb_id, user_id=user_id, content=content, dedup_slot=dedup,
                dispatch_limit=self._dispatch_limit,
            )

    async def issue_generation(
        self, snap: TaskSnapshot, decision: EnqueueDecision, content: NewContent | None,
        *, in_flight_limit: int | None,
    ) -> tuple[IndexMessage, OutboxRow] | IssueRefused:
        async with connection(self.pool) as conn:
            if in_flight_limit is None:
                issued = await tasks_repo.try_issue_generation(conn, snap, decision, content, self._dispatch_limit)
            else:
                async with conn.transaction():
                    if not await tasks_repo.reserve_in_flight_slot(conn, snap.user_id, in_flight_limit):
                        return IssueRefused.OVER_CAP
                    issued = await tasks_repo.try_issue_generation(conn, snap, decision, content, self._dispatch_limit)
        return IssueRefused.LOST_RACE if issued is None else issued


class PgWorkerStore:
    """:class:`shared.ports.WorkerStore` over an asyncpg pool: the repository functions, each
    call on its own pooled connection (:class:`Pooled`)."""

    def __init__(self, pool: asyncpg.Pool, dispatch_limit: int | None = None) -> None:
        """``dispatch_limit``: K of fair dispatch (a split's first parts are released at once
        into its user's free slots); None holds every part row for the relay."""
        self.pool = pool
        self._dispatch_limit = dispatch_limit

    load_task_snapshot = Pooled(tasks_repo.load_task_snapshot)
    claim_task = Pooled(tasks_repo.claim_task)
    heartbeat = Pooled(tasks_repo.heartbeat)
    report_progress = Pooled(tasks_repo.report_progress)
    document_source = Pooled(documents_repo.document_source)
    claim_is_current = Pooled(tasks_repo.claim_is_current)
    record_embedding_run = Pooled(runs_repo.record_embedding_run)
    cache_lookup = Pooled(cache_repo.cache_lookup)
    cache_store = Pooled(cache_repo.cache_store)
    cache_touch = Pooled(cache_repo.cache_touch)
    record_skips = Pooled(runs_repo.record_skips)
    commit_chunks = Pooled(chunks_repo.commit_chunks)
    finish_unsuccessfully = Pooled(tasks_repo.finish_unsuccessfully)
    mark_published = Pooled(outbox_repo.mark_published)

    load_part_snapshot = Pooled(parts_repo.load_part_snapshot)
    claim_part = Pooled(parts_repo.claim_part)
    part_claim_is_current = Pooled(parts_repo.part_claim_is_current)
    read_part_chunks = Pooled(parts_repo.read_part_chunks)
    part_heartbeat = Pooled(parts_repo.part_heartbeat)
    report_part_progress = Pooled(parts_repo.report_part_progress)
    commit_part = Pooled(parts_repo.commit_part)
    finish_part_unsuccessfully = Pooled(parts_repo.finish_part_unsuccessfully)

    async def split_task(self, commit: SplitCommit) -> list[OutboxRow] | None:
        async with connection(self.pool) as conn:
            return await parts_repo.split_task(conn, commit, self._dispatch_limit)

    async def expand_archive(self, commit: ArchiveCommit) -> ArchiveExpanded | None:
        async with connection(self.pool) as conn:
            return await archives_repo.expand_archive(conn, commit, self._dispatch_limit)


class PgMaintenance:
    """The ``MaintenanceStore`` port over ``pool``: the worker's single-statement jobs (cache
    eviction, the fold of the keyword statistics, the gauge sample, the ANN job), each method the
    repository function on its own pooled connection."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    cache_evict = Pooled(cache_repo.cache_evict)
    fold_term_stats = Pooled(term_stats_repo.fold)
    pending_term_deltas = Pooled(term_stats_repo.pending)
    sample = Pooled(ops_repo.sample)
    kbs_needing_ann = Pooled(ann_repo.kbs_needing_ann)
    add_to_ann = Pooled(ann_repo.add_to_ann)
