"""Log files (``.log``) → blocks of lines as they are, split at blank lines, no sections (pure).

Unlike plain text (``text.py``), lines are not re-flowed into paragraphs: a log line is a record,
and its timestamp stays at its start (the chunker cuts at line ends).
"""

from __future__ import annotations

from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.markup._outline import decoded_lines
from task_service.pipeline.readers.markup.config import line_blocks

__all__ = ["read"]


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Raises ``UndecodableTextError``."""
    del limits
    lines, warnings = decoded_lines(data)
    return ParsedDocument(tuple(line_blocks(lines, sections=False)), warnings)
