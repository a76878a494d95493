"""Document bytes → chunks with provenance and the parser's warnings: parse, then chunk (pure CPU).

This is the unit of work the parse sandbox runs in its child process (``sandbox.py``), so the
child's CPU, memory and wall-clock limits cover parsing AND chunking, and a limit hit kills the
child: no thread of the worker outlives its task.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.errors import NoTextError
from task_service.pipeline.chunk import Chunk, Chunker
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.parse import parse_document


@dataclass(frozen=True)
class Extraction:
    """Chunks (indexes 0..n-1, n >= 1) and warnings (sentences for the document API)."""

    chunks: tuple[Chunk, ...]
    warnings: tuple[str, ...] = field(default=())


def extract(data: bytes, filename: str, parse_limits: ParseLimits, chunker: Chunker) -> Extraction:
    """``parse_document`` then ``chunker.chunk``.

    Raises what ``parse_document`` raises (``ParseLimitError``, ``CorruptDocumentError``,
    ``NoTextError``...), and ``NoTextError`` when the text has no model token at all.
    """
    parsed = parse_document(data, filename, parse_limits)
    chunks = chunker.chunk(parsed)
    if not chunks:
        raise NoTextError()
    return Extraction(tuple(chunks), parsed.warnings)

