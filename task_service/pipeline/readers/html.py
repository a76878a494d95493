"""HTML reader: decoded (BOM, ``<meta charset>``, detection), then our walker (``html.py``)."""

from __future__ import annotations

from shared.domain.normalize import sanitize
from task_service.pipeline.decode import decode, sniff_html_charset
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.html import extract_html
from task_service.pipeline.limits import ParseLimits


def with_warnings(parsed: ParsedDocument, warnings: tuple[str, ...]) -> ParsedDocument:
    """``parsed`` with the decoder's ``warnings`` first."""
    return ParsedDocument(parsed.blocks, (*warnings, *parsed.warnings)) if warnings else parsed


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Raises ``UndecodableTextError``, ``ParseLimitError`` (nesting)."""
    decoded = decode(data, declared=sniff_html_charset(data))
    return with_warnings(extract_html(sanitize(decoded.text)), decoded.warnings)
