"""PDF text layer via pypdfium2 (no OCR, no layout model).

"PDFium is inherently not thread-safe" (pypdfium2 5.15 README, "Incompatibility with
Threading"), so every use in this process is serialized by ``_PDFIUM_LOCK``;
run ``extract_pdf_text`` off the event loop (``asyncio.to_thread``), one PDF at a time.
"""

from __future__ import annotations

import threading

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from shared.errors import CorruptDocumentError, PdfEncryptedError

_PDFIUM_LOCK = threading.Lock()
_ENCRYPTED_CODES = {pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY}


def extract_pdf_text(data: bytes) -> str:
    """Return the text layer of a PDF, pages separated by a blank line (not yet normalized).

    A scanned PDF without a text layer gives whitespace only. Raises ``PdfEncryptedError``
    when the PDF needs a password (or uses an unsupported security handler) and
    ``CorruptDocumentError`` when PDFium cannot read it (truncated, not a PDF, broken page).
    """
    with _PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            if getattr(exc, "err_code", None) in _ENCRYPTED_CODES:
                raise PdfEncryptedError(
                    "PDF is encrypted and needs a password to open; upload it without password protection"
                ) from exc
            raise CorruptDocumentError(f"PDF cannot be read: {exc}") from exc
        try:
            return "\n\n".join(_page_text(pdf, index) for index in range(len(pdf)))
        except pdfium.PdfiumError as exc:
            raise CorruptDocumentError(f"PDF page cannot be read: {exc}") from exc
        finally:
            pdf.close()


def _page_text(pdf: pdfium.PdfDocument, index: int) -> str:
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        try:
            # get_text_bounded covers full Unicode; get_text_range is limited to UCS-2
            # (pypdfium2 5.x docstring of PdfTextPage.get_text_range).
            return str(textpage.get_text_bounded())
        finally:
            textpage.close()
    finally:
        page.close()
