"""Shared by the EPUB/ODT/RTF/JSON/XML candidate modules: our readers as ``bytes -> text``."""

from __future__ import annotations

from collections.abc import Callable

from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits


def ours(read: Callable[[bytes, ParseLimits], ParsedDocument]) -> Callable[[bytes], str]:
    """Our reader's blocks joined by blank lines (before ``parse.py``'s normalization)."""

    def run(data: bytes) -> str:
        return read(data, DEFAULT_LIMITS).text

    return run
