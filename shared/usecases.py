"""Use cases that create work: upload, replace content, reindex, retry, delete, DLQ replay.

Framework-free: they take :class:`Deps` (ports only) and raise :mod:`shared.errors`
``ServiceError`` subclasses (``TaskNotFound``, ``EnqueueConflict``, ``InFlightLimitExceeded``,
``EnqueueContention``); the API maps those to HTTP in one table (``knowledge_service/
errors_http.py``), the DLQ CLI to its JSON answer. Each commits its rows (document, task, outbox)
in ONE transaction (the store's), then publishes inline as the fast path; if that publish fails
the outbox relay publishes later, so nothing is lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from shared.errors import (
    BrokerUnavailableError,
    EnqueueConflict,
    EnqueueContention,
    InFlightLimitExceeded,
    PendingVersionNotFound,
    StorageUnavailableError,
    TaskNotFound,
)
from shared.faults import fault_point
from shared.fencing import Action, EnqueueRequest, RequestKind, StaleThresholds, decide_enqueue
from shared.log import bind
from shared.messages import IndexMessage
from shared.ports import IssueRefused, ObjectRemover, Publisher, ReleasedObjects, TaskStore
from shared.records import Duplicate, NewContent, OutboxRow
from shared.states import ACTIVE

__all__ = [
    "Deps",
    "EnqueueResult",
    "Limits",
    "check_in_flight",
    "create_document",
    "delete_document",
    "drop_pending",
    "reindex",
    "replace_content",
    "replay_dead_letter",
    "request_enqueue",
    "retry",
]

log = logging.getLogger(__name__)

#: Attempts of the read–decide–apply loop before concurrent requests are reported as contention.
ENQUEUE_ATTEMPTS = 8


@dataclass(frozen=True)
class Limits:
    """The per-user in-flight cap, its 429 ``Retry-After`` (seconds) and the stale thresholds."""

    max_in_flight_per_user: int
    retry_after_s: int
    stale: StaleThresholds


@dataclass
class Deps:
    """What the use cases run against; built once by each entry point's composition root.
    ``publisher`` None: no broker connection (the outbox relay publishes)."""

    store: TaskStore
    objects: ObjectRemover
    publisher: Publisher | None
    limits: Limits
    released: ReleasedObjects
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class EnqueueResult:
    action: Action
    reason: str
    message: IndexMessage | None


def _over_cap(deps: Deps, *, before_body: bool = False) -> InFlightLimitExceeded:
    return InFlightLimitExceeded(deps.limits.max_in_flight_per_user, deps.limits.retry_after_s,
                                 before_body=before_body)


async def check_in_flight(deps: Deps, user_id: int, task_id: int | None = None) -> None:
    """Cheap early refusal, before an upload body is read. Raises InFlightLimitExceeded
    (``before_body``) if the user is at the cap and ``task_id``, when given, is not itself in
    flight (re-arming it would add no work). The authoritative check is made again in the
    transaction that creates the work."""
    if task_id is not None:
        snap = await deps.store.load_task_snapshot(task_id)
        if snap is not None and snap.status in ACTIVE:
            return
    if await deps.store.count_in_flight(user_id) >= deps.limits.max_in_flight_per_user:
        raise _over_cap(deps, before_body=True)


async def discard_object(deps: Deps, key: str) -> None:
    """Best-effort removal of an object no row refers to (a refused or failed upload)."""
    try:
        await deps.objects.remove(key)
    except StorageUnavailableError:
        log.warning("orphan object not removed from storage", extra={"object_key": key})


async def publish_now(deps: Deps, row: OutboxRow) -> bool:
    """Fast path after commit: publish with confirm, then mark the outbox row published.
    False (the relay will publish) when there is no broker or it did not confirm, or when the row
    is held for fair dispatch (its user has K tasks in the broker or running)."""
    if not row.released:
        log.info("message held for fair dispatch; the relay releases it when a slot frees")
        return False
    if deps.publisher is None:
        log.warning("no broker connection; the outbox relay will publish")
        return False
    try:
        await deps.publisher.publish(row.body, exchange=row.exchange, routing_key=row.routing_key,
                                     message_id=str(row.message_id))
    except BrokerUnavailableError as exc:
        log.warning("inline publish failed; the outbox relay will publish", extra={"error": str(exc)})
        return False
    task = asyncio.create_task(_mark_published(deps, row.id))
    _marking.add(task)
    task.add_done_callback(_marking.discard)
    return True


#: Outbox marks in flight (a reference keeps each task alive until it ends).
_marking: set[asyncio.Task[None]] = set()


async def flush_marks(timeout_s: float = 3.0) -> None:
    """Wait up to ``timeout_s`` seconds for the outbox marks still being written (shutdown, tests)."""
    if _marking:
        await asyncio.wait(set(_marking), timeout=timeout_s)


async def _mark_published(deps: Deps, outbox_id: int) -> None:
    """The outbox mark, off the request's latency (one round trip): if it is lost (crash,
    database down), the relay publishes the row again after ``relay_grace_s`` and the worker
    skips the duplicate (fenced by generation and claim)."""
    try:
        await deps.store.mark_published(outbox_id)
    except Exception as exc:
        log.warning("outbox row not marked published", extra={"outbox_id": outbox_id, "error": str(exc)})


async def create_document(
    deps: Deps, *, user_id: int, kb_id: int, obj: NewContent, allow_duplicate: bool = False
) -> IndexMessage | Duplicate:
    """Rows for an upload stored under ``obj.object_key``, within the user's in-flight cap
    (InFlightLimitExceeded otherwise). The object is removed when no row ends up referring to it.

    Unless ``allow_duplicate``, bytes equal (SHA-256) to a document's of the same KB give that
    document (:class:`Duplicate`): nothing is created and the object is removed.
    """
    try:
        created = await deps.store.create_document(
            user_id=user_id, kb_id=kb_id, content=obj, in_flight_limit=deps.limits.max_in_flight_per_user,
            dedup=not allow_duplicate,
        )
        if created is None:
            raise _over_cap(deps)
    except BaseException:
        await discard_object(deps, obj.object_key)
        raise
    if isinstance(created, Duplicate):
        await discard_object(deps, obj.object_key)
        log.info("duplicate upload", extra={"document_id": created.document_id, "size_bytes": obj.size_bytes})
        return created
    msg, row = created
    with bind(task_id=msg.task_id, document_id=msg.document_id, generation=msg.generation):
        log.info("document uploaded", extra={"size_bytes": obj.size_bytes})
        await fault_point("after_commit_before_publish")
        await publish_now(deps, row)
    return msg


async def request_enqueue(
    deps: Deps, task_id: int, request: EnqueueRequest, content: NewContent | None = None
) -> EnqueueResult:
    """Decide (pure) and apply (conditional update) a retry / reindex / new-content request.

    A lost race (another request moved the task first) re-reads and decides again, so N
    concurrent requests make exactly one transition and publish one message. Re-arming a task
    that is not in flight adds work, and so does new content (another upload to store and
    index, even over an active task): either must fit under the user's cap.

    Raises TaskNotFound, InFlightLimitExceeded, EnqueueContention (still racing after
    :data:`ENQUEUE_ATTEMPTS` reads).
    """
    for _ in range(ENQUEUE_ATTEMPTS):
        snap = await deps.store.load_task_snapshot(task_id)
        if snap is None:
            raise TaskNotFound()
        decision = decide_enqueue(snap, request, deps.clock(), deps.limits.stale)
        if decision.action is not Action.ISSUE:
            return EnqueueResult(decision.action, decision.reason, None)
        # already counted when in flight: a takeover adds no work
        cap = None if snap.status in ACTIVE and content is None else deps.limits.max_in_flight_per_user
        issued = await deps.store.issue_generation(snap, decision, content, in_flight_limit=cap)
        if issued is IssueRefused.OVER_CAP:
            raise _over_cap(deps)
        if isinstance(issued, IssueRefused):
            continue
        msg, row = issued
        with bind(task_id=msg.task_id, document_id=msg.document_id, generation=msg.generation):
            log.info("generation issued", extra={"request": request.kind.value, "takeover": decision.takeover})
            await publish_now(deps, row)
        return EnqueueResult(Action.ISSUE, decision.reason, msg)
    raise EnqueueContention("the task kept changing under concurrent requests; try again")


async def replace_content(deps: Deps, task_id: int, content: NewContent) -> IndexMessage:
    """New content (already stored under ``content.object_key``) → new generation.

    A document with a served (INDEXED) version gets it as its pending version: the served one
    stays searchable, with its object, until the pending one commits. A document never indexed
    takes it over its own columns. The object this replaces (the previous pending one, or a
    never-indexed document's own) is removed after commit. The new object is removed if the
    request fails (InFlightLimitExceeded, document deleted meanwhile: TaskNotFound, ...).
    """
    try:
        result = await request_enqueue(deps, task_id, EnqueueRequest(RequestKind.NEW_CONTENT), content)
    except BaseException:
        await discard_object(deps, content.object_key)
        raise
    assert result.message is not None, "new content always issues a generation"
    await deps.released.remove_released()
    return result.message


async def reindex(deps: Deps, task_id: int, *, force: bool = False) -> EnqueueResult:
    """Reindex: a new generation, or (``action`` EXISTING/NOOP) the current task answers."""
    return await request_enqueue(deps, task_id, EnqueueRequest(RequestKind.REINDEX, force=force))


async def retry(deps: Deps, task_id: int, *, force: bool = False,
                expected_generation: int | None = None) -> IndexMessage:
    """Retry a FAILED/TIMEOUT task (new generation, RETRYING); with ``expected_generation`` only
    if the task is still at that generation (a double click retries once). Raises
    EnqueueConflict with the reason and the task's current status when refused (not
    retryable, limit reached, generation moved on)."""
    request = EnqueueRequest(RequestKind.RETRY, force=force, expected_generation=expected_generation)
    result = await request_enqueue(deps, task_id, request)
    if result.message is None:
        snap = await deps.store.load_task_snapshot(task_id)
        if snap is None:
            raise TaskNotFound()
        raise EnqueueConflict(result.reason, snap.status.value)
    return result.message


async def delete_document(deps: Deps, document_id: int) -> None:
    """Delete the document (rows at once, in-flight work fenced out; objects after commit, best
    effort: what fails is left to the sweep). Already gone is fine."""
    if await deps.store.delete_document(document_id):
        log.info("document deleted", extra={"document_id": document_id})
        await deps.released.remove_released()


async def drop_pending(deps: Deps, document_id: int) -> None:
    """Drop the document's pending version (its run, if any, is fenced out; its object removed
    after commit). Raises PendingVersionNotFound (none, or the document was deleted meanwhile)."""
    if not await deps.store.drop_pending(document_id):
        raise PendingVersionNotFound()
    log.info("pending version dropped", extra={"document_id": document_id})
    await deps.released.remove_released()


async def replay_dead_letter(deps: Deps, dead_letter_id: int) -> dict[str, object]:
    """Re-run the task of a dead letter: a forced retry (new generation, new message, within
    the user's cap) — never the old message, whose generation is spent.

    Returns the CLI's JSON answer: ``{"replayed": True, "task_id", "generation"}`` or
    ``{"replayed": False, "detail", ["task_status"]}``. Raises InFlightLimitExceeded.
    """
    dead = await deps.store.pending_dead_letter(dead_letter_id)
    if dead is None:
        return {"replayed": False, "detail": "no such pending dead letter"}
    if dead.task_id is None:
        return {"replayed": False, "detail": "message was not a valid index message; nothing to replay"}
    try:
        result = await request_enqueue(deps, dead.task_id, EnqueueRequest(RequestKind.RETRY, force=True))
    except TaskNotFound:
        return {"replayed": False, "detail": "task no longer exists (document deleted)"}
    except EnqueueContention:
        return {"replayed": False, "detail": "task changed concurrently; try again"}
    if result.message is None:
        snap = await deps.store.load_task_snapshot(dead.task_id)
        status = snap.status.value if snap is not None else None
        return {"replayed": False, "detail": result.reason, "task_status": status}
    await deps.store.mark_dead_letter_replayed(dead_letter_id)
    return {"replayed": True, "task_id": result.message.task_id, "generation": result.message.generation}
