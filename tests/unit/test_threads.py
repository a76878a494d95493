"""The worker's default executor: a thread still blocked in a call does not hold up process exit
(``asyncio.run`` joins the standard pool's threads at the end, with no timeout on Python 3.11)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from task_service.threads import DaemonThreadPool

SCRIPT = """
import asyncio, time
from concurrent.futures import ThreadPoolExecutor
from task_service.threads import DaemonThreadPool

async def main(pool):
    asyncio.get_running_loop().set_default_executor(pool)
    assert await asyncio.to_thread(lambda: 42) == 42
    blocked = asyncio.ensure_future(asyncio.to_thread(time.sleep, 600))
    await asyncio.sleep(0.2)
    blocked.cancel()

asyncio.run(main({pool}))
print("main returned", flush=True)
"""


def _exit_seconds(pool: str, timeout: float) -> float | None:
    """Seconds the script took to exit, or None if it was still running after ``timeout``."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.format(pool=pool)], cwd=Path(__file__).parents[2],
                            stdout=subprocess.PIPE)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None
    assert proc.returncode == 0 and proc.stdout is not None and b"main returned" in proc.stdout.read()
    return time.monotonic() - started


def test_a_blocked_thread_does_not_hold_up_exit() -> None:
    seconds = _exit_seconds('DaemonThreadPool(4, "t")', timeout=30)
    assert seconds is not None, "the process waited for its blocked thread"


def test_the_standard_pool_would_have_held_it_up() -> None:  # the bug this pool fixes
    assert _exit_seconds("ThreadPoolExecutor(4)", timeout=2) is None


def test_pool_runs_work_and_refuses_after_shutdown() -> None:
    pool = DaemonThreadPool(2, "t")
    assert [f.result(timeout=5) for f in [pool.submit(pow, 2, i) for i in range(6)]] == [1, 2, 4, 8, 16, 32]
    assert all(t.daemon for t in pool._threads)  # type: ignore[attr-defined]
    pool.shutdown(wait=True)
    with pytest.raises(RuntimeError):
        pool.submit(pow, 2, 2)
