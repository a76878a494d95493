"""The extractor the worker gets (:func:`build_parser` of a :class:`ParserConfig`): sandboxed, or
:class:`InProcessParser` when ``PARSE_SANDBOX=false`` (development and tests)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
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



@dataclass(frozen=True)
class ParserConfig:
    """The worker's extractor: sandboxed or not (``PARSE_SANDBOX``), the child's limits, the
    structural parse limits and the chunking."""

    sandbox: bool
    sandbox_limits: SandboxLimits
    limits: ParseLimits
    chunking: ChunkSettings

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> ParserConfig:
        return cls(sandbox=s.parse_sandbox, sandbox_limits=SandboxLimits.from_settings(s),
                   limits=ParseLimits.from_settings(s), chunking=ChunkSettings.from_settings(s))


def build_parser(config: ParserConfig) -> SandboxedParser | InProcessParser:
    """The extractor the worker hands to ``IndexHandler``: sandboxed unless ``config.sandbox`` is off."""
    if not config.sandbox:
        return InProcessParser(config.limits, Chunker.from_settings(load_minilm_tokenizer(), config.chunking))
    return SandboxedParser(config.sandbox_limits, config.limits, config.chunking)


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
