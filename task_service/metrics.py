"""The worker's Prometheus metrics (prometheus-client), served on ``WORKER_METRICS_PORT``.

One :class:`WorkerMetrics` per worker, built in the composition root (``__main__``) on its own
``CollectorRegistry`` (never the global one: tests build several). Labels are bounded sets —
statuses, error codes, stage names, skip reasons — never ids.

| metric | type | labels |
|---|---|---|
| ``rag_tasks_finished_total`` | counter | ``status`` (SUCCESS, FAILED, TIMEOUT), ``error_code`` ("" on SUCCESS) |
| ``rag_stage_duration_seconds`` | histogram | ``stage`` (download, parse, chunk, model_wait, embed, write) |
| ``rag_embedded_chunks_total`` | counter | |
| ``rag_deliveries_total`` | counter | ``outcome`` (ack, reject, delay, requeue, dead_letter) |
| ``rag_deliveries_skipped_total`` | counter | ``reason`` (stale_generation, not_runnable, ...) |
| ``rag_lock_held_retries_total`` | counter | |
| ``rag_publish_failures_total`` | counter | ``source``: the publisher (relay; consumer = delay and DLQ copies) |
| ``rag_outbox_backlog`` | gauge, sampled | |
| ``rag_dlq_depth`` | gauge, sampled | |
| ``rag_queue_messages`` | gauge, sampled | ``queue`` (rag.index.queue, rag.index.dlq) |
| ``rag_tasks_active`` | gauge, sampled | ``status`` (WAITING, RETRYING, RUNNING) |
| ``rag_tasks_oldest_age_seconds`` | gauge, sampled | ``status`` (WAITING, RETRYING, RUNNING) |

Sampled gauges are refreshed every ``WORKER_METRICS_SAMPLE_S`` seconds by the job
:mod:`task_service.jobs.metrics_sampler`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from shared.domain.states import ACTIVE

log = logging.getLogger(__name__)

#: ``model_wait``: a prepared delivery waiting for the model turn (PREFETCH > 1: another embeds).
STAGES = ("download", "parse", "chunk", "model_wait", "embed", "write")
ACTIVE_STATUSES = tuple(sorted(s.value for s in ACTIVE))  # the gauges' status labels
#: Seconds: from a 10 ms parse to a 25 min unit (a part's or a run's budget is at most ~10 min by default).
STAGE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1500)


class WorkerMetrics:
    """The worker's metric objects, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.tasks_finished = Counter(
            "rag_tasks_finished", "Tasks that reached a terminal status, by status and error code",
            ["status", "error_code"], registry=registry)
        self.stage_seconds = Histogram(
            "rag_stage_duration_seconds", "Duration of one pipeline stage of one task, seconds",
            ["stage"], buckets=STAGE_BUCKETS, registry=registry)
        self.embedded_chunks = Counter(
            "rag_embedded_chunks", "Chunks embedded and committed", registry=registry)
        self.deliveries = Counter(
            "rag_deliveries", "Deliveries of rag.index.queue by how they were settled", ["outcome"],
            registry=registry)
        self.skipped = Counter(
            "rag_deliveries_skipped", "Deliveries acked without work (delivery_skip rows), by reason",
            ["reason"], registry=registry)
        self.lock_held_retries = Counter(
            "rag_lock_held_retries", "Deliveries sent round the delay queue because the document lock was held",
            registry=registry)
        self.publish_failures = Counter(
            "rag_publish_failures", "Publishes the broker did not confirm, by publisher", ["source"],
            registry=registry)
        self.outbox_backlog = Gauge(
            "rag_outbox_backlog", "Outbox rows not yet published (sampled)", registry=registry)
        self.dlq_depth = Gauge(
            "rag_dlq_depth", "Dead letters waiting for an operator: pending dead_letter rows plus messages "
            "still in rag.index.dlq (sampled)", registry=registry)
        self.queue_messages = Gauge(
            "rag_queue_messages", "Ready messages in a queue (sampled)", ["queue"], registry=registry)
        self.tasks_active = Gauge(
            "rag_tasks_active", "Tasks in a non-terminal status (sampled)", ["status"], registry=registry)
        self.tasks_oldest_age = Gauge(
            "rag_tasks_oldest_age_seconds", "Seconds since the least recently updated task of a status was "
            "touched (sampled; 0 when there is none)", ["status"], registry=registry)
        for stage in STAGES:
            self.stage_seconds.labels(stage)  # exported at 0 before the first task
        for status in ACTIVE_STATUSES:
            self.tasks_active.labels(status)
            self.tasks_oldest_age.labels(status)

    @classmethod
    def unregistered(cls) -> WorkerMetrics:
        """Metrics on a private registry nobody serves (the default for tests and one-shot commands)."""
        return cls(CollectorRegistry())

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Observe the block's duration as stage ``name`` (also when it raises)."""
        with self.stage_seconds.labels(name).time():
            yield

    def observe_stage(self, name: str, seconds: float) -> None:
        self.stage_seconds.labels(name).observe(seconds)

    def finished(self, status: str, error_code: str = "") -> None:
        self.tasks_finished.labels(status, error_code).inc()


def serve(metrics: WorkerMetrics, host: str, port: int) -> Any:
    """Start the ``/metrics`` HTTP server on a daemon thread; returns the server (``.shutdown()``)."""
    server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    log.info("metrics served", extra={"url": f"http://{host}:{server.server_port}/metrics"})
    return server
