"""Use cases of the API: upload, enqueue requests (retry / reindex / new content), delete.

Each commits its rows (document, task, outbox) in ONE transaction, then publishes inline as the
fast path; if that publish fails the outbox relay publishes later, so nothing is lost.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import BinaryIO, Protocol

from knowledge_service.deps import Resources
from shared import queries
from shared.errors import BrokerUnavailableError
from shared.faults import fault_point
from shared.fencing import Action, EnqueueRequest, StaleThresholds, decide_enqueue
from shared.log import bind
from shared.messages import IndexMessage
from shared.queries import OutboxRow

log = logging.getLogger(__name__)


class UploadTooLargeError(Exception):
    """The body exceeded ``max_upload_bytes``."""


class Readable(Protocol):
    async def read(self, size: int = -1) -> bytes: ...


@dataclass(frozen=True)
class StoredObject:
    key: str
    size_bytes: int
    sha256: str


async def _spool(source: Readable, limit: int) -> tuple[BinaryIO, int, str]:
    """Copy the upload to a temp file (in 1 MiB pieces), hashing and counting; 413 past ``limit``."""
    out = tempfile.TemporaryFile()
    digest = hashlib.sha256()
    size = 0
    while piece := await source.read(1024 * 1024):
        size += len(piece)
        if size > limit:
            out.close()
            raise UploadTooLargeError(f"upload exceeds {limit} bytes")
        digest.update(piece)
        out.write(piece)
    out.seek(0)
    return out, size, digest.hexdigest()


async def store_upload(res: Resources, kb_id: int, source: Readable) -> StoredObject:
    """Stream the body to object storage under a generated key ``kb/{kb_id}/{uuid}``."""
    spooled, size, sha = await _spool(source, res.settings.max_upload_bytes)
    key = f"kb/{kb_id}/{uuid.uuid4()}"
    try:
        await res.store.put(key, spooled, size, res.settings.upload_part_size)
    finally:
        spooled.close()
    return StoredObject(key, size, sha)


async def publish_now(res: Resources, msg: IndexMessage, row: OutboxRow) -> bool:
    """Fast path after commit: publish with confirm, then mark the outbox row published."""
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


async def create_document(
    res: Resources, *, user_id: int, kb_id: int, filename: str, content_type: str | None, obj: StoredObject
) -> IndexMessage:
    async with res.pool.acquire() as conn:
        msg, row = await queries.create_document_with_task(
            conn, kb_id=kb_id, user_id=user_id, filename=filename, content_type=content_type,
            size_bytes=obj.size_bytes, sha256=obj.sha256, object_key=obj.key,
        )
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
            issued = await queries.try_issue_generation(conn, snap, decision, content)
        if issued is None:
            continue
        msg, row = issued
        with bind(task_id=msg.task_id, document_id=msg.document_id, generation=msg.generation):
            log.info("generation issued", extra={"request": request.kind.value, "takeover": decision.takeover})
            await publish_now(res, msg, row)
        return EnqueueResult(Action.ISSUE, decision.reason, msg)
    raise RuntimeError("task kept changing under concurrent requests")
