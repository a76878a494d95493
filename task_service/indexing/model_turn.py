"""The worker's model turn: one unit of work embeds at a time, first come first served."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from task_service.metrics import WorkerMetrics

log = logging.getLogger(__name__)
#: A wait for the model turn at least this long is logged, seconds.
MODEL_WAIT_LOGGED_S = 0.1


class ModelTurn:
    """Hold the worker's model turn, first come first served (``asyncio.Lock`` wakes waiters in
    order).

    With ``PREFETCH`` > 1 this is the worker's pipeline: a delivery that arrives while another
    embeds is claimed, downloaded, parsed and chunked at once, then waits here, so the model goes
    from one document to the next without waiting for a download, a parse or a commit (the turn
    ends before the commit; a copy of the same texts embedding next reads the vectors just
    embedded from the turn's hand-off, ``cache.EmbeddingCache.hand_off``)."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self._lock = asyncio.Lock()
        self._metrics = metrics

    def locked(self) -> bool:
        """True while a unit of work holds the turn."""
        return self._lock.locked()

    @contextlib.asynccontextmanager
    async def hold(self, deadline: asyncio.Timeout,
                   on_wait: Callable[[], Awaitable[None]] | None = None) -> AsyncIterator[None]:
        """Wait for the turn and hold it for the block; ``on_wait`` is awaited first when the
        turn is taken (the unit shows MODEL_WAIT), never when it is free (no added latency). The
        wait is not the unit's own time: ``deadline`` (its budget) is suspended meanwhile and
        resumes with what was left of it. A wait is at most the others' turns, each within its
        own budget of at most one unit's length, so a delivery stays unacked at most
        ``shared.domain.time_budget.delivery_bound_s`` (below ``CONSUMER_TIMEOUT_S`` by the
        settings' start-up guard). Raises what ``on_wait`` raises, nothing of its own."""
        if on_wait is not None and self._lock.locked():
            await on_wait()
        loop = asyncio.get_running_loop()
        started = loop.time()
        when = deadline.when()
        deadline.reschedule(None)
        try:
            await self._lock.acquire()
        finally:
            waited = loop.time() - started
            if when is not None:
                deadline.reschedule(when + waited)
        try:
            if waited >= MODEL_WAIT_LOGGED_S:
                log.info("model turn after waiting", extra={"waited_s": round(waited, 3)})
            self._metrics.observe_stage("model_wait", waited)
            yield
        finally:
            self._lock.release()
