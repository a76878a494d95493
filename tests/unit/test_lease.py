"""``run_with_lease`` without services: a lost lease cancels unfinished work; work that finished
while the failing renewal was in flight (it committed: the renewal saw our own commit) is kept."""

from __future__ import annotations

import asyncio

import pytest

from shared.domain.errors import StaleGenerationError
from task_service.indexing.lease import run_with_lease


async def test_work_that_finished_during_a_failed_renewal_keeps_its_result() -> None:
    async def work() -> int:
        await asyncio.sleep(0.05)
        return 7

    async def renew() -> None:
        await asyncio.sleep(0.3)  # the work commits meanwhile; the heartbeat then finds no RUNNING row
        raise StaleGenerationError("claim superseded (heartbeat fenced out)")

    assert await run_with_lease(work(), renew=renew, period_s=0.01) == 7


async def test_a_lost_lease_cancels_unfinished_work() -> None:
    cancelled = asyncio.Event()

    async def work() -> int:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 1

    async def renew() -> None:
        raise StaleGenerationError("claim superseded")

    with pytest.raises(StaleGenerationError):
        await run_with_lease(work(), renew=renew, period_s=0.01)
    assert cancelled.is_set()
