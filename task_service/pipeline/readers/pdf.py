"""PDF reader: the pypdfium2 text layer (``task_service/pipeline/pdf.py``), a block per page."""

from __future__ import annotations

from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.pdf import extract_pdf


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Raises ``PdfEncryptedError``, ``CorruptDocumentError``, ``ParseLimitError`` (pages, text)."""
    return extract_pdf(data, max_pages=limits.pdf_max_pages, max_text_chars=limits.pdf_max_text_chars)
