"""Parse + chunk one document off the event loop, cancellable (the sandbox child is killed)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from task_service.pipeline.extract import Extraction, StageCallback


class Extractor(Protocol):
    """Parse + chunk one document (``sandbox.SandboxedParser`` or ``InProcessParser``)."""

    def __call__(self, data: bytes, filename: str, cancel: threading.Event | None = None,
                 on_stage: StageCallback | None = None) -> Extraction:
        """Blocking; raises ``IndexingError`` subclasses for the document's faults. ``on_stage``
        is called from the calling thread when extraction enters a stage (``"CHUNKING"``)."""
        ...

    def cancel(self, token: threading.Event) -> None:
        """Abandon the call made with ``token`` (kill the process doing it); returns at once."""
        ...


async def extract(parse: Extractor, data: bytes, filename: str,
                  report: Callable[[str, float], Coroutine[Any, Any, None]]) -> Extraction:
    """Run ``parse`` in a thread (the sandbox call blocks on its child); if the calling task is
    cancelled meanwhile, the extraction is cancelled too (its child killed). A stage the
    extractor reports (``"CHUNKING"``, progress) is passed to ``report`` on the event loop, and
    awaited before this returns (a fenced-out report raises here)."""
    loop = asyncio.get_running_loop()
    reports: list[concurrent.futures.Future[None]] = []

    def on_stage(stage: str, progress: float = 0.0) -> None:  # in the extractor's thread
        reports.append(asyncio.run_coroutine_threadsafe(report(stage, progress), loop))

    token = threading.Event()
    try:
        extraction = await asyncio.to_thread(parse, data, filename, token, on_stage)
    except asyncio.CancelledError:
        parse.cancel(token)
        for f in reports:
            f.cancel()
        raise
    for f in reports:
        await asyncio.wrap_future(f)
    return extraction
