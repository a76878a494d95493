"""Metrics objects and message properties, offline: registries are per instance, the upload
middleware counts by status, labels stay bounded, and index messages get their properties."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest

from knowledge_service.metrics import ApiMetrics, UploadResultMiddleware
from shared.adapters.rabbitmq import Publisher
from shared.domain.errors import BrokerUnavailableError
from shared.domain.messages import GENERATION_HEADER, IndexMessage
from shared.domain.records import OutboxRow
from task_service.metrics import STAGES, WorkerMetrics
from task_service.pipeline.extract import Extraction


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    v = registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


def test_several_instances_do_not_collide() -> None:
    """The registry is built per app / worker: two of them (as tests make) register fine."""
    a, b = WorkerMetrics.unregistered(), WorkerMetrics.unregistered()
    a.finished("SUCCESS")
    assert _value(a.registry, "rag_tasks_finished_total", status="SUCCESS", error_code="") == 1
    assert _value(b.registry, "rag_tasks_finished_total", status="SUCCESS", error_code="") == 0
    ApiMetrics.unregistered(), ApiMetrics.unregistered()


def test_stage_histograms_are_exported_before_the_first_task() -> None:
    m = WorkerMetrics.unregistered()
    text = generate_latest(m.registry).decode()
    for stage in STAGES:
        assert f'rag_stage_duration_seconds_count{{stage="{stage}"}} 0.0' in text
    with m.stage("download"):
        pass
    m.observe_stage("parse", 0.2)
    assert _value(m.registry, "rag_stage_duration_seconds_count", stage="download") == 1
    assert _value(m.registry, "rag_stage_duration_seconds_sum", stage="parse") == 0.2


def test_upload_middleware_counts_uploads_by_status_only() -> None:
    metrics = ApiMetrics.unregistered()
    app = FastAPI()

    @app.post("/api/v1/knowledge-bases/{kb_id}/documents", status_code=202)
    async def upload(kb_id: int) -> dict[str, int]:
        if kb_id == 9:
            raise HTTPException(429, "busy", headers={"Retry-After": "3"})
        return {"kb_id": kb_id}

    @app.put("/api/v1/documents/{doc_id}/content", status_code=202)
    async def content(doc_id: int) -> dict[str, int]:
        raise HTTPException(415, "type")

    @app.get("/api/v1/knowledge-bases/{kb_id}/documents")
    async def listing(kb_id: int) -> dict[str, int]:
        return {}

    app.add_middleware(UploadResultMiddleware, metrics=metrics)
    with TestClient(app) as c:
        assert c.post("/api/v1/knowledge-bases/1/documents").status_code == 202
        assert c.post("/api/v1/knowledge-bases/9/documents").status_code == 429
        assert c.put("/api/v1/documents/5/content").status_code == 415
        assert c.get("/api/v1/knowledge-bases/1/documents").status_code == 200  # not an upload
        assert c.post("/api/v1/knowledge-bases/1/search").status_code in (404, 405)
    r = metrics.registry
    assert _value(r, "rag_uploads_total", result="202") == 1
    assert _value(r, "rag_uploads_total", result="429") == 1
    assert _value(r, "rag_uploads_total", result="415") == 1
    assert _value(r, "rag_uploads_total", result="200") == 0
    assert "kb_id" not in generate_latest(r).decode()  # no ids in labels


def test_an_outbox_row_carries_its_message_s_generation_header() -> None:
    msg = IndexMessage(task_id=7, document_id=3, kb_id=1, user_id=2, generation=4)
    row = OutboxRow(1, uuid.uuid4(), "x", "k", msg.to_json(), msg.task_id, msg.generation)
    assert row.headers == {GENERATION_HEADER: 4}


def test_extraction_timings_survive_pack_and_unpack() -> None:
    from shared.domain.records import Chunk

    e = Extraction((Chunk(0, "hello", 1, None, "A"),), ("w",), parse_s=0.25, chunk_s=0.5)
    back = Extraction.unpack(e.pack())
    assert (back.parse_s, back.chunk_s, back.warnings, back.chunks) == (0.25, 0.5, ("w",), e.chunks)


class _FakeExchange:
    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.sent: list[Any] = []

    async def publish(self, message: Any, **_: Any) -> None:
        if self.fail:
            raise ConnectionError("broker gone")
        self.sent.append(message)


class _FakeChannel:
    def __init__(self, exchange: _FakeExchange) -> None:
        self.exchange = exchange
        self.is_closed = False

    async def get_exchange(self, name: str, ensure: bool) -> _FakeExchange:
        return self.exchange


async def test_publisher_sets_properties_and_reports_failures() -> None:
    body = IndexMessage(task_id=7, document_id=3, kb_id=1, user_id=2, generation=4).to_json()
    ok = _FakeExchange(fail=False)
    failures: list[int] = []
    await Publisher(_FakeChannel(ok), 5.0, "knowledge_service", lambda: failures.append(1)).publish(  # type: ignore[arg-type]
        body, correlation_id="7", headers={"x-other": 1, GENERATION_HEADER: 4})
    await Publisher(_FakeChannel(ok), 5.0, "x").publish(b"not json: sent as given, never parsed")  # type: ignore[arg-type]
    [m, raw] = ok.sent
    assert (m.correlation_id, m.app_id, m.content_type) == ("7", "knowledge_service", "application/json")
    assert m.headers == {"x-other": 1, GENERATION_HEADER: 4} and m.message_id and m.timestamp is not None
    assert (raw.body, raw.correlation_id, raw.headers) == (b"not json: sent as given, never parsed", None, {})
    assert failures == []
    with pytest.raises(BrokerUnavailableError):
        await Publisher(_FakeChannel(_FakeExchange(fail=True)), 5.0, "x", lambda: failures.append(1)).publish(body)  # type: ignore[arg-type]
    assert failures == [1]
