"""SQL fragments shared by the repositories: status lists built from :mod:`shared.domain.states`,
column lists, JSON shapes.
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractAsyncContextManager, nullcontext
from enum import StrEnum

import asyncpg

from shared.domain.parts import PART_CLAIMABLE
from shared.domain.states import ACTIVE, CLAIMABLE, QUEUED, TaskStatus, sources_for


def sql_in(statuses: Collection[StrEnum]) -> str:
    """``('A','B')`` for ``status IN ...``: status lists come from :mod:`shared.domain.states`, never
    restated here (the values are enum members, not input)."""
    return "(" + ",".join(f"'{s.value}'" for s in sorted(statuses)) + ")"


def atomic(conn: asyncpg.Connection) -> AbstractAsyncContextManager[object]:
    """A transaction on ``conn``, or none when the caller already has one open (asyncpg would
    nest a SAVEPOINT: two more round trips, for a rollback point nobody uses)."""
    return nullcontext() if conn.is_in_transaction() else conn.transaction()


class Rollback(Exception):
    """Raised inside a transaction to roll it back when a fenced condition fails (the caller
    catches it and answers False / None: nothing was written)."""


# The status lists every query uses (public: the repositories share them; never restated).
ACTIVE_SQL = sql_in(ACTIVE)  # in flight: the per-user cap, the scanner, metrics
CLAIMABLE_SQL = sql_in(CLAIMABLE)
QUEUED_SQL = sql_in(QUEUED)  # published, waiting for a worker
PART_CLAIMABLE_SQL = sql_in(PART_CLAIMABLE)  # index_part rows a part claim may take


#: a dead-lettered message fails its task only while it is in flight (and FAILED is allowed)
DEAD_LETTER_FAILABLE_SQL = sql_in({s for s in ACTIVE if s.value in sources_for(TaskStatus.FAILED)})


TASK_COLUMNS = (
    "t.id AS task_id, t.document_id, t.kb_id, t.status, t.generation, t.attempt, t.retry_count,"
    " t.max_retry_count, t.error_code, t.error_message, t.start_time, t.end_time,"
    " t.create_time, t.update_time, t.stage, t.progress,"
    # approximate place in the queue: waiting tasks re-armed or re-published before this one, + 1
    f" CASE WHEN t.status IN {QUEUED_SQL} THEN 1 + (SELECT count(*) FROM index_task w"
    f"  WHERE w.status IN {QUEUED_SQL} AND (w.update_time, w.id) < (t.update_time, t.id))"
    " END AS queue_position,"
    # a split task's parts (issue 31): {"total", "done", "running", "waiting"}; NULL when not split
    " (SELECT jsonb_build_object('total', count(*), 'done', count(*) FILTER (WHERE p.status = 'DONE'),"
    "  'running', count(*) FILTER (WHERE p.status = 'RUNNING'),"
    "  'waiting', count(*) FILTER (WHERE p.status = 'WAITING'))"
    "  FROM index_part p WHERE p.task_id = t.id HAVING count(*) > 0) AS parts"
)


DOCUMENT_COLUMNS = (
    "d.id AS document_id, d.kb_id, d.filename, d.content_type, d.size_bytes, d.sha256, d.status,"
    " d.index_generation, d.chunk_count, d.error_message, d.warnings, d.create_time, d.update_time,"
    # an archive's member (0020): its origin; an archive: how many members it has (the unique index)
    " d.origin_document_id, (SELECT o.filename FROM document_info o WHERE o.id = d.origin_document_id)"
    " AS origin_filename, (SELECT count(*) FROM document_info m WHERE m.origin_document_id = d.id) AS member_count"
)


# The document's task as one JSON column (avoids clashing column names in a join).
TASK_JSON = (
    f"(SELECT to_jsonb(x) FROM (SELECT {TASK_COLUMNS} FROM index_task t"
    " WHERE t.document_id = d.id) x) AS task"
)


# The pending version (new content not yet indexed) as one JSON column, NULL when there is none.
PENDING_JSON = (
    "CASE WHEN d.pending_object_key IS NULL THEN NULL ELSE jsonb_build_object("
    "'filename', d.pending_filename, 'content_type', d.pending_content_type,"
    " 'size_bytes', d.pending_size_bytes, 'sha256', d.pending_sha256,"
    " 'create_time', d.pending_create_time) END AS pending"
)


CLEAR_PENDING = (
    "pending_filename = NULL, pending_content_type = NULL, pending_size_bytes = NULL,"
    " pending_sha256 = NULL, pending_object_key = NULL, pending_create_time = NULL"
)
