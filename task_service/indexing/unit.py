"""The seam between a delivery and its work: what a claimed unit of work is, and what it runs with.

The delivery (:mod:`task_service.indexing.delivery`) claims a unit, then runs it under the lease
and its :class:`Budget` and turns how it ended into an ``Outcome``; the unit does the work: a
whole document (:class:`task_service.indexing.document.DocumentRun`: indexed at once below
``SPLIT_MIN_CHUNKS`` chunks, else split into parts) or one part of a split document
(:class:`task_service.indexing.part.PartRun`). Everything a unit needs comes in one
:class:`RunDeps`, built once per worker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from shared.domain.errors import StaleGenerationError, TransientError
from shared.domain.messages import IndexMessage
from shared.domain.records import Claim, OutboxRow, PartClaim
from shared.domain.states import TaskStatus
from shared.domain.time_budget import task_budget_s
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
    #: publishes a split's released part messages after its commit (the delivery's; the outbox
    #: relay publishes what this could not)
    publish_parts: Callable[[list[OutboxRow]], Awaitable[None]]


class Budget:
    """A unit's time budget, seconds of its own time (model-turn waits excluded):
    ``base_s + chunks × per_chunk_s`` (:func:`shared.domain.time_budget.task_budget_s`), only
    ``base_s`` until its chunks are known. ``total_s`` is the budget so far."""

    def __init__(self, base_s: float, per_chunk_s: float, chunks: int | None = None) -> None:
        self.per_chunk_s = per_chunk_s
        self.total_s = task_budget_s(chunks, base_s, per_chunk_s)

    def add_chunks(self, deadline: asyncio.Timeout, chunks: int) -> None:
        """The unit now knows it embeds ``chunks`` chunks: ``deadline`` moves out by their share."""
        grow = chunks * self.per_chunk_s
        self.total_s += grow
        when = deadline.when()
        if when is not None:
            deadline.reschedule(when + grow)


@dataclass(frozen=True)
class UnitDone:
    """How a unit succeeded: ``event`` (the log line's event name, a constant: numbers go in
    fields), the unit's ``chunks``, the chunks it ``committed`` with their vectors (0 for a
    split), whether its task reached SUCCESS (``indexed``: a single-path commit or the swap; not a
    split, not a part staged before the last) and, for a split, its ``parts``."""

    event: str
    chunks: int
    committed: int
    indexed: bool
    parts: int = 0


class ReportsProgress(Protocol):
    """Where a unit's stage and progress go (:class:`Progress` for a document run)."""

    async def report(self, stage: Stage, progress: float = 0.0) -> None:
        """``progress``: the share (0..1) of the unit's embedding done. Raises
        ``StaleGenerationError`` when the write is fenced out."""
        ...


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

    @property
    def msg(self) -> IndexMessage: ...

    @property
    def claim(self) -> Claim | PartClaim: ...

    @property
    def budget(self) -> Budget: ...

    async def run(self, deadline: asyncio.Timeout) -> UnitDone:
        """Do the work to its fenced commit. ``deadline`` is the unit's budget (suspended while
        it waits for the model turn, grown by :meth:`Budget.add_chunks`). Raises ``FencedOut``
        (superseded), ``TaskTimeoutError`` (the model stalled), ``IndexingError`` (the
        document's or an infrastructure fault, for good), ``TimeoutError`` (the deadline)."""
        ...

    async def heartbeat(self) -> bool:
        """Touch the claim; False when it is fenced out."""
        ...

    async def finish(self, status: TaskStatus, error_code: str, message: str) -> bool:
        """End the task ``status`` (FAILED / TIMEOUT) with the error, fenced on the claim; False
        when fenced out."""
        ...
