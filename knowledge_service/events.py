"""Server-Sent Events of indexing progress: poll the database at a bounded interval and send
what changed (the use case; the routes only wire it to ``EventSourceResponse``).

- :func:`task_events`: one task's status, stage, progress and queue position — the first
  snapshot, then every change, then ``end`` once the task is terminal (or ``gone`` once it is
  deleted). ``GET /api/v1/tasks/{id}/events``.
- :func:`kb_events`: every document of a knowledge base (``document`` events with the document
  and its task, ``removed`` events), until the client leaves. ``GET
  /api/v1/knowledge-bases/{id}/events``: a page follows a whole KB over ONE connection (a
  browser opens at most 6 HTTP/1.1 connections per host; one stream per task would starve its
  uploads).

Polling, not LISTEN/NOTIFY: the worker writes progress at most about once per second, so a
0.5 s poll shows each write within half a second, and a notification could be lost anyway
(PostgreSQL stores none for absent listeners). Each poll is one short query on a pooled
connection. When the client disconnects, sse-starlette cancels the generator at its next
await: the ``finally`` logs ``event stream closed`` with the reason, and nothing is left running.

A poll the database cannot answer (``DatabaseUnavailableError``) is skipped, not fatal: once the
response has started there is no status left to answer 503 with, and a stream cut mid-way would
make the browser reconnect into 503s; the stream stays open (pings go on) and resumes with what
changed meanwhile once the database is back. The outage is logged once, not at every poll.

A KB stream reads only what changed since its last poll (:data:`Changes`: rows whose
``update_time`` passed the watermark, re-read with an overlap, plus the KB's ids to notice
removals) and re-reads the whole KB every ``resync_s`` (queue positions move without a write to
the row). Both streams run a :class:`Guard` every few seconds: once the token is revoked (or the
KB deleted) they send ``end`` with the reason and close. Caps on open streams and the pool share
of their polls: ``knowledge_service/streams.py``.

Events are dicts ``{"event", "data", "id"}`` (``data`` a JSON text) as ``EventSourceResponse``
takes them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from shared.domain.errors import DatabaseUnavailableError
from shared.domain.states import TERMINAL

T = TypeVar("T")

log = logging.getLogger(__name__)

Snapshot = Mapping[str, Any]
Event = dict[str, str]
#: ``load_changes(since)`` → ``(watermark, changed documents by id, every document id of the KB)``;
#: ``since`` None reads every document.
Changes = tuple[datetime, Mapping[int, Snapshot], frozenset[int]]


@dataclass(frozen=True, slots=True)
class Guard:
    """``check()`` returns None while the stream may go on, else why it must end (``"revoked"``,
    ``"kb_deleted"``); run at most every ``every_s`` seconds (and before the first event)."""

    check: Callable[[], Awaitable[str | None]]
    every_s: float = 5.0


class _Guarded:
    """When the guard last ran; :meth:`verdict` runs it when due (a failed check is skipped)."""

    def __init__(self, guard: Guard | None, outage: _Outage) -> None:
        self.guard = guard
        self.outage = outage
        self.next_at = 0.0

    async def verdict(self) -> str | None:
        if self.guard is None or time.monotonic() < self.next_at:
            return None
        try:
            reason = await self.guard.check()
        except DatabaseUnavailableError as exc:
            self.outage.failed(exc)
            return None
        self.next_at = time.monotonic() + self.guard.every_s
        return reason


def _event(name: str, data: Any, seq: int) -> Event:
    return {"event": name, "data": json.dumps(data, separators=(",", ":"), default=str), "id": str(seq)}


class _Outage:
    """Whether the stream's last poll failed for want of a database (logged on change only)."""

    def __init__(self, **stream: Any) -> None:
        self.stream = stream
        self.down = False

    def failed(self, exc: DatabaseUnavailableError) -> None:
        if not self.down:
            log.warning("event stream poll failed; polling on", extra={**self.stream, "error": str(exc)})
        self.down = True

    def answered(self) -> None:
        if self.down:
            log.info("event stream poll answered again", extra=self.stream)
        self.down = False


def changed_documents(
    previous: Mapping[int, Snapshot], current: Mapping[int, Snapshot]
) -> tuple[list[Snapshot], list[int]]:
    """Documents (by id) that are new or differ from ``previous``, in id order, and the ids that
    are gone. Pure."""
    updated = [doc for i, doc in sorted(current.items()) if previous.get(i) != doc]
    removed = sorted(i for i in previous if i not in current)
    return updated, removed


class StreamEnded(Exception):
    """The guard ended the stream (``reason``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def _polls(
    load: Callable[[], Awaitable[T]], outage: _Outage, interval_s: float, deadline: float,
    guard: Guard | None = None,
) -> AsyncIterator[T]:
    """``load()``'s answers, one every ``interval_s`` seconds until ``deadline`` (monotonic);
    a poll that raises ``DatabaseUnavailableError`` is skipped (and logged once by ``outage``).
    Raises ``StreamEnded`` once ``guard`` says so."""
    guarded = _Guarded(guard, outage)
    while time.monotonic() < deadline:
        if (reason := await guarded.verdict()) is not None:
            raise StreamEnded(reason)
        try:
            current = await load()
        except DatabaseUnavailableError as exc:
            outage.failed(exc)
        else:
            outage.answered()
            yield current
        await asyncio.sleep(interval_s)


async def task_events(
    load: Callable[[], Awaitable[Snapshot | None]], *, interval_s: float, task_id: int, max_s: float = 3600.0,
    guard: Guard | None = None,
) -> AsyncGenerator[Event, None]:
    """``task`` events (the task as ``TaskOut`` JSON) for the first snapshot and every change,
    polled every ``interval_s`` seconds; then ``end`` (terminal status) or ``gone`` (deleted).
    The stream also closes after ``max_s`` seconds (an EventSource reconnects and gets the
    current task first). ``load()`` returns the task or None; a poll that raises
    ``DatabaseUnavailableError`` is skipped. Once ``guard`` says so: ``end`` with
    ``{"task_id", "reason"}``."""
    reason = "max_duration"
    seq = 0
    previous: Snapshot | None = None
    deadline = time.monotonic() + max_s
    outage = _Outage(stream="task", task_id=task_id)
    try:
        async for current in _polls(load, outage, interval_s, deadline, guard):
            if current is None:
                reason = "gone"
                yield _event("gone", {"task_id": task_id}, seq)
                return
            if current != previous:
                seq += 1
                yield _event("task", current, seq)
                previous = current
            if current.get("status") in TERMINAL:
                reason = "terminal"
                yield _event("end", {"task_id": task_id, "status": current["status"]}, seq + 1)
                return
    except StreamEnded as ended:
        reason = ended.reason
        yield _event("end", {"task_id": task_id, "reason": reason}, seq + 1)
    except BaseException:
        reason = "disconnected"
        raise
    finally:
        log.info("event stream closed", extra={"stream": "task", "task_id": task_id, "reason": reason})


@dataclass(slots=True)
class _KbView:
    """What a KB stream has sent: every document (by id), and the watermark of its last poll."""

    documents: dict[int, Snapshot]
    watermark: datetime | None = None
    resync_at: float = 0.0

    def since(self, overlap_s: float) -> datetime | None:
        """Where the next poll reads from: None (everything) at first and when a resync is due."""
        if self.watermark is None or time.monotonic() >= self.resync_at:
            return None
        return self.watermark - timedelta(seconds=overlap_s)

    def apply(self, changes: Changes, *, full: bool, resync_s: float) -> tuple[list[Snapshot], list[int]]:
        """Fold a poll's answer in; the documents new or changed, and the ids removed."""
        watermark, changed, ids = changes
        updated = [doc for i, doc in sorted(changed.items()) if self.documents.get(i) != doc]
        removed = sorted(i for i in self.documents if i not in ids)
        self.documents.update(changed)
        for i in removed:
            del self.documents[i]
        self.watermark = watermark
        if full:
            self.resync_at = time.monotonic() + resync_s
        elif any(i not in self.documents for i in ids):  # committed behind the watermark: read all next time
            self.watermark = None
        return updated, removed


async def kb_events(
    load_changes: Callable[[datetime | None], Awaitable[Changes]], *, interval_s: float, kb_id: int,
    max_s: float = 3600.0, resync_s: float = 30.0, overlap_s: float = 10.0, guard: Guard | None = None,
) -> AsyncGenerator[Event, None]:
    """``document`` events (the document as ``DocumentOut`` JSON) for every document at first
    and for each change, ``removed`` events (``{"document_id"}``) for deleted ones, polled every
    ``interval_s`` seconds until the client leaves or ``max_s`` seconds have passed (an
    EventSource reconnects and gets every document again); ``end`` (``{"kb_id", "reason"}``)
    once ``guard`` says so. Each poll reads what changed since the last one less ``overlap_s``,
    and everything every ``resync_s`` (see :data:`Changes`); a poll that raises
    ``DatabaseUnavailableError`` is skipped."""
    seq = 0
    view = _KbView({})
    reason = "max_duration"
    deadline = time.monotonic() + max_s
    outage = _Outage(stream="kb", kb_id=kb_id)

    async def load() -> tuple[Changes, bool]:
        since = view.since(overlap_s)
        return await load_changes(since), since is None

    try:
        async for changes, full in _polls(load, outage, interval_s, deadline, guard):
            updated, removed = view.apply(changes, full=full, resync_s=resync_s)
            for doc in updated:
                seq += 1
                yield _event("document", doc, seq)
            for document_id in removed:
                seq += 1
                yield _event("removed", {"document_id": document_id}, seq)
    except StreamEnded as ended:
        reason = ended.reason
        yield _event("end", {"kb_id": kb_id, "reason": reason}, seq + 1)
    except BaseException:
        reason = "disconnected"
        raise
    finally:
        log.info("event stream closed", extra={"stream": "kb", "kb_id": kb_id, "reason": reason})
