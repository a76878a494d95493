"""Periodic sampling of the gauges of the worker's ``/metrics`` (outbox backlog, active tasks,
queue depths, dead letters): every ``WORKER_METRICS_SAMPLE_S`` seconds in each worker that
serves metrics (``WORKER_METRICS_PORT``). ``rag ops metrics-sampler --once`` prints one sample.
"""

from __future__ import annotations

from aio_pika.abc import AbstractChannel

from shared.adapters import rabbitmq
from shared.domain import messages
from shared.domain.errors import TransientError
from shared.ports import MaintenanceStore
from task_service.metrics import ACTIVE_STATUSES, WorkerMetrics

#: What a failed pass may raise (logged by ``every``, the loop goes on).
ERRORS: tuple[type[BaseException], ...] = (TransientError, *rabbitmq.BROKER_ERRORS)


async def once(metrics: WorkerMetrics, store: MaintenanceStore, channel: AbstractChannel | None) -> None:
    """Refresh the sampled gauges from PostgreSQL and (if given) the broker."""
    sample = await store.sample()
    metrics.outbox_backlog.set(sample.outbox_backlog)
    for status in ACTIVE_STATUSES:
        count, age = sample.active.get(status, (0, 0.0))
        metrics.tasks_active.labels(status).set(count)
        metrics.tasks_oldest_age.labels(status).set(age)
    in_dlq = 0
    if channel is not None and not channel.is_closed:
        for name in (messages.QUEUE, messages.DLQ):
            queue = await channel.declare_queue(name, passive=True)
            ready = queue.declaration_result.message_count or 0
            metrics.queue_messages.labels(name).set(ready)
            if name == messages.DLQ:
                in_dlq = ready
    metrics.dlq_depth.set(sample.dead_letters_pending + in_dlq)
