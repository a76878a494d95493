"""The Server-Sent Events generators over fake loaders (no database)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from knowledge_service.events import Changes, Guard, changed_documents, kb_events, task_events
from shared.domain.errors import DatabaseUnavailableError

DOWN = DatabaseUnavailableError("database unavailable: ConnectionRefusedError")


def _loader(snapshots: list[Any]) -> Any:
    """Returns the snapshots in turn; an exception in the list is raised instead."""
    it = iter(snapshots)

    async def load() -> Any:
        got = next(it)
        if isinstance(got, Exception):
            raise got
        return got

    return load


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _changes(snapshots: list[Any], seen: list[datetime | None] | None = None) -> Callable[..., Awaitable[Changes]]:
    """A KB loader answering each snapshot in turn (a full one, or ``(changes, ids)``), with a
    watermark one second later each time; records the ``since`` it was asked for in ``seen``."""
    load = _loader(snapshots)
    calls = iter(range(1_000_000))

    async def load_changes(since: datetime | None) -> Changes:
        if seen is not None:
            seen.append(since)
        got = await load()
        changed, ids = got if isinstance(got, tuple) else (got, frozenset(got))
        return T0 + timedelta(seconds=next(calls)), changed, frozenset(ids)

    return load_changes


async def test_task_stream_sends_changes_only_and_ends_at_a_terminal_state() -> None:
    running = {"task_id": 7, "status": "RUNNING", "stage": "EMBEDDING", "progress": 0.25}
    snaps = [
        {"task_id": 7, "status": "WAITING", "stage": None, "progress": None, "queue_position": 3},
        {"task_id": 7, "status": "WAITING", "stage": None, "progress": None, "queue_position": 3},  # no change
        running, dict(running), {**running, "progress": 0.75},
        {**running, "status": "SUCCESS", "stage": "WRITING", "progress": 1.0},
        {"never": "read"},
    ]
    out = [e async for e in task_events(_loader(snaps), interval_s=0, task_id=7)]
    assert [e["event"] for e in out] == ["task", "task", "task", "task", "end"]
    assert [json.loads(e["data"]).get("progress") for e in out[:4]] == [None, 0.25, 0.75, 1.0]
    assert json.loads(out[-1]["data"]) == {"task_id": 7, "status": "SUCCESS"}
    assert [int(e["id"]) for e in out] == [1, 2, 3, 4, 5]


async def test_task_stream_ends_when_the_task_is_deleted() -> None:
    out = [e async for e in task_events(_loader([{"status": "RUNNING"}, None]), interval_s=0, task_id=1)]
    assert [e["event"] for e in out] == ["task", "gone"]


async def test_a_cancelled_stream_closes_its_generator(caplog: pytest.LogCaptureFixture) -> None:
    async def forever() -> Mapping[str, Any]:
        return {"status": "RUNNING"}

    caplog.set_level(logging.INFO, logger="knowledge_service.events")
    stream = task_events(forever, interval_s=0.01, task_id=3)

    async def consume() -> None:
        async for _ in stream:
            pass

    consumer = asyncio.ensure_future(consume())
    await asyncio.sleep(0.05)
    consumer.cancel()  # what sse-starlette does when the client disconnects
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert any(r.message == "event stream closed" and getattr(r, "reason", None) == "disconnected"
               for r in caplog.records)


def test_changed_documents_lists_new_changed_and_removed() -> None:
    before = {1: {"status": "INDEXING"}, 2: {"status": "INDEXED"}, 3: {"status": "FAILED"}}
    after = {1: {"status": "INDEXED"}, 2: {"status": "INDEXED"}, 4: {"status": "INDEXING"}}
    assert changed_documents(before, after) == ([{"status": "INDEXED"}, {"status": "INDEXING"}], [3])


async def test_kb_stream_sends_every_document_then_differences() -> None:
    snaps = [{1: {"id": 1, "s": "a"}, 2: {"id": 2, "s": "a"}}, {1: {"id": 1, "s": "b"}}]
    stream = kb_events(_changes(snaps), interval_s=0, kb_id=9)
    out = [await anext(stream) for _ in range(4)]
    await stream.aclose()
    assert [(e["event"], json.loads(e["data"])) for e in out] == [
        ("document", {"id": 1, "s": "a"}), ("document", {"id": 2, "s": "a"}),
        ("document", {"id": 1, "s": "b"}), ("removed", {"document_id": 2}),
    ]


async def test_streams_close_after_their_maximum_duration(caplog: pytest.LogCaptureFixture) -> None:
    async def running() -> Mapping[str, Any]:
        return {"status": "RUNNING"}

    async def one_document(since: datetime | None) -> Changes:
        return T0, {1: {"status": "INDEXING"}}, frozenset({1})

    caplog.set_level(logging.INFO, logger="knowledge_service.events")
    task_out = [e async for e in task_events(running, interval_s=0.01, task_id=5, max_s=0.05)]
    kb_out = [e async for e in kb_events(one_document, interval_s=0.01, kb_id=2, max_s=0.05)]
    assert [e["event"] for e in task_out] == ["task"] and [e["event"] for e in kb_out] == ["document"]
    reasons = [getattr(r, "reason", None) for r in caplog.records if r.message == "event stream closed"]
    assert reasons == ["max_duration", "max_duration"]


async def test_polls_the_database_cannot_answer_are_skipped_and_the_stream_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="knowledge_service.events")
    running = {"task_id": 4, "status": "RUNNING", "progress": 0.5}
    snaps = [running, DOWN, DOWN, DOWN, {**running, "status": "SUCCESS", "progress": 1.0}]
    out = [e async for e in task_events(_loader(snaps), interval_s=0, task_id=4)]
    assert [e["event"] for e in out] == ["task", "task", "end"]
    assert [json.loads(e["data"]).get("progress") for e in out[:2]] == [0.5, 1.0]
    messages = [r.message for r in caplog.records]
    assert messages.count("event stream poll failed; polling on") == 1  # once per outage, not per poll
    assert messages.count("event stream poll answered again") == 1

    stream = kb_events(_changes([DOWN, {1: {"s": "a"}}, DOWN, {1: {"s": "b"}}]), interval_s=0, kb_id=3)
    kb_out = [await anext(stream) for _ in range(2)]
    await stream.aclose()
    assert [json.loads(e["data"]) for e in kb_out] == [{"s": "a"}, {"s": "b"}]


# ---------------------------------------------------------------- issue 18: watermarks and guards


async def test_kb_stream_reads_what_changed_since_its_watermark_and_resyncs() -> None:
    seen: list[datetime | None] = []
    snaps = [{1: {"s": "a"}, 2: {"s": "a"}}, ({}, {1, 2}), ({2: {"s": "b"}}, {1, 2})]
    stream = kb_events(_changes(snaps, seen), interval_s=0, kb_id=9, overlap_s=10, resync_s=3600)
    out = [await anext(stream) for _ in range(3)]
    await stream.aclose()
    assert [json.loads(e["data"]) for e in out] == [{"s": "a"}, {"s": "a"}, {"s": "b"}]
    # first everything; then from the last watermark less the overlap (a full read never repeats)
    assert seen[:3] == [None, T0 - timedelta(seconds=10), T0 + timedelta(seconds=1) - timedelta(seconds=10)]


async def test_kb_stream_reads_everything_again_when_a_resync_is_due() -> None:
    seen: list[datetime | None] = []
    snaps = [{1: {"s": "a"}}, {1: {"s": "a"}}, {1: {"s": "b"}}]
    stream = kb_events(_changes(snaps, seen), interval_s=0, kb_id=9, resync_s=0)
    out = [await anext(stream) for _ in range(2)]
    await stream.aclose()
    assert seen == [None, None, None]
    assert [json.loads(e["data"]) for e in out] == [{"s": "a"}, {"s": "b"}]


async def test_kb_stream_reads_everything_after_an_id_it_never_saw() -> None:
    # a row committed behind the watermark: its id is in the KB but not among the changes
    seen: list[datetime | None] = []
    answers = iter([(T0, {1: {"s": "a"}}, frozenset({1})), (T0, {}, frozenset({1, 2})),
                    (T0, {1: {"s": "a"}, 2: {"s": "late"}}, frozenset({1, 2}))])

    async def load_changes(since: datetime | None) -> Changes:
        seen.append(since)
        return next(answers)

    stream = kb_events(load_changes, interval_s=0, kb_id=9, overlap_s=0, resync_s=3600)
    out = [await anext(stream) for _ in range(2)]
    await stream.aclose()
    assert seen == [None, T0, None]
    assert [json.loads(e["data"]) for e in out] == [{"s": "a"}, {"s": "late"}]


@pytest.mark.parametrize("reason", ["revoked", "kb_deleted"])
async def test_kb_stream_ends_when_its_guard_says_so(reason: str, caplog: pytest.LogCaptureFixture) -> None:
    verdicts = iter([None, None, reason])
    checks: list[int] = []

    async def check() -> str | None:
        checks.append(1)
        return next(verdicts)

    caplog.set_level(logging.INFO, logger="knowledge_service.events")
    loads = _changes([{1: {"s": "a"}}] * 10)
    out = [e async for e in kb_events(loads, interval_s=0, kb_id=4, guard=Guard(check, every_s=0))]
    assert [e["event"] for e in out] == ["document", "end"]
    assert json.loads(out[-1]["data"]) == {"kb_id": 4, "reason": reason}
    assert len(checks) == 3
    assert [getattr(r, "reason", None) for r in caplog.records if r.message == "event stream closed"] == [reason]


async def test_task_stream_ends_when_its_token_is_revoked() -> None:
    verdicts = iter([None, "revoked"])

    async def check() -> str | None:
        return next(verdicts)

    running = {"task_id": 7, "status": "RUNNING"}
    out = [e async for e in task_events(_loader([running] * 5), interval_s=0, task_id=7,
                                        guard=Guard(check, every_s=0))]
    assert [e["event"] for e in out] == ["task", "end"]
    assert json.loads(out[-1]["data"]) == {"task_id": 7, "reason": "revoked"}


async def test_the_guard_runs_once_per_period_and_a_failed_check_is_skipped() -> None:
    checks: list[str | None] = []
    answers = iter([DOWN, None, None, None])

    async def check() -> str | None:
        got = next(answers)
        checks.append(type(got).__name__)
        if isinstance(got, Exception):
            raise got
        return got

    stream = kb_events(_changes([{1: {"s": str(i)}} for i in range(4)]), interval_s=0, kb_id=1,
                       guard=Guard(check, every_s=3600))
    out = [await anext(stream) for _ in range(3)]
    await stream.aclose()
    assert len(out) == 3
    assert checks == ["DatabaseUnavailableError", "NoneType"]  # retried at the next poll, then not for an hour
