"""A thread pool whose threads never hold up process exit (the worker's default executor).

``asyncio.run`` ends with ``loop.shutdown_default_executor()``, which joins the default
``ThreadPoolExecutor``'s threads — with no timeout on Python 3.11 — and ``concurrent.futures``
joins every pool thread again at interpreter exit. A blocking call still running in a thread
(a forward pass of the embedding model, a wait on the parse sandbox) therefore kept a SIGTERMed
worker alive until it returned: measured, a worker whose chunking thread ran on never exited.
Here the threads are daemons and ``shutdown`` does not wait for them: work still running when
the process exits is abandoned (the worker's deliveries are unacked, so the broker requeues them).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

T = TypeVar("T")
_Item = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonThreadPool(Executor):
    """``Executor`` with up to ``max_workers`` daemon threads, started on demand."""

    def __init__(self, max_workers: int = 8, name: str = "worker-thread") -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self._max = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = threading.Semaphore(0)  # as in CPython's ThreadPoolExecutor
        self._lock = threading.Lock()
        self._shutdown = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queue.put((future, fn, args, kwargs))
            if not self._idle.acquire(timeout=0) and len(self._threads) < self._max:
                thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new work and let idle threads end; never waits for running work (``wait`` is
        accepted for the ``Executor`` interface and ignored)."""
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                with contextlib.suppress(queue.Empty):
                    while True:
                        item = self._queue.get_nowait()
                        if item is not None:
                            item[0].cancel()
            for _ in self._threads:
                self._queue.put(None)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del item, future, fn, args, kwargs  # no reference to a finished call's objects while idle
            self._idle.release()
