"""Repository of a big document in parts (issue 31; ARCHITECTURE.md "Flow 3"): the split, the part
claim, the staged rows, the part's stage commit and the swap inside the last one.

Every function takes an open ``asyncpg`` connection; functions that form one commit point open
their own transaction. Lock order is always ``document_info`` row, then ``index_task`` row, then
``index_split`` / ``index_part`` rows, then staged rows. Every write is fenced in its WHERE
clause: the document run's claim ``(generation, attempt)`` for the split, the part's claim
``(generation, part attempt)`` for everything a part writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import asyncpg

from shared.adapters.postgres.repo.chunks import promote
from shared.adapters.postgres.repo.objects import queue_object_removal
from shared.adapters.postgres.repo.outbox import insert_part_outbox, insert_part_row
from shared.adapters.postgres.repo.sql import PART_CLAIMABLE_SQL, Rollback
from shared.adapters.postgres.repo.tasks import drop_split, load_task_snapshot
from shared.domain.cache_policy import text_key
from shared.domain.fencing import PartSnapshot, PartState
from shared.domain.messages import IndexMessage
from shared.domain.parts import PartStatus
from shared.domain.records import Chunk, OutboxRow, PartClaim, PartCommit, PartCommitted, PartRange, SplitCommit
from shared.domain.states import TaskStatus
from shared.faults import fault_point

# ------------------------------------------------------------------ the split


def check_parts(parts: Sequence[PartRange], chunks: Sequence[Chunk]) -> None:
    """Raise ValueError unless ``parts`` cover ``chunks`` (indexed 0..n-1) contiguously from 0."""
    end = 0
    for i, p in enumerate(parts):
        if p.part != i or p.first_chunk != end or p.chunk_count < 1:
            raise ValueError(f"part {i} does not continue the split at chunk {end}")
        end = p.end_chunk
    if not parts or end != len(chunks) or any(c.index != i for i, c in enumerate(chunks)):
        raise ValueError("the parts do not cover the chunks 0..n-1")


async def split_task(
    conn: asyncpg.Connection, commit: SplitCommit, dispatch_limit: int | None
) -> list[OutboxRow] | None:
    """The split, ONE transaction fenced on the document run's claim (see
    ``shared.ports.WorkerStore.split_task``). Returns the part outbox rows released now (to
    publish after commit), or None: fenced out, nothing written. Raises ValueError for parts
    that do not cover the chunks."""
    check_parts(commit.parts, commit.chunks)
    claim = commit.claim
    try:
        async with conn.transaction():
            gen = await conn.fetchval(
                "SELECT index_generation FROM document_info WHERE id = $1 FOR UPDATE", commit.document_id
            )
            if gen != claim.generation:
                raise Rollback
            ok = await conn.fetchval(  # the task gives its dispatch slot up: its parts take slots
                "UPDATE index_task SET stage = 'EMBEDDING', progress = 0, dispatched_at = NULL, update_time = now()"
                " WHERE id = $1 AND status = 'RUNNING' AND generation = $2 AND attempt = $3"
                " AND NOT EXISTS (SELECT 1 FROM index_split WHERE task_id = $1) RETURNING id",
                claim.task_id, claim.generation, claim.attempt,
            )
            if ok is None:
                raise Rollback
            await _stage(conn, commit)
            await fault_point("in_split")
            msg = IndexMessage(task_id=claim.task_id, document_id=commit.document_id, kb_id=commit.kb_id,
                               user_id=commit.user_id, generation=claim.generation)
            return await insert_part_outbox(conn, [msg.for_part(p.part) for p in commit.parts], dispatch_limit)
    except Rollback:
        return None


async def _stage(conn: asyncpg.Connection, commit: SplitCommit) -> None:
    """The split row, every chunk (COPY) and one WAITING row per part."""
    claim = commit.claim
    await conn.execute(
        "INSERT INTO index_split (task_id, generation, attempt, parts, chunks, warnings)"
        " VALUES ($1, $2, $3, $4, $5, $6::jsonb)",
        claim.task_id, claim.generation, claim.attempt, len(commit.parts), len(commit.chunks),
        json.dumps(list(commit.warnings)),
    )
    await conn.copy_records_to_table(
        "staged_chunk",
        records=[(claim.task_id, c.index, c.content, c.token_count, c.page, c.section, text_key(c.content))
                 for c in commit.chunks],
        columns=["task_id", "chunk_index", "content", "token_count", "page", "section", "text_sha256"],
    )
    await conn.execute(
        "INSERT INTO index_part (task_id, part, generation, first_chunk, chunk_count)"
        " SELECT $1, p, $2, f, n FROM unnest($3::int[], $4::int[], $5::int[]) AS u(p, f, n)",
        claim.task_id, claim.generation, [p.part for p in commit.parts],
        [p.first_chunk for p in commit.parts], [p.chunk_count for p in commit.parts],
    )


# ------------------------------------------------------------------ a part's claim and reads

_PART_COLUMNS = "part, generation, status, attempt, first_chunk, chunk_count"


async def load_part_snapshot(conn: asyncpg.Connection, task_id: int, part: int) -> PartSnapshot | None:
    """The task's snapshot with its part ``part`` (``state`` None if it has none); None if the
    task is gone. Two statements on one connection; the decision they feed is re-checked by
    every fenced write, so they need no common snapshot."""
    task = await load_task_snapshot(conn, task_id)
    if task is None:
        return None
    r = await conn.fetchrow(f"SELECT {_PART_COLUMNS} FROM index_part WHERE task_id = $1 AND part = $2",
                            task_id, part)
    return PartSnapshot(task, None if r is None else _state(r))


def _state(r: asyncpg.Record) -> PartState:
    return PartState(r["part"], r["generation"], PartStatus(r["status"]), r["attempt"], r["first_chunk"],
                     r["chunk_count"])


#: The task side of every part fence ($1 task, $3 generation): RUNNING at it, document at it.
_TASK_AT = (
    "EXISTS (SELECT 1 FROM index_task t JOIN document_info d ON d.id = t.document_id"
    " WHERE t.id = $1 AND t.status = 'RUNNING' AND t.generation = $3 AND d.index_generation = $3)"
)


async def claim_part(conn: asyncpg.Connection, task_id: int, part: int, generation: int) -> PartClaim | None:
    """Part RUNNING, its attempt + 1 (the part's fencing token), its progress reset; it takes a
    dispatch slot if it had none (a re-published part). None if not claimable."""
    r = await conn.fetchrow(
        "UPDATE index_part SET status = 'RUNNING', attempt = attempt + 1, embedded = 0, start_time = now(),"
        " dispatched_at = COALESCE(dispatched_at, now()), update_time = now()"
        f" WHERE task_id = $1 AND part = $2 AND generation = $3 AND status IN {PART_CLAIMABLE_SQL}"
        f" AND {_TASK_AT} RETURNING attempt, first_chunk, chunk_count",
        task_id, part, generation,
    )
    return None if r is None else PartClaim(task_id, part, generation, r["attempt"], r["first_chunk"],
                                            r["chunk_count"])


#: The part side of every part fence ($1 task, $2 part, $3 generation, $4 part attempt).
_PART_IS_OURS = (
    "task_id = $1 AND part = $2 AND generation = $3 AND attempt = $4 AND status = 'RUNNING'"
)


async def part_claim_is_current(conn: asyncpg.Connection, claim: PartClaim) -> bool:
    """The pre-embedding re-check of the part's claim (and its task's and document's generation)."""
    return bool(await conn.fetchval(
        f"SELECT EXISTS (SELECT 1 FROM index_part WHERE {_PART_IS_OURS}) AND {_TASK_AT}",
        claim.task_id, claim.part, claim.generation, claim.attempt,
    ))


async def read_part_chunks(conn: asyncpg.Connection, claim: PartClaim) -> list[Chunk] | None:
    """The part's staged chunks in order; None if the split is gone or is another generation's."""
    rows = await conn.fetch(
        "SELECT c.chunk_index, c.content, c.token_count, c.page, c.section FROM staged_chunk c"
        " JOIN index_split s ON s.task_id = c.task_id AND s.generation = $4"
        " WHERE c.task_id = $1 AND c.chunk_index >= $2 AND c.chunk_index < $3 ORDER BY c.chunk_index",
        claim.task_id, claim.first_chunk, claim.end_chunk, claim.generation,
    )
    if len(rows) != claim.chunk_count:
        return None
    return [Chunk(r["chunk_index"], r["content"], r["token_count"], r["page"], r["section"]) for r in rows]


async def part_heartbeat(conn: asyncpg.Connection, claim: PartClaim) -> bool:
    """Bump the task's then the part's ``update_time`` (lock order) under the part's claim."""
    return await _touch(conn, claim, None)


async def report_part_progress(conn: asyncpg.Connection, claim: PartClaim, embedded: int) -> bool:
    """The part's ``embedded`` chunks and the task's progress over all parts, under the claim."""
    return await _touch(conn, claim, max(0, min(embedded, claim.chunk_count)))


async def _touch(conn: asyncpg.Connection, claim: PartClaim, embedded: int | None) -> bool:
    """ONE transaction, task row first: the task's ``update_time`` (and progress: the other
    parts' chunks done or embedded plus ``embedded``), then the part's. False: fenced out."""
    args = (claim.task_id, claim.part, claim.generation, claim.attempt)
    try:
        async with conn.transaction():
            ok = await conn.fetchval(
                "UPDATE index_task t SET update_time = now(), progress = CASE WHEN $5::int IS NULL THEN t.progress"
                " ELSE least(1.0, ((SELECT coalesce(sum(CASE WHEN p.status = 'DONE' THEN p.chunk_count"
                "   ELSE p.embedded END), 0) FROM index_part p WHERE p.task_id = $1 AND p.part <> $2) + $5)::float"
                "   / (SELECT chunks FROM index_split WHERE task_id = $1)) END"
                f" WHERE t.id = $1 AND {_TASK_AT}"
                f" AND EXISTS (SELECT 1 FROM index_part WHERE {_PART_IS_OURS}) RETURNING t.id",
                *args, embedded,
            )
            if ok is None:
                raise Rollback
            await conn.execute(
                "UPDATE index_part SET update_time = now(), embedded = coalesce($5::int, embedded)"
                f" WHERE {_PART_IS_OURS}",
                *args, embedded,
            )
    except Rollback:
        return False
    return True


# ------------------------------------------------------------------ the part's stage commit and the swap


async def commit_part(conn: asyncpg.Connection, commit: PartCommit) -> PartCommitted:
    """The part's stage commit, ONE transaction; the swap inside it when no part is left (see
    ``shared.ports.WorkerStore.commit_part``). Raises ValueError for a wrong number of vectors,
    RuntimeError if the swap's counts disagree with the split (nothing written)."""
    claim = commit.claim
    if len(commit.embeddings) != claim.chunk_count:
        raise ValueError(f"{claim.chunk_count} chunks but {len(commit.embeddings)} embeddings")
    try:
        async with conn.transaction():
            doc = await _lock_document(conn, commit.document_id, claim.generation)
            split = await _mark_done(conn, claim)
            await conn.copy_records_to_table(
                "staged_vector",
                records=[(claim.task_id, claim.first_chunk + i, e) for i, e in enumerate(commit.embeddings)],
                columns=["task_id", "chunk_index", "embedding"],
            )
            left = await _progress_after_done(conn, claim.task_id, split["chunks"])
            if left:
                return PartCommitted.STAGED
            await fault_point("in_swap")
            await _swap(conn, claim.task_id, commit.document_id, commit.kb_id, split, doc)
            return PartCommitted.SWAPPED
    except Rollback:
        return PartCommitted.FENCED


async def _lock_document(conn: asyncpg.Connection, document_id: int, generation: int) -> asyncpg.Record:
    """Lock the document row (serialises the document's part commits and its swap) and check the
    generation; raises :class:`Rollback` otherwise."""
    doc = await conn.fetchrow(
        "SELECT index_generation, object_key, pending_object_key FROM document_info WHERE id = $1 FOR UPDATE",
        document_id,
    )
    if doc is None or doc["index_generation"] != generation:
        raise Rollback
    return doc


async def _mark_done(conn: asyncpg.Connection, claim: PartClaim) -> asyncpg.Record:
    """Task row locked (RUNNING at the generation), then the part DONE under its claim; the
    split's ``(attempt, chunks, warnings)``. Raises :class:`Rollback` if fenced out."""
    task = await conn.fetchval(
        "UPDATE index_task SET update_time = now() WHERE id = $1 AND status = 'RUNNING' AND generation = $2"
        " RETURNING id",
        claim.task_id, claim.generation,
    )
    split = None if task is None else await conn.fetchrow(
        "SELECT attempt, chunks, warnings::text AS warnings FROM index_split WHERE task_id = $1 AND generation = $2",
        claim.task_id, claim.generation,
    )
    done = None if split is None else await conn.fetchval(
        f"UPDATE index_part SET status = 'DONE', embedded = chunk_count, update_time = now() WHERE {_PART_IS_OURS}"
        " RETURNING part",
        claim.task_id, claim.part, claim.generation, claim.attempt,
    )
    if done is None:
        raise Rollback
    assert split is not None
    return split


async def _progress_after_done(conn: asyncpg.Connection, task_id: int, chunks: int) -> int:
    """The task's progress (chunks DONE or embedded over the split's); the parts not DONE."""
    r = await conn.fetchrow(
        "SELECT count(*) FILTER (WHERE status <> 'DONE') AS left,"
        " coalesce(sum(CASE WHEN status = 'DONE' THEN chunk_count ELSE embedded END), 0) AS done"
        " FROM index_part WHERE task_id = $1",
        task_id,
    )
    await conn.execute("UPDATE index_task SET progress = least(1.0, $2::float / $3) WHERE id = $1",
                       task_id, r["done"], chunks)
    return int(r["left"])


async def _swap(
    conn: asyncpg.Connection, task_id: int, document_id: int, kb_id: int, split: asyncpg.Record,
    doc: asyncpg.Record,
) -> None:
    """Inside the last part's commit (document row locked): task SUCCESS under the split's
    claim, the document's chunks and vectors replaced server-side from the staged rows (counts
    checked against the split), the document promoted, the split and its unpublished part rows
    deleted."""
    ok = await conn.fetchval(
        "UPDATE index_task SET status = 'SUCCESS', end_time = now(), update_time = now(), stage = 'WRITING',"
        " progress = 1, error_code = NULL, error_message = NULL"
        " WHERE id = $1 AND status = 'RUNNING' AND attempt = $2 RETURNING generation",
        task_id, split["attempt"],
    )
    if ok is None:
        raise Rollback
    await conn.execute("DELETE FROM document_chunk WHERE document_id = $1", document_id)
    chunks = _count(await conn.execute(
        "INSERT INTO document_chunk (document_id, kb_id, chunk_index, content, token_count, page, section, text_sha256)"
        " SELECT $1, $2, chunk_index, content, token_count, page, section, text_sha256 FROM staged_chunk"
        " WHERE task_id = $3 ORDER BY chunk_index",
        document_id, kb_id, task_id,
    ))
    vectors = _count(await conn.execute(
        "INSERT INTO document_vector (chunk_id, document_id, kb_id, embedding)"
        " SELECT c.id, $1, $2, v.embedding FROM document_chunk c"
        " JOIN staged_vector v ON v.task_id = $3 AND v.chunk_index = c.chunk_index"
        " WHERE c.document_id = $1",
        document_id, kb_id, task_id,
    ))
    if chunks != split["chunks"] or vectors != split["chunks"]:
        raise RuntimeError(f"swap of task {task_id}: {chunks} chunks and {vectors} vectors staged, "
                           f"the split has {split['chunks']}")
    await promote(conn, document_id, chunks, int(ok), json.loads(split["warnings"]))
    if doc["pending_object_key"] is not None:  # the swap released the served object
        await queue_object_removal(conn, doc["object_key"])
    await drop_split(conn, task_id, swapped=True)  # staged rows, part messages not yet published (duplicates now)


def _count(status: str) -> int:
    """The row count of an ``INSERT 0 n`` command status."""
    return int(status.rsplit(" ", 1)[1])


async def finish_part_unsuccessfully(
    conn: asyncpg.Connection, claim: PartClaim, *, document_id: int, status: TaskStatus, error_code: str,
    error_message: str,
) -> bool:
    """The task FAILED/TIMEOUT under the part's claim; the document FAILED (unless it has a served
    version) with the split's warnings; the split and its unpublished part rows deleted. ONE
    transaction; False: fenced out, nothing written."""
    assert status in (TaskStatus.FAILED, TaskStatus.TIMEOUT)
    try:
        async with conn.transaction():
            await _lock_document(conn, document_id, claim.generation)
            ok = await conn.fetchval(
                "UPDATE index_task SET status = $5, error_code = $6, error_message = $7, end_time = now(),"
                " update_time = now() WHERE id = $1 AND status = 'RUNNING' AND generation = $3"
                f" AND EXISTS (SELECT 1 FROM index_part WHERE {_PART_IS_OURS}) RETURNING id",
                claim.task_id, claim.part, claim.generation, claim.attempt, status.value, error_code,
                error_message[:4000],
            )
            if ok is None:
                raise Rollback
            warnings = await conn.fetchval("SELECT warnings::text FROM index_split WHERE task_id = $1", claim.task_id)
            await conn.execute(
                "UPDATE document_info SET status = 'FAILED', error_message = $2, warnings = $3::jsonb,"
                " update_time = now() WHERE id = $1 AND status <> 'INDEXED'",
                document_id, error_message[:4000], warnings or "[]",
            )
            await drop_split(conn, claim.task_id)
    except Rollback:
        return False
    return True


# ------------------------------------------------------------------ the scanner's side


async def open_parts_older_than(conn: asyncpg.Connection, seconds: float, limit: int) -> list[asyncpg.Record]:
    """Parts not DONE of RUNNING tasks, untouched for ``seconds``, with the database's ``now``:
    ``task_id, part, status, generation, attempt, update_time, dispatched, document_id, now``."""
    return list(await conn.fetch(
        "SELECT p.task_id, p.part, p.status, p.generation, p.attempt, p.update_time,"
        " p.dispatched_at IS NOT NULL AS dispatched, t.document_id, now() AS now"
        " FROM index_part p JOIN index_task t ON t.id = p.task_id"
        " WHERE p.status <> 'DONE' AND t.status = 'RUNNING' AND t.generation = p.generation"
        " AND p.update_time < now() - make_interval(secs => $1) ORDER BY p.update_time LIMIT $2",
        seconds, limit,
    ))


async def republish_part(
    conn: asyncpg.Connection, task_id: int, part: int, generation: int, seen_status: str, seen_update_time: object,
    *, rearm: bool,
) -> OutboxRow | None:
    """ONE transaction: the part exactly as the scanner saw it (concurrent scanners act once) is
    touched, re-armed WAITING when ``rearm`` (a silent RUNNING part: its next claim's attempt
    fences the vanished worker out), and gets a fresh outbox row (released when the part holds
    a dispatch slot, else held for the relay). None: the part moved, nothing written."""
    async with conn.transaction():
        r = await conn.fetchrow(
            "UPDATE index_part p SET update_time = now(), status = CASE WHEN $6 THEN 'WAITING' ELSE p.status END"
            " FROM index_task t WHERE p.task_id = $1 AND p.part = $2 AND p.generation = $3 AND p.status = $4"
            " AND p.update_time = $5 AND t.id = p.task_id AND t.status = 'RUNNING' AND t.generation = $3"
            " RETURNING t.document_id, t.kb_id, t.user_id, p.dispatched_at IS NOT NULL AS dispatched",
            task_id, part, generation, seen_status, seen_update_time, rearm,
        )
        if r is None:
            return None
        msg = IndexMessage(task_id=task_id, document_id=r["document_id"], kb_id=r["kb_id"], user_id=r["user_id"],
                           generation=generation, part=part)
        return await insert_part_row(conn, msg, released=r["dispatched"])
