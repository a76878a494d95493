"""The Server-Sent Events generators over fake loaders (no database)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from knowledge_service.events import changed_documents, kb_events, task_events
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
    stream = kb_events(_loader(snaps), interval_s=0, kb_id=9)
    out = [await anext(stream) for _ in range(4)]
    await stream.aclose()
    assert [(e["event"], json.loads(e["data"])) for e in out] == [
        ("document", {"id": 1, "s": "a"}), ("document", {"id": 2, "s": "a"}),
        ("document", {"id": 1, "s": "b"}), ("removed", {"document_id": 2}),
    ]


async def test_streams_close_after_their_maximum_duration(caplog: pytest.LogCaptureFixture) -> None:
    async def running() -> Mapping[str, Any]:
        return {"status": "RUNNING"}

    async def one_document() -> Mapping[int, Mapping[str, Any]]:
        return {1: {"status": "INDEXING"}}

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

    stream = kb_events(_loader([DOWN, {1: {"s": "a"}}, DOWN, {1: {"s": "b"}}]), interval_s=0, kb_id=3)
    kb_out = [await anext(stream) for _ in range(2)]
    await stream.aclose()
    assert [json.loads(e["data"]) for e in kb_out] == [{"s": "a"}, {"s": "b"}]
