"""The periodic jobs without services: :func:`task_service.jobs.every` (the one loop: first pass,
wake, again-at-once, delay, failures logged and survived) and the job package's shape (every job
module exposes ``once`` and has a ``rag ops`` command)."""

from __future__ import annotations

import asyncio
import importlib
import logging
import pkgutil

import pytest

import task_service.jobs
from shared.domain.errors import DatabaseUnavailableError
from task_service.jobs import every
from task_service.jobs.oneshot import OPS

LONG = 3600.0  # an interval no test waits for: a pass that runs early was woken, or ran "again"


async def _finish(coro: object) -> None:
    await asyncio.wait_for(coro, timeout=5)  # type: ignore[arg-type]


async def test_first_pass_runs_at_once_then_stop_ends_the_loop() -> None:
    stop = asyncio.Event()
    calls = 0

    async def one_pass() -> None:
        nonlocal calls
        calls += 1
        stop.set()

    await _finish(every("job", one_pass, LONG, stop))
    assert calls == 1


async def test_wake_starts_the_next_pass_at_once() -> None:
    stop, wake = asyncio.Event(), asyncio.Event()
    calls = 0

    async def one_pass() -> None:
        nonlocal calls
        calls += 1
        (wake if calls == 1 else stop).set()  # set during the pass: not lost by the clear before it

    await _finish(every("job", one_pass, LONG, stop, wake=wake))
    assert calls == 2


async def test_a_full_pass_runs_again_at_once() -> None:
    stop = asyncio.Event()
    results = [100, 100, 3]

    async def one_pass() -> int:
        n = results.pop(0)
        if not results:
            stop.set()
        return n

    await _finish(every("job", one_pass, LONG, stop, again=lambda n: n >= 100))
    assert results == []


async def test_delay_first_waits_one_interval_before_the_first_pass() -> None:
    stop, wake = asyncio.Event(), asyncio.Event()
    calls = 0

    async def one_pass() -> None:
        nonlocal calls
        calls += 1
        stop.set()

    task = asyncio.create_task(every("job", one_pass, LONG, stop, wake=wake, delay_first=True))
    for _ in range(5):
        await asyncio.sleep(0)  # let the loop reach its first pause
    assert calls == 0 and not task.done()
    wake.set()
    await _finish(task)
    assert calls == 1


async def test_stop_during_the_first_delay_runs_no_pass() -> None:
    stop = asyncio.Event()
    stop.set()

    async def one_pass() -> None:
        raise AssertionError("no pass after stop")

    await _finish(every("job", one_pass, LONG, stop, delay_first=True))


async def _fail_once_then_stop(name: str, error: Exception, caplog: pytest.LogCaptureFixture) -> int:
    """Run ``every`` over a pass that raises ``error`` once, then stops the job; how many passes ran."""
    stop, wake = asyncio.Event(), asyncio.Event()
    calls = 0

    async def one_pass() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            wake.set()
            raise error
        stop.set()

    with caplog.at_level(logging.WARNING, logger="task_service.jobs"):
        await _finish(every(name, one_pass, LONG, stop, wake=wake))
    return calls


async def test_a_failed_pass_is_logged_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    assert await _fail_once_then_stop("orphan sweep", DatabaseUnavailableError("connection refused"), caplog) == 2
    [record] = [r for r in caplog.records if r.getMessage() == "orphan sweep failed"]
    assert record.error == "DatabaseUnavailableError: connection refused"  # type: ignore[attr-defined]


async def test_an_unexpected_error_is_logged_with_its_traceback_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A bug in one pass (an error no adapter translated) must not end the job for the worker's
    lifetime: the scanner that died so left forgotten tasks unrecovered (issue 31's e2e run)."""
    assert await _fail_once_then_stop("scan", ValueError("a bug"), caplog) == 2
    [record] = [r for r in caplog.records if r.getMessage() == "scan crashed"]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.error == "ValueError: a bug"  # type: ignore[attr-defined]


async def test_cancellation_still_ends_the_loop() -> None:
    started = asyncio.Event()

    async def one_pass() -> None:
        started.set()
        await asyncio.sleep(LONG)

    task = asyncio.create_task(every("job", one_pass, LONG, asyncio.Event()))
    await _finish(started.wait())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await _finish(task)


def _job_modules() -> list[str]:
    return [m.name for m in pkgutil.iter_modules(task_service.jobs.__path__) if m.name != "oneshot"]


@pytest.mark.parametrize("name", _job_modules())
def test_every_job_module_exposes_once_and_a_rag_ops_command(name: str) -> None:
    module = importlib.import_module(f"task_service.jobs.{name}")
    assert asyncio.iscoroutinefunction(module.once), f"task_service.jobs.{name}.once"
    assert name.replace("_", "-") in OPS, f"no `rag ops {name.replace('_', '-')} --once` (jobs/oneshot.py OPS)"


def test_every_rag_ops_command_is_a_job_module() -> None:
    assert sorted(OPS) == sorted(n.replace("_", "-") for n in _job_modules())
