"""The event streams' admission and database budget (issue 18: 200 streams on one KB made another
user's document list take 6 s).

- Caps: at most ``EVENTS_MAX_STREAMS_PER_USER`` open streams per user and
  ``EVENTS_MAX_STREAMS`` in all, per API process; past them a stream is refused with 429 and
  ``Retry-After: EVENTS_RETRY_AFTER_S`` before it starts (``StreamLimitError``).
- Pool share: the streams' polls and checks run under one semaphore of ``EVENTS_DB_SHARE``
  permits, so they never hold more than that many of the ``DB_POOL_MAX`` pooled connections;
  requests keep the rest.
- Guard: every ``EVENTS_TOKEN_CHECK_S`` (≤ 5 s) a stream checks that its token is unrevoked and
  its KB still there (:func:`shared.adapters.postgres.repo.streams.stream_allowed`); otherwise it
  sends ``end`` with the reason and closes.
- A KB stream reads only what changed since its watermark
  (:func:`shared.adapters.postgres.repo.streams.kb_changes`, ``sql/0013_stream_watermark.sql``);
  its full reads (at first, then every ``EVENTS_RESYNC_S``) are shared by the streams of the
  same KB that ask within ``FULL_READ_SHARE_S`` (one read and one validation of the documents,
  not one per stream: 200 streams opened together once cost 200 reads of the whole KB).
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
from fastapi import Request
from sse_starlette import EventSourceResponse

from knowledge_service import events, schemas
from knowledge_service.config import EventsConfig
from knowledge_service.deps import Resources, token_digest
from shared.domain.errors import StreamLimitError

T = TypeVar("T")
FULL_READ_SHARE_S = 1.0  # a KB's full read is reused by its other streams for this long, seconds
SSE_PING_S = 15  # comment lines that keep proxies from closing a quiet stream
SSE_429: dict[int | str, dict[str, Any]] = {
    429: {"description": "too many open event streams (per user or in all); retry after Retry-After seconds"}
}


@dataclass
class StreamGate:
    """Open streams by user (admission) and the semaphore of their database work."""

    per_user: int
    total: int
    retry_after_s: int
    db: asyncio.Semaphore
    open_by_user: Counter[int] = field(default_factory=Counter)
    shared: dict[tuple[Any, ...], tuple[float, asyncio.Future[Any]]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, c: EventsConfig) -> StreamGate:
        return cls(c.max_streams_per_user, c.max_streams, c.retry_after_s, asyncio.Semaphore(c.db_share))

    @property
    def open_total(self) -> int:
        return sum(self.open_by_user.values())

    def admit(self, user_id: int) -> Callable[[], None]:
        """Count a new stream of ``user_id``; the returned function (idempotent) releases it.
        Raises ``StreamLimitError`` past either cap."""
        if self.open_by_user[user_id] >= self.per_user:
            raise StreamLimitError("for this user", self.retry_after_s)
        if self.open_total >= self.total:
            raise StreamLimitError("on this server", self.retry_after_s)
        self.open_by_user[user_id] += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.open_by_user[user_id] -= 1
                if self.open_by_user[user_id] <= 0:
                    del self.open_by_user[user_id]

        return release

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """``work()`` under the streams' share of the pool."""
        async with self.db:
            return await work()

    async def once(self, key: tuple[Any, ...], fresh_s: float, work: Callable[[], Awaitable[T]]) -> T:
        """``work()``'s answer for ``key``, shared: callers within ``fresh_s`` seconds of its
        start (or while it runs) get the same answer (or error). Runs under :meth:`run`."""
        now = time.monotonic()
        hit = self.shared.get(key)
        if hit is None or now - hit[0] >= fresh_s or (hit[1].done() and hit[1].exception() is not None):
            if len(self.shared) > 256:  # forget stale keys (KBs no longer streamed)
                self.shared = {k: v for k, v in self.shared.items() if now - v[0] < fresh_s}
            hit = (now, asyncio.ensure_future(self.run(work)))
            self.shared[key] = hit
        result: T = await asyncio.shield(hit[1])
        return result


def gate_of(request: Request, res: Resources) -> StreamGate:
    """The app's gate, made on first use from its config."""
    gate: StreamGate | None = getattr(request.app.state, "stream_gate", None)
    if gate is None:
        gate = request.app.state.stream_gate = StreamGate.from_config(res.config.events)
    return gate


def _bearer(request: Request) -> bytes:
    """The SHA-256 of the request's bearer token (already checked by ``current_user``)."""
    return token_digest(request.headers.get("authorization", "").partition(" ")[2].strip())


def _guard(res: Resources, gate: StreamGate, digest: bytes, user_id: int, kb_id: int | None) -> events.Guard:
    async def check() -> str | None:
        async def allowed() -> tuple[bool, bool]:
            return await res.reads.stream_allowed(digest, user_id, kb_id)

        token_ok, kb_ok = await gate.run(allowed)
        return None if token_ok and kb_ok else ("revoked" if not token_ok else "kb_deleted")

    return events.Guard(check, res.config.events.token_check_s)


def _respond(gate: StreamGate, user_id: int, stream: AsyncIterator[dict[str, str]]) -> EventSourceResponse:
    release = gate.admit(user_id)

    async def counted() -> AsyncIterator[dict[str, str]]:
        try:
            async for event in stream:
                yield event
        finally:
            release()

    body = counted()
    weakref.finalize(body, release)  # a response never started (client gone) releases too
    return EventSourceResponse(body, ping=SSE_PING_S)


def kb_stream(request: Request, res: Resources, user_id: int, kb_id: int,
              document: Callable[[asyncpg.Record], schemas.DocumentOut]) -> EventSourceResponse:
    """The ``GET /knowledge-bases/{id}/events`` response (ownership checked by the caller)."""
    gate = gate_of(request, res)
    s = res.config.events

    async def load_changes(since: datetime | None) -> events.Changes:
        async def read() -> events.Changes:
            now, rows, ids = await res.reads.kb_changes(user_id, kb_id, since)
            return now, {r["document_id"]: document(r).model_dump(mode="json") for r in rows}, frozenset(ids)

        if since is None:
            return await gate.once(("kb", user_id, kb_id), FULL_READ_SHARE_S, read)
        return await gate.run(read)

    stream = events.kb_events(load_changes, interval_s=s.poll_interval_s, kb_id=kb_id,
                              max_s=s.max_stream_s, resync_s=s.resync_s, overlap_s=s.watermark_overlap_s,
                              guard=_guard(res, gate, _bearer(request), user_id, kb_id))
    return _respond(gate, user_id, stream)


def task_stream(request: Request, res: Resources, user_id: int, task_id: int) -> EventSourceResponse:
    """The ``GET /tasks/{id}/events`` response (ownership checked by the caller)."""
    gate = gate_of(request, res)

    async def load() -> dict[str, Any] | None:
        async def read() -> asyncpg.Record | None:
            return await res.reads.get_task(user_id, task_id)

        row = await gate.run(read)
        return None if row is None else schemas.TaskOut.model_validate(dict(row.items())).model_dump(mode="json")

    stream = events.task_events(load, interval_s=res.config.events.poll_interval_s, task_id=task_id,
                                max_s=res.config.events.max_stream_s,
                                guard=_guard(res, gate, _bearer(request), user_id, None))
    return _respond(gate, user_id, stream)
