"""DOCX reader: our OOXML walker (``task_service/pipeline/docx.py``; large pasted scans OCRed with
``limits``). The dispatch has checked the ZIP limits before (``parse.py``: every ZIP-based format)."""

from __future__ import annotations

from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.docx import extract_docx
from task_service.pipeline.limits import ParseLimits


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Raises ``CorruptDocumentError``, ``UnsupportedTypeError`` (Strict Open XML), ``ParseLimitError``."""
    return extract_docx(data, limits)
