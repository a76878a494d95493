"""The API's Prometheus metrics (prometheus-client), served at ``GET /metrics``.

One :class:`ApiMetrics` per app, built in ``create_app`` on its own ``CollectorRegistry`` (never
the global one: tests build several apps). Labels are bounded (HTTP status codes, publisher
names), never ids.

| metric | type | labels |
|---|---|---|
| ``rag_uploads_total`` | counter | ``result``: HTTP status of an upload or new content (202, 413, 415, 429...) |
| ``rag_publish_failures_total`` | counter | ``source``: ``api`` (the inline publish after commit) |
| ``rag_outbox_backlog`` | gauge, sampled at scrape | |
"""

from __future__ import annotations

import asyncio
import logging
import re

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

#: (method, path) of the routes that take an upload.
_UPLOAD_ROUTES = (
    ("POST", re.compile(r"^/api/v1/knowledge-bases/[^/]+/documents/?$")),
    ("PUT", re.compile(r"^/api/v1/documents/[^/]+/content/?$")),
)


class ApiMetrics:
    """The API's metric objects, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.uploads = Counter(
            "rag_uploads", "Upload requests (new document or new content) by HTTP status", ["result"],
            registry=registry)
        self.publish_failures = Counter(
            "rag_publish_failures", "Publishes the broker did not confirm, by publisher", ["source"],
            registry=registry)
        self.outbox_backlog = Gauge(
            "rag_outbox_backlog", "Outbox rows not yet published (sampled at scrape)", registry=registry)
        self.uploads.labels("202")
        self.publish_failures.labels("api")

    @classmethod
    def unregistered(cls) -> ApiMetrics:
        """Metrics on a private registry (for code paths built without an app)."""
        return cls(CollectorRegistry())


class UploadResultMiddleware:
    """Pure ASGI middleware counting upload requests by the status they were answered with
    (``rag_uploads_total{result}``); other requests pass untouched (bodies are streamed, not read)."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _is_upload(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        status = 500  # an exception that escapes every handler

        async def record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            self.metrics.uploads.labels(str(status)).inc()


def _is_upload(method: str, path: str) -> bool:
    return any(method == m and pattern.match(path) for m, pattern in _UPLOAD_ROUTES)


router = APIRouter()


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Prometheus text format. The outbox backlog is sampled now (one indexed count); if the
    database does not answer within 2 s the last value is kept."""
    res = request.app.state.resources
    m: ApiMetrics = res.metrics
    try:
        m.outbox_backlog.set(await asyncio.wait_for(res.reads.outbox_backlog(), 2))
    except Exception as exc:  # a scrape never fails because the database is down
        log.warning("metrics sample failed", extra={"error": f"{type(exc).__name__}: {exc}"})
    return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)
