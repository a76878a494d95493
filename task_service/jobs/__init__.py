"""The worker's periodic jobs, one module each, and :func:`every`, the one loop that runs them.

| module | one pass (``once``) | interval setting |
|---|---|---|
| ``relay`` | release held outbox rows fairly, publish released ones | ``RELAY_INTERVAL_S`` (+ woken when a task ends) |
| ``scanner`` | time out dead RUNNING tasks, re-publish forgotten ones, drain the DLQ | ``SCAN_INTERVAL_S`` |
| ``sweep`` | remove released and orphaned objects | ``ORPHAN_SWEEP_INTERVAL_S`` |
| ``cache_evictor`` | LRU eviction of the embedding cache | ``EMBEDDING_CACHE_EVICT_INTERVAL_S`` |
| ``metrics_sampler`` | refresh the sampled gauges of ``/metrics`` | ``WORKER_METRICS_SAMPLE_S`` |
| ``term_stats`` | fold the keyword statistics' pending deltas per KB | ``TERM_STATS_FOLD_INTERVAL_S`` |

Each module exposes ``once(...)``: one pass over explicit dependencies (no settings object), what
the tests and the operator command run. ``task_service/__main__.py`` (the composition root)
starts each with :func:`every`; ``oneshot.OPS`` builds each from the settings for
``rag ops <job> --once``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from shared.domain.errors import TransientError

log = logging.getLogger(__name__)
T = TypeVar("T")


async def every(name: str, fn: Callable[[], Awaitable[T]], interval_s: float, stop: asyncio.Event, *,
                wake: asyncio.Event | None = None, again: Callable[[T], bool] | None = None,
                delay_first: bool = False,
                errors: tuple[type[BaseException], ...] = (TransientError,)) -> None:
    """Run ``fn()`` (one pass) every ``interval_s`` seconds until ``stop`` is set.

    - ``delay_first``: the first pass runs after one interval, not at once.
    - ``wake``: setting it starts the next pass at once (it is cleared before each pass).
    - ``again(result)`` true: the pass left work behind (a full batch); the next runs at once.
    - A pass raising one of ``errors`` (an outage: expected) is logged as the warning
      ``"<name> failed"`` (field ``error``); any other exception (a bug, an error no adapter
      translated) as the error ``"<name> crashed"`` with its traceback. Either way the loop goes
      on with the next pass: a job that ended silently would leave the worker consuming with no
      recovery scanner, relay or sweep behind it until its next restart.
    """
    if delay_first:
        await _pause(stop, wake, interval_s)
    while not stop.is_set():
        if wake is not None:
            wake.clear()
        try:
            result = await fn()
        except errors as exc:
            log.warning(f"{name} failed", extra={"job": name, "error": f"{type(exc).__name__}: {exc}"})
        except Exception as exc:
            log.exception(f"{name} crashed", extra={"job": name, "error": f"{type(exc).__name__}: {exc}"})
        else:
            if again is not None and again(result):
                continue
        await _pause(stop, wake, interval_s)


async def _pause(stop: asyncio.Event, wake: asyncio.Event | None, timeout_s: float) -> None:
    """Return when ``stop`` or ``wake`` is set, or after ``timeout_s`` seconds."""
    waiters = [asyncio.ensure_future(stop.wait())]
    if wake is not None:
        waiters.append(asyncio.ensure_future(wake.wait()))
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
