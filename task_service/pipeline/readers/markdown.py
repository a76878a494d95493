"""Markdown reader: decoded, then pyromark → our HTML walker (``markdown.py``)."""

from __future__ import annotations

from shared.domain.normalize import sanitize
from task_service.pipeline.decode import decode
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.markdown import extract_markdown
from task_service.pipeline.readers.html import with_warnings


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Raises ``UndecodableTextError``, ``ParseLimitError`` (nesting)."""
    decoded = decode(data)
    return with_warnings(extract_markdown(sanitize(decoded.text)), decoded.warnings)
