"""The extractor the worker gets (:func:`parser_from_settings`): sandboxed, or
:class:`InProcessParser` when ``PARSE_SANDBOX=false`` (development and tests)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from shared.domain.errors import (
    ExtractionCancelled,
)
from task_service.pipeline.chunk import Chunker, ChunkSettings, load_minilm_tokenizer
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits
from task_service.pipeline.sandbox.limits import SandboxLimits
from task_service.pipeline.sandbox.parent import SandboxedParser

if TYPE_CHECKING:
    from shared.settings import WorkerSettings
    from task_service.pipeline.extract import Extraction, StageCallback



def parser_from_settings(settings: WorkerSettings) -> SandboxedParser | InProcessParser:
    """The extractor the worker hands to ``IndexHandler``: sandboxed unless ``PARSE_SANDBOX=false``."""
    limits = ParseLimits.from_settings(settings)
    chunking = ChunkSettings.from_settings(settings)
    if not settings.parse_sandbox:
        return InProcessParser(limits, Chunker.from_settings(load_minilm_tokenizer(), chunking))
    return SandboxedParser(SandboxLimits.from_settings(settings), limits, chunking)


class InProcessParser:
    """``extract`` with the structural limits, in this process (no resource limits; a cancelled
    request runs on to its end in its thread: development and tests only)."""

    def __init__(self, limits: ParseLimits = DEFAULT_LIMITS, chunker: Chunker | None = None) -> None:
        self.limits = limits
        self.chunker = chunker if chunker is not None else Chunker(load_minilm_tokenizer())

    def __call__(self, data: bytes, filename: str, cancel: threading.Event | None = None,
                 on_stage: StageCallback | None = None) -> Extraction:
        if cancel is not None and cancel.is_set():
            raise ExtractionCancelled("cancelled before it started")
        from task_service.pipeline.extract import extract

        return extract(data, filename, self.limits, self.chunker, on_stage)

    def cancel(self, token: threading.Event) -> None:
        token.set()

    def close(self) -> None:
        pass
