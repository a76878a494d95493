"""``delivery_skip`` rows, written in the background and batched (off the ack's path)."""

from __future__ import annotations

import asyncio
import logging

from shared.domain.errors import TransientError
from shared.domain.messages import IndexMessage
from shared.domain.records import SkipRecord
from shared.ports import WorkerStore
from task_service.metrics import WorkerMetrics

log = logging.getLogger(__name__)
#: delivery_skip rows waiting for the background writer, at most (then a skip waits for it).
MAX_PENDING_SKIPS = 1000


class SkipLog:
    """Records deliveries acked without work: a worker draining a backlog of duplicates acks at
    once and writes many rows per round trip (the writer takes every row waiting). ``store``
    retries transient failures; rows it still cannot write are logged and dropped."""

    def __init__(self, store: WorkerStore, worker_name: str, metrics: WorkerMetrics) -> None:
        self._store = store
        self._worker = worker_name
        self._metrics = metrics
        self._rows: list[SkipRecord] = []  # not yet written
        self._writer: asyncio.Task[None] | None = None

    async def skip(self, reason: str, msg: IndexMessage) -> None:
        """Log and count the skip and queue its row; past :data:`MAX_PENDING_SKIPS` waiting rows
        this waits for the writer."""
        log.info("delivery skipped", extra={"reason": reason})
        self._metrics.skipped.labels(str(reason)).inc()
        self._rows.append(SkipRecord(str(reason), msg.task_id, msg.document_id, msg.generation))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())
        elif len(self._rows) >= MAX_PENDING_SKIPS:
            await asyncio.shield(self._writer)

    async def _write(self) -> None:
        while self._rows:
            rows, self._rows = self._rows, []
            try:
                await self._store.record_skips(rows, self._worker)
            except TransientError:
                log.warning("could not record skips", extra={"rows": len(rows)})

    async def flush(self, timeout_s: float = 3.0) -> None:
        """Wait up to ``timeout_s`` seconds for the rows still being written."""
        if self._writer is not None and not self._writer.done():
            await asyncio.wait({self._writer}, timeout=timeout_s)
