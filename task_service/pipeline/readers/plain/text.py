"""Plain-text reader: decoded, normalized, paragraphs rebuilt (``normalize.reflow_plain_text``).

Its blocks are already normalized (the reflow needs clean lines); ``parse.py`` does not
normalize them a second time (:data:`NORMALIZED`).
"""

from __future__ import annotations

from shared.domain.normalize import normalize_text, reflow_plain_text
from task_service.pipeline.decode import decode
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits

#: The blocks are normalized already (``parse.py`` skips its own pass).
NORMALIZED = True


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Raises ``UndecodableTextError``."""
    decoded = decode(data)
    text = reflow_plain_text(normalize_text(decoded.text))
    return ParsedDocument(tuple(Block(p) for p in text.split("\n\n")), decoded.warnings)
