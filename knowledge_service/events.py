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

Events are dicts ``{"event", "data", "id"}`` (``data`` a JSON text) as ``EventSourceResponse``
takes them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

from shared.domain.errors import DatabaseUnavailableError
from shared.domain.states import TERMINAL

T = TypeVar("T")

log = logging.getLogger(__name__)

Snapshot = Mapping[str, Any]
Event = dict[str, str]


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


async def _polls(
    load: Callable[[], Awaitable[T]], outage: _Outage, interval_s: float, deadline: float
) -> AsyncIterator[T]:
    """``load()``'s answers, one every ``interval_s`` seconds until ``deadline`` (monotonic);
    a poll that raises ``DatabaseUnavailableError`` is skipped (and logged once by ``outage``)."""
    while time.monotonic() < deadline:
        try:
            current = await load()
        except DatabaseUnavailableError as exc:
            outage.failed(exc)
        else:
            outage.answered()
            yield current
        await asyncio.sleep(interval_s)


async def task_events(
    load: Callable[[], Awaitable[Snapshot | None]], *, interval_s: float, task_id: int, max_s: float = 3600.0
) -> AsyncIterator[Event]:
    """``task`` events (the task as ``TaskOut`` JSON) for the first snapshot and every change,
    polled every ``interval_s`` seconds; then ``end`` (terminal status) or ``gone`` (deleted).
    The stream also closes after ``max_s`` seconds (an EventSource reconnects and gets the
    current task first). ``load()`` returns the task or None; a poll that raises
    ``DatabaseUnavailableError`` is skipped."""
    reason = "max_duration"
    seq = 0
    previous: Snapshot | None = None
    deadline = time.monotonic() + max_s
    outage = _Outage(stream="task", task_id=task_id)
    try:
        async for current in _polls(load, outage, interval_s, deadline):
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
    except BaseException:
        reason = "disconnected"
        raise
    finally:
        log.info("event stream closed", extra={"stream": "task", "task_id": task_id, "reason": reason})


async def kb_events(
    load: Callable[[], Awaitable[Mapping[int, Snapshot]]], *, interval_s: float, kb_id: int, max_s: float = 3600.0
) -> AsyncIterator[Event]:
    """``document`` events (the document as ``DocumentOut`` JSON) for every document at first
    and for each change, ``removed`` events (``{"document_id"}``) for deleted ones, polled every
    ``interval_s`` seconds until the client leaves or ``max_s`` seconds have passed (an
    EventSource reconnects and gets every document again). ``load()`` returns ``{document_id: document}``;
    a poll that raises ``DatabaseUnavailableError`` is skipped."""
    seq = 0
    previous: Mapping[int, Snapshot] = {}
    reason = "max_duration"
    deadline = time.monotonic() + max_s
    outage = _Outage(stream="kb", kb_id=kb_id)
    try:
        async for current in _polls(load, outage, interval_s, deadline):
            updated, removed = changed_documents(previous, current)
            for doc in updated:
                seq += 1
                yield _event("document", doc, seq)
            for document_id in removed:
                seq += 1
                yield _event("removed", {"document_id": document_id}, seq)
            previous = current
    except BaseException:
        reason = "disconnected"
        raise
    finally:
        log.info("event stream closed", extra={"stream": "kb", "kb_id": kb_id, "reason": reason})
