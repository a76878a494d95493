"""PDF text layer via pypdfium2 (no OCR, no layout model).

"PDFium is inherently not thread-safe" (pypdfium2 5.15 README, "Incompatibility with
Threading"), so every use in this process is serialized by ``_PDFIUM_LOCK``;
run ``extract_pdf`` off the event loop (``asyncio.to_thread``), one PDF at a time.

Limits (``ParseLimitError``): the page count is checked right after opening, before any page is
loaded; the extracted text is counted page by page with ``count_chars`` *before* the page's
text is copied out, so a page with an absurd text layer is refused before it is materialized.
Memory used by PDFium itself (e.g. a small Flate stream inflating to gigabytes) is bounded by
the sandbox's address-space limit, not here (PDFium aborts the process when an allocation
fails, see ``sandbox.py``).
"""

from __future__ import annotations

import threading

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from shared.domain.errors import CorruptDocumentError, ParseLimitError, PdfEncryptedError
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.hyphens import load_word_list, resolve_line_hyphens
from task_service.pipeline.limits import DEFAULT_LIMITS

_PDFIUM_LOCK = threading.Lock()
_ENCRYPTED_CODES = {pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY}


def extract_pdf(
    data: bytes,
    *,
    max_pages: int = DEFAULT_LIMITS.pdf_max_pages,
    max_text_chars: int = DEFAULT_LIMITS.pdf_max_text_chars,
) -> ParsedDocument:
    """Return the text layer of a PDF, one block per page (``page`` 1-based; not yet normalized).

    A scanned PDF without a text layer gives whitespace-only blocks, and a warning names how many
    pages had no text layer. Raises ``PdfEncryptedError``
    when the PDF needs a password (or uses an unsupported security handler) and
    ``CorruptDocumentError`` when PDFium cannot read it (truncated, not a PDF, broken page),
    ``ParseLimitError`` when it has more than ``max_pages`` pages or more than
    ``max_text_chars`` characters of text.
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
            pages = len(pdf)
            if pages > max_pages:
                raise ParseLimitError(f"PDF has {pages:,} pages; the limit is {max_pages:,} (PDF_MAX_PAGES)")
            blocks: list[Block] = []
            used = 0
            for index in range(pages):
                text = _page_text(pdf, index, used, max_text_chars)
                used += len(text)
                blocks.append(Block(text, page=index + 1))
        except pdfium.PdfiumError as exc:
            raise CorruptDocumentError(f"PDF page cannot be read: {exc}") from exc
        finally:
            pdf.close()
    words = load_word_list()
    texts = resolve_line_hyphens((block.text for block in blocks), words.__contains__)
    blocks = [Block(text, page=block.page) for text, block in zip(texts, blocks, strict=True)]
    return ParsedDocument(tuple(blocks), _warnings(blocks))


def _page_text(pdf: pdfium.PdfDocument, index: int, used: int, limit: int) -> str:
    """The text of page ``index``. ``ParseLimitError`` when it would take the document's text
    (``used`` characters so far) past ``limit``: checked with PDFium's character count first,
    before the text is copied out, and again on the copied text."""
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        try:
            if used + textpage.count_chars() > limit:
                raise _text_limit(limit, index)
            # get_text_bounded covers full Unicode; get_text_range is limited to UCS-2
            # (pypdfium2 5.x docstring of PdfTextPage.get_text_range).
            text = str(textpage.get_text_bounded())
        finally:
            textpage.close()
    finally:
        page.close()
    if used + len(text) > limit:
        raise _text_limit(limit, index)
    return text


def _warnings(blocks: list[Block]) -> tuple[str, ...]:
    empty = sum(1 for block in blocks if not block.text.strip())
    if not empty:
        return ()
    return (f"{empty} of {len(blocks)} pages had no text layer (scanned images are not OCRed)",)


def _text_limit(limit: int, index: int) -> ParseLimitError:
    return ParseLimitError(
        f"PDF text exceeds the limit of {limit:,} characters at page {index + 1} (PDF_MAX_TEXT_CHARS)"
    )
