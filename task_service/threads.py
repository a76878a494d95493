"""A thread pool whose threads never hold up process exit (the worker's default executor).

``asyncio.run`` ends with ``loop.shutdown_default_executor()``, which joins the default
``ThreadPoolExecutor``'s threads — with no timeout on Python 3.11 — and ``concurrent.futures``
joins every pool thread again at interpreter exit. A blocking call still running in a thread
(a forward pass of the embedding model, a wait on the parse sandbox) therefore kept a SIGTERMed
worker alive until it returned: measured, a worker whose chunking thread ran on never exited.
Here the threads are daemons, left out of ``concurrent.futures``' exit-time join, and
``shutdown`` never waits: work still running when the process exits is abandoned (the worker's
deliveries are unacked, so the broker requeues them).

It subclasses ``ThreadPoolExecutor`` because ``loop.set_default_executor`` accepts nothing
else, and reuses the module's private ``_worker`` loop (same signature on Python 3.11-3.13).
Threads live until shutdown: the parse sandbox's child is tied to the thread that started it
(``PR_SET_PDEATHSIG``), so pool threads must not come and go.
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import thread as _thread
from typing import Any


class DaemonThreadPool(ThreadPoolExecutor):
    """``ThreadPoolExecutor`` with daemon threads; ``shutdown`` does not wait for running work."""

    def _adjust_thread_count(self) -> None:
        if self._idle_semaphore.acquire(timeout=0):  # type: ignore[attr-defined]
            return

        def wake(_: Any, q: Any = self._work_queue) -> None:  # type: ignore[attr-defined]
            q.put(None)

        count = len(self._threads)  # type: ignore[attr-defined]
        if count < self._max_workers:  # type: ignore[attr-defined]
            t = threading.Thread(
                name=f"{self._thread_name_prefix or 'pool'}_{count}",  # type: ignore[attr-defined]
                target=_thread._worker,  # type: ignore[attr-defined]
                args=(weakref.ref(self, wake), self._work_queue, self._initializer,  # type: ignore[attr-defined]
                      self._initargs),  # type: ignore[attr-defined]
                daemon=True,
            )
            t.start()
            self._threads.add(t)  # type: ignore[attr-defined]

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new work and let idle threads end; never waits (``wait`` is ignored)."""
        super().shutdown(wait=False, cancel_futures=cancel_futures)
