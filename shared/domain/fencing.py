"""Claim, commit and enqueue decisions (pure; no I/O).

The fencing token of a run is the pair ``(generation, attempt)``:

* ``generation`` is issued by PostgreSQL (``document_info.index_generation + 1``) for a new
  document, a retry, new content, a reindex and a stale takeover — nothing else issues one;
* ``attempt`` is bumped by every claim of a task, so a worker paused past its Redis lock that
  resumes with the *same* generation still holds an old attempt (Kleppmann, "How to do
  distributed locking", 2016: the lock is for efficiency, the token for correctness).

The database applies these decisions with conditional updates (``WHERE status = ANY(...) AND
generation = $g AND attempt = $a``); these functions decide, the queries enforce.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from shared.domain.messages import IndexMessage
from shared.domain.parts import PART_CLAIMABLE, PartStatus
from shared.domain.states import ACTIVE, CLAIMABLE, QUEUED, RETRYABLE, TERMINAL, DocumentStatus, TaskStatus


@dataclass(frozen=True)
class TaskSnapshot:
    """The task row joined with its document's generation and status, as read by one query;
    ``split``: the task has a split at its generation (its parts run; no second document run)."""

    task_id: int
    document_id: int
    kb_id: int
    user_id: int
    status: TaskStatus
    generation: int
    attempt: int
    document_generation: int
    document_status: DocumentStatus
    retry_count: int
    max_retry_count: int
    update_time: datetime
    split: bool = False


class SkipReason(StrEnum):
    STALE_GENERATION = "stale_generation"
    NOT_RUNNABLE = "not_runnable"
    LOCK_HELD_EXHAUSTED = "lock_held_exhausted"
    TASK_MISSING = "task_missing"
    ALREADY_SPLIT = "already_split"  # a document delivery of a task whose parts run
    PART_DONE = "part_done"  # a part delivery of a part already staged
    PART_MISSING = "part_missing"  # a part delivery of a task with no such part at its generation


@dataclass(frozen=True)
class Proceed:
    """Go ahead: claim the task (attempt + 1) and run it."""


@dataclass(frozen=True)
class Skip:
    """Ack the delivery without work; count it under ``reason``."""

    reason: SkipReason


@dataclass(frozen=True)
class Reject:
    """The message contradicts the database: reject without requeue (→ dead-letter queue)."""

    reason: str


ClaimDecision = Proceed | Skip | Reject


def decide_claim(msg: IndexMessage, snap: TaskSnapshot | None) -> ClaimDecision:
    """Decide what to do with a delivery once the document lock is held.

    The worker trusts the database, not the message: IDs that disagree with the task row are
    rejected. A generation other than the task's and the document's current one is stale.
    """
    if snap is None:
        return Skip(SkipReason.TASK_MISSING)
    if (msg.document_id, msg.kb_id, msg.user_id) != (snap.document_id, snap.kb_id, snap.user_id):
        return Reject("message IDs disagree with the task row")
    if msg.generation != snap.generation or msg.generation != snap.document_generation:
        return Skip(SkipReason.STALE_GENERATION)
    if snap.status not in CLAIMABLE:
        return Skip(SkipReason.NOT_RUNNABLE)
    if snap.split:  # redelivered after the split (its worker died before the ack): the parts run
        return Skip(SkipReason.ALREADY_SPLIT)
    return Proceed()


@dataclass(frozen=True)
class PartState:
    """An ``index_part`` row: its ``generation`` (the split's), ``status``, ``attempt`` (the
    part's claims so far) and range."""

    part: int
    generation: int
    status: PartStatus
    attempt: int
    first_chunk: int
    chunk_count: int


@dataclass(frozen=True)
class PartSnapshot:
    """A task (as :class:`TaskSnapshot`) with one of its parts, read by one query; ``state`` is
    None when the task has no such part (no split, or the split was deleted)."""

    task: TaskSnapshot
    state: PartState | None


def decide_part_claim(msg: IndexMessage, snap: PartSnapshot | None) -> ClaimDecision:
    """Decide what to do with a part delivery (``msg.part`` set) once the part's lock is held.

    As :func:`decide_claim`: IDs that disagree with the task row are rejected, a generation
    other than the task's and document's is stale. Then: a task not RUNNING (swapped, failed,
    re-armed) is not runnable; a part missing, or of another generation, is skipped; a DONE
    part is skipped (its vectors are staged: never embedded twice). Raises ValueError for a
    document message (``msg.part`` None).
    """
    if msg.part is None:
        raise ValueError("decide_part_claim needs a part message")
    if snap is None:
        return Skip(SkipReason.TASK_MISSING)
    task = snap.task
    if (msg.document_id, msg.kb_id, msg.user_id) != (task.document_id, task.kb_id, task.user_id):
        return Reject("message IDs disagree with the task row")
    if msg.generation != task.generation or msg.generation != task.document_generation:
        return Skip(SkipReason.STALE_GENERATION)
    if task.status is not TaskStatus.RUNNING:
        return Skip(SkipReason.NOT_RUNNABLE)
    part = snap.state
    if part is None:
        return Skip(SkipReason.PART_MISSING)
    if part.part != msg.part:
        return Reject(f"part row {part.part} read for a message of part {msg.part}")
    if part.generation != msg.generation:
        return Skip(SkipReason.STALE_GENERATION)
    if part.status not in PART_CLAIMABLE:
        return Skip(SkipReason.PART_DONE)
    return Proceed()


def may_commit_part(snap: PartSnapshot, generation: int, attempt: int) -> bool:
    """True if a part run holding ``(generation, attempt)`` (the part's attempt) may still
    stage its vectors. Mirrors the WHERE clause of the part's stage commit."""
    part = snap.state
    return (
        part is not None
        and _task_runs_parts(snap.task, generation)
        and part.generation == generation
        and part.status is PartStatus.RUNNING
        and part.attempt == attempt
    )


def _task_runs_parts(snap: TaskSnapshot, generation: int) -> bool:
    """The task side of a part fence: RUNNING and split at ``generation``, document at it too."""
    return (
        snap.status is TaskStatus.RUNNING
        and snap.split
        and snap.generation == generation
        and snap.document_generation == generation
    )


class SettledTasks:
    """What snapshots already proved about tasks, for good: a bounded memory that lets a worker
    skip duplicate or stale deliveries without reading the database again (pure, no I/O).

    Both facts are permanent because generations only grow and a task is re-armed only with a
    new generation (retry, reindex, new content, takeover): once a task or its document has
    reached generation G, a message of an older generation is stale for ever; once a task was
    seen terminal at generation G (SUCCESS/FAILED/TIMEOUT, document at G too), a message of
    generation G can never be claimed. Anything else (claimable, IDs that disagree, unknown
    task) is left to :func:`decide_claim` on a fresh snapshot. Least recently learned tasks are
    forgotten beyond ``capacity``.
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        # task_id -> (document_id, kb_id, user_id, highest generation seen, generation seen terminal or 0)
        self._known: dict[int, tuple[int, int, int, int, int]] = {}

    def learn(self, snap: TaskSnapshot) -> None:
        top = max(snap.generation, snap.document_generation)
        terminal = snap.generation if snap.status in TERMINAL and snap.generation == snap.document_generation else 0
        old = self._known.pop(snap.task_id, None)
        if old is not None and old[:3] == (snap.document_id, snap.kb_id, snap.user_id):
            top, terminal = max(top, old[3]), max(terminal, old[4])
        self._known[snap.task_id] = (snap.document_id, snap.kb_id, snap.user_id, top, terminal)
        while len(self._known) > self._capacity:
            del self._known[next(iter(self._known))]

    def skip(self, msg: IndexMessage) -> Skip | None:
        """The skip a delivery earns from what is known, or None (read the database)."""
        known = self._known.get(msg.task_id)
        if known is None or known[:3] != (msg.document_id, msg.kb_id, msg.user_id):
            return None
        if msg.generation < known[3]:
            return Skip(SkipReason.STALE_GENERATION)
        if msg.generation == known[4]:
            return Skip(SkipReason.NOT_RUNNABLE)
        return None


def may_commit(snap: TaskSnapshot, generation: int, attempt: int) -> bool:
    """True if a run holding ``(generation, attempt)`` may still write its result.

    Mirrors the WHERE clause of the final transaction (see ``shared.adapters.postgres.repo.chunks.commit_chunks``).
    """
    return (
        snap.status is TaskStatus.RUNNING
        and snap.generation == generation
        and snap.document_generation == generation
        and snap.attempt == attempt
    )


# ---------------------------------------------------------------------------------------------
# Enqueue-time decisions: retry, reindex, new content.


class RequestKind(StrEnum):
    RETRY = "retry"
    REINDEX = "reindex"
    NEW_CONTENT = "new_content"


@dataclass(frozen=True)
class EnqueueRequest:
    """``expected_generation``: the task generation the client last read (idempotent retry: a
    request made against an older generation is refused, so a double click runs once)."""

    kind: RequestKind
    force: bool = False
    expected_generation: int | None = None


@dataclass(frozen=True)
class StaleThresholds:
    """How long an active task may go untouched (``update_time``) before a request takes over.

    No defaults here: the values are settings (``STALE_WAITING_S``, ``STALE_RUNNING_S``), built
    into this by the composition root (:mod:`shared.bootstrap`)."""

    queued: timedelta
    running: timedelta


class Action(StrEnum):
    ISSUE = "issue"  # new generation; task re-armed as ``new_status``; message published
    EXISTING = "existing"  # answer with the current task, publish nothing
    SKIP_INDEXED = "skip_indexed"  # plain reindex of an indexed document: nothing to do
    CONFLICT = "conflict"  # refused (409)


@dataclass(frozen=True)
class EnqueueDecision:
    action: Action
    new_status: TaskStatus | None = None
    bump_retry_count: bool = False
    reset_retry_count: bool = False
    takeover: bool = False
    reason: str = ""


def is_stale(snap: TaskSnapshot, now: datetime, thresholds: StaleThresholds) -> bool:
    """An active task nobody has touched for longer than its threshold."""
    if snap.status in QUEUED:
        return now - snap.update_time > thresholds.queued
    if snap.status is TaskStatus.RUNNING:
        return now - snap.update_time > thresholds.running
    return False


def decide_enqueue(
    snap: TaskSnapshot, request: EnqueueRequest, now: datetime, thresholds: StaleThresholds
) -> EnqueueDecision:
    """Decide a retry / reindex / new-content request against the document's current task.

    * new content always issues a new generation (the old run becomes stale);
    * an active task answers the request itself unless it is stale, then it is taken over;
    * retry: only from FAILED/TIMEOUT, and past ``max_retry_count`` only with ``force``;
    * reindex of an INDEXED document without ``force`` is skipped;
    * a request naming an ``expected_generation`` other than the task's is refused (the ISSUE
      update is conditional on the task's generation, so the database enforces it too).
    """
    if request.kind is RequestKind.NEW_CONTENT:
        return EnqueueDecision(Action.ISSUE, TaskStatus.WAITING, reset_retry_count=True)
    if request.expected_generation is not None and request.expected_generation != snap.generation:
        return EnqueueDecision(
            Action.CONFLICT,
            reason=f"task generation is {snap.generation}, not {request.expected_generation}: "
                   "it was re-armed since it was read",
        )
    if snap.status in ACTIVE:
        if is_stale(snap, now, thresholds):
            return EnqueueDecision(
                Action.ISSUE, TaskStatus.WAITING, takeover=True, reset_retry_count=True,
                reason=f"stale {snap.status} task taken over",
            )
        return EnqueueDecision(Action.EXISTING, reason=f"task is {snap.status}")
    if request.kind is RequestKind.RETRY:
        if snap.status not in RETRYABLE:
            return EnqueueDecision(Action.CONFLICT, reason=f"task is {snap.status}, not FAILED or TIMEOUT")
        if snap.retry_count >= snap.max_retry_count and not request.force:
            return EnqueueDecision(
                Action.CONFLICT,
                reason=f"retry limit reached ({snap.retry_count}/{snap.max_retry_count}); use force",
            )
        return EnqueueDecision(Action.ISSUE, TaskStatus.RETRYING, bump_retry_count=True)
    # reindex
    if snap.document_status is DocumentStatus.INDEXED and not request.force:
        return EnqueueDecision(Action.SKIP_INDEXED, reason="document already indexed; use force")
    return EnqueueDecision(Action.ISSUE, TaskStatus.WAITING, reset_retry_count=True)
