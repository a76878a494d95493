"""The seam between a delivery and its work: what a claimed unit of work is, and what it runs with.

The delivery (:mod:`task_service.indexing.delivery`) claims a unit, then runs it under the lease
and the time limit and turns how it ended into an ``Outcome``; the unit (a whole document,
:class:`task_service.indexing.document.DocumentRun`) does the work. Everything a unit needs
comes in one :class:`RunDeps`, built once per worker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from shared.domain.errors import StaleGenerationError, TransientError
from shared.domain.messages import IndexMessage
from shared.domain.records import Claim
from shared.domain.states import TaskStatus
from shared.ports import Embedder, ObjectReader, ReleasedObjects, WorkerStore
from task_service.indexing.cache import EmbeddingCache
from task_service.indexing.config import HandlerConfig
from task_service.indexing.extraction import Extractor
from task_service.indexing.model_turn import ModelTurn
from task_service.indexing.progress import ProgressThrottle, Stage
from task_service.metrics import WorkerMetrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunDeps:
    """What every unit of work of one worker runs with: ``store``, ``objects`` and ``embedder``
    retry transient failures (:mod:`task_service.indexing.retrying`); ``model_turn`` and
    ``cache`` are the worker's one of each."""

    config: HandlerConfig
    store: WorkerStore
    objects: ObjectReader
    released: ReleasedObjects
    embedder: Embedder
    parse: Extractor
    cache: EmbeddingCache
    model_turn: ModelTurn
    metrics: WorkerMetrics
    worker_name: str


@dataclass
class Progress:
    """Writes one claim's stage and progress, about once a second (:class:`ProgressThrottle`)."""

    store: WorkerStore
    claim: Claim
    throttle: ProgressThrottle = field(default_factory=ProgressThrottle)
    clock: Callable[[], float] = time.monotonic

    async def report(self, stage: Stage, progress: float = 0.0) -> None:
        """Write ``stage`` and ``progress`` (0..1) if the throttle allows it. Best effort: a
        database failure is logged, not fatal; a write fenced out raises
        ``StaleGenerationError`` (a newer claim owns the task: stop working)."""
        if not self.throttle.should_write(self.clock(), stage, progress):
            return
        try:
            alive = await self.store.report_progress(self.claim, stage.value, progress)
        except TransientError as exc:
            log.warning("progress not written", extra={"stage": stage.value, "error": str(exc)})
            return
        if not alive:
            raise StaleGenerationError("claim superseded (progress write fenced out)")


class ClaimedUnit(Protocol):
    """A unit of work its delivery has claimed (``claim``: its fencing token). The delivery runs
    :meth:`run` under the lease (:meth:`heartbeat` each period) and the time limit, and calls
    :meth:`finish` when it ends without success."""

    msg: IndexMessage
    claim: Claim

    async def run(self, deadline: asyncio.Timeout) -> int:
        """Do the work to its fenced commit; the chunks committed. ``deadline`` is the unit's
        time limit (suspended while it waits for the model turn). Raises ``FencedOut``
        (superseded), ``IndexingError`` (the document's or an infrastructure fault, for good),
        ``TimeoutError`` (the deadline)."""
        ...

    async def heartbeat(self) -> bool:
        """Touch the claim; False when it is fenced out."""
        ...

    async def finish(self, status: TaskStatus, error_code: str, message: str) -> bool:
        """End the task ``status`` (FAILED / TIMEOUT) with the error, fenced on the claim; False
        when fenced out."""
        ...
