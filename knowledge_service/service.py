"""Use cases of the API: upload, enqueue requests (retry / reindex / new content), delete.

Each commits its rows (document, task, outbox) in ONE transaction, then publishes inline as the
fast path; if that publish fails the outbox relay publishes later, so nothing is lost.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
from fastapi import HTTPException, status

from knowledge_service.deps import Resources
from shared import queries
from shared.errors import BrokerUnavailableError, StorageUnavailableError
from shared.faults import fault_point
from shared.fencing import (
    Action,
    EnqueueDecision,
    EnqueueRequest,
    RequestKind,
    StaleThresholds,
    TaskSnapshot,
    decide_enqueue,
)
from shared.log import bind
from shared.messages import IndexMessage
from shared.queries import OutboxRow
from shared.states import ACTIVE

log = logging.getLogger(__name__)


class InFlightLimitError(HTTPException):
    """The user already has ``max_in_flight_tasks_per_user`` tasks WAITING/RETRYING/RUNNING.

    An HTTPException (429 + Retry-After) so every route that creates work answers it the same
    way without its own handler.
    """

    def __init__(self, limit: int, retry_after_s: int, *, close_connection: bool = False) -> None:
        headers = {"Retry-After": str(retry_after_s)}
        if close_connection:  # refused before an upload body was read: do not drain it
            headers["Connection"] = "close"
        super().__init__(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"too many tasks in flight (limit {limit} per user); retry when some have finished",
            headers=headers,
        )


def _in_flight_error(res: Resources, *, close_connection: bool = False) -> InFlightLimitError:
    return InFlightLimitError(res.settings.max_in_flight_tasks_per_user, res.settings.in_flight_retry_after_s,
                              close_connection=close_connection)


@dataclass(frozen=True)
class StoredObject:
    """An upload in storage: generated key, size, SHA-256, cleaned name, detected MIME type."""

    key: str
    size_bytes: int
    sha256: str
    filename: str
    content_type: str


async def check_in_flight(res: Resources, user_id: int, task_id: int | None = None) -> None:
    """Cheap early refusal, before an upload body is read: 429 if the user is at the cap (and
    ``task_id``, when given, is not itself in flight — re-arming it would add no work).
    The authoritative check is made again in the transaction that creates the work."""
    async with res.pool.acquire() as conn:
        if task_id is not None:
            snap = await queries.load_task_snapshot(conn, task_id)
            if snap is not None and snap.status in ACTIVE:
                return
        if await queries.count_in_flight(conn, user_id) >= res.settings.max_in_flight_tasks_per_user:
            raise _in_flight_error(res, close_connection=True)


async def discard_object(res: Resources, key: str) -> None:
    """Best-effort removal of an object no row refers to (a refused or failed upload)."""
    try:
        await res.store.remove(key)
    except StorageUnavailableError:
        log.warning("orphan object not removed from storage", extra={"object_key": key})


async def publish_now(res: Resources, msg: IndexMessage, row: OutboxRow) -> bool:
    """Fast path after commit: publish with confirm, then mark the outbox row published. A row
    held for fair dispatch (its user has K tasks in the broker or running) is left to the relay."""
    if not row.released:
        log.info("message held for fair dispatch; the relay releases it when a slot frees")
        return False
    if res.publisher is None:
        log.warning("no broker connection; the outbox relay will publish")
        return False
    try:
        await res.publisher.publish(row.body, exchange=row.exchange, routing_key=row.routing_key,
                                    message_id=str(row.message_id))
    except BrokerUnavailableError as exc:
        log.warning("inline publish failed; the outbox relay will publish", extra={"error": str(exc)})
        return False
    async with res.pool.acquire() as conn:
        await queries.mark_published(conn, row.id)
    return True


async def create_document(res: Resources, *, user_id: int, kb_id: int, obj: StoredObject) -> IndexMessage:
    """Rows for a stored upload, within the user's in-flight cap (429 otherwise). The object
    is removed when no row ends up referring to it."""
    try:
        async with res.pool.acquire() as conn, conn.transaction():
            if not await queries.reserve_in_flight_slot(conn, user_id, res.settings.max_in_flight_tasks_per_user):
                raise _in_flight_error(res)
            msg, row = await queries.create_document_with_task(
                conn, kb_id=kb_id, user_id=user_id, filename=obj.filename, content_type=obj.content_type,
                size_bytes=obj.size_bytes, sha256=obj.sha256, object_key=obj.key,
                dispatch_limit=res.settings.dispatch_limit,
            )
    except BaseException:
        await discard_object(res, obj.key)
        raise
    with bind(task_id=msg.task_id, document_id=msg.document_id, generation=msg.generation):
        log.info("document uploaded", extra={"size_bytes": obj.size_bytes})
        await fault_point("after_commit_before_publish")
        await publish_now(res, msg, row)
    return msg


@dataclass(frozen=True)
class EnqueueResult:
    action: Action
    reason: str
    message: IndexMessage | None


def thresholds(res: Resources) -> StaleThresholds:
    return StaleThresholds(
        queued=timedelta(seconds=res.settings.stale_waiting_s),
        running=timedelta(seconds=res.settings.stale_running_s),
    )


async def request_enqueue(
    res: Resources, task_id: int, request: EnqueueRequest, content: queries.NewContent | None = None
) -> EnqueueResult:
    """Decide (pure) and apply (conditional update) a retry / reindex / new-content request.

    A lost race (another request moved the task first) re-reads and decides again, so N
    concurrent requests make exactly one transition and publish one message.
    """
    for _ in range(5):
        async with res.pool.acquire() as conn:
            snap = await queries.load_task_snapshot(conn, task_id)
            if snap is None:
                raise LookupError("task not found")
            decision = decide_enqueue(snap, request, datetime.now(UTC), thresholds(res))
            if decision.action is not Action.ISSUE:
                return EnqueueResult(decision.action, decision.reason, None)
            issued = await _issue_within_cap(res, conn, snap, decision, content)
        if issued is None:
            continue
        msg, row = issued
        with bind(task_id=msg.task_id, document_id=msg.document_id, generation=msg.generation):
            log.info("generation issued", extra={"request": request.kind.value, "takeover": decision.takeover})
            await publish_now(res, msg, row)
        return EnqueueResult(Action.ISSUE, decision.reason, msg)
    raise RuntimeError("task kept changing under concurrent requests")


async def replace_content(res: Resources, task_id: int, content: queries.NewContent) -> IndexMessage:
    """New content (already stored under ``content.object_key``) → new generation; the new
    object is removed if the request fails (e.g. 429)."""
    try:
        result = await request_enqueue(res, task_id, EnqueueRequest(RequestKind.NEW_CONTENT), content)
    except BaseException:
        await discard_object(res, content.object_key)
        raise
    assert result.message is not None, "new content always issues a generation"
    return result.message


async def _issue_within_cap(
    res: Resources, conn: asyncpg.Connection, snap: TaskSnapshot, decision: EnqueueDecision,
    content: queries.NewContent | None,
) -> tuple[IndexMessage, OutboxRow] | None:
    """Apply an ISSUE decision; re-arming a task that is not in flight adds work, so it must fit
    under the user's in-flight cap (checked in the same transaction; 429 otherwise)."""
    if snap.status in ACTIVE:  # already counted: a takeover or new content adds no task
        return await queries.try_issue_generation(conn, snap, decision, content, res.settings.dispatch_limit)
    async with conn.transaction():
        if not await queries.reserve_in_flight_slot(conn, snap.user_id, res.settings.max_in_flight_tasks_per_user):
            raise _in_flight_error(res)
        return await queries.try_issue_generation(conn, snap, decision, content, res.settings.dispatch_limit)
