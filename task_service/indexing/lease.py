"""Run work under a lease: a watchdog renews the Redis lock and heartbeats the task row.

If a renewal proves the claim lost (lock taken by someone else, or the task row no longer
carries our ``(generation, attempt)``), the work is cancelled before it can reach its commit;
the database fence would refuse that commit anyway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from shared.domain.errors import FencedOut, TransientError

log = logging.getLogger(__name__)
T = TypeVar("T")


async def run_with_lease(
    work: Coroutine[Any, Any, T],
    *,
    renew: Callable[[], Awaitable[None]],
    period_s: float,
) -> T:
    """Await ``work`` while calling ``renew()`` every ``period_s`` seconds.

    ``renew`` raises FencedOut when the lease is lost: ``work`` is cancelled and the FencedOut
    re-raised. A TransientError from ``renew`` is logged and the next period tries again.
    """
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=period_s)
            if done:
                return task.result()
            try:
                await renew()
            except FencedOut:
                if task.done() and not task.cancelled() and task.exception() is None:
                    # the work finished (committed: the task row is no longer RUNNING) while the
                    # renewal was in flight; the renewal saw our own commit, not a rival
                    return task.result()
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise
            except TransientError as exc:
                log.warning("lease renewal failed, will retry", extra={"error": str(exc)})
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
