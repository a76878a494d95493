"""PDF text layer via pypdfium2, and OCR for scanned pages (no layout model).

OCR (``ocr.py``): a page whose text layer is empty, or a stray line over a scan (``ocr.needs_ocr``:
at most 200 non-space characters covering < 2 % of the page, over images covering ≥ 30 % of it), is
rendered at ``OCR_DPI`` (fewer pixels if that would pass ``IMAGE_MAX_PIXELS``) and OCRed; its
paragraphs follow the page's stray text (dropped when OCR read it too). The pages to OCR are found
first, so more than ``OCR_MAX_PAGES`` fails before any is OCRed, and progress is pages done / pages
to OCR. Warnings say how many pages OCR read (mean confidence) and how many it could not.

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

import math
import threading
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from shared.domain.errors import CorruptDocumentError, ParseLimitError, PdfEncryptedError
from task_service.pipeline import ocr
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.hyphens import load_word_list, resolve_line_hyphens
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits

_PDFIUM_LOCK = threading.Lock()
_ENCRYPTED_CODES = {pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY}


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """The reader interface: ``extract_pdf`` with ``limits`` (pages, text, OCR)."""
    return extract_pdf(data, max_pages=limits.pdf_max_pages, max_text_chars=limits.pdf_max_text_chars, limits=limits)


def extract_pdf(
    data: bytes,
    *,
    max_pages: int = DEFAULT_LIMITS.pdf_max_pages,
    max_text_chars: int = DEFAULT_LIMITS.pdf_max_text_chars,
    limits: ParseLimits | None = DEFAULT_LIMITS,
) -> ParsedDocument:
    """Return the text layer of a PDF, one block per page (``page`` 1-based; not yet normalized),
    and the OCR paragraphs of its scanned pages (``limits``' OCR settings; ``None``: no OCR).

    A page without text that is not OCRed gives a whitespace-only block, and a warning names how
    many pages had no text. Raises ``PdfEncryptedError``
    when the PDF needs a password (or uses an unsupported security handler) and
    ``CorruptDocumentError`` when PDFium cannot read it (truncated, not a PDF, broken page),
    ``ParseLimitError`` when it has more than ``max_pages`` pages or more than
    ``max_text_chars`` characters of text, or more than ``OCR_MAX_PAGES`` pages need OCR;
    ``DependencyMissingError`` when OCR is needed and Tesseract or its language data is missing.
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
            texts: list[str] = []
            scanned: list[int] = []
            used = 0
            for index in range(pages):
                text, needs = _page_text(pdf, index, used, max_text_chars)
                used += len(text)
                texts.append(text)
                if needs and limits is not None:
                    scanned.append(index)
            read = _ocr_pages(pdf, scanned, limits) if limits is not None and scanned else {}
        except pdfium.PdfiumError as exc:
            raise CorruptDocumentError(f"PDF page cannot be read: {exc}") from exc
        finally:
            pdf.close()
    words = load_word_list()
    texts = resolve_line_hyphens(texts, words.__contains__)
    blocks = _assemble(texts, read)
    tally = ocr.OcrTally()
    for result in read.values():
        tally.add(result)
    unread = sum(1 for index, text in enumerate(texts) if not text.strip() and index not in read)
    return ParsedDocument(tuple(blocks), _warnings(unread, pages) + tally.warnings())


def _assemble(texts: list[str], read: dict[int, ocr.OcrResult]) -> list[Block]:
    """One block per page's text layer, and after it the page's OCR paragraphs (the stray text layer
    is dropped when OCR read the same words)."""
    blocks: list[Block] = []
    for index, text in enumerate(texts):
        result = read.get(index)
        if result is None:
            blocks.append(Block(text, page=index + 1))
            continue
        stray = ocr.join_stray_text(text, "\n".join(result.paragraphs))
        if stray is not None:
            blocks.append(Block(stray, page=index + 1))
        blocks.extend(Block(paragraph, page=index + 1) for paragraph in result.paragraphs)
    return blocks


def _ocr_pages(pdf: pdfium.PdfDocument, indexes: list[int], limits: ParseLimits) -> dict[int, ocr.OcrResult]:
    """OCR the pages ``indexes`` (0-based), reporting progress; ``ParseLimitError`` up front when they
    are more than ``OCR_MAX_PAGES``."""
    budget = ocr.PageBudget(limits.ocr_max_pages, "PDF")
    if len(indexes) > limits.ocr_max_pages:
        raise ParseLimitError(
            f"PDF has {len(indexes):,} scanned pages; the limit for OCR is {limits.ocr_max_pages:,} (OCR_MAX_PAGES)"
        )
    ocr.ensure_ocr_ready(limits)
    results: dict[int, ocr.OcrResult] = {}
    ocr.report_progress(0, len(indexes))
    for done, index in enumerate(indexes, 1):
        budget.take()
        results[index] = ocr.recognize(_render(pdf, index, limits), limits)
        ocr.report_progress(done, len(indexes))
    return results


def _render(pdf: pdfium.PdfDocument, index: int, limits: ParseLimits) -> Any:
    """Page ``index`` as a greyscale PIL image at ``OCR_DPI``, scaled down to fit ``IMAGE_MAX_PIXELS``."""
    page = pdf[index]
    try:
        width, height = page.get_size()  # points
        scale = limits.ocr_dpi / 72
        pixels = width * scale * height * scale
        if pixels > limits.image_max_pixels:
            scale *= math.sqrt(limits.image_max_pixels / pixels)
        bitmap = page.render(scale=scale, grayscale=True, may_draw_forms=False)
        try:
            return bitmap.to_pil().copy()
        finally:
            bitmap.close()
    finally:
        page.close()


def _page_text(pdf: pdfium.PdfDocument, index: int, used: int, limit: int) -> tuple[str, bool]:
    """The text of page ``index`` and whether it needs OCR (``ocr.needs_ocr``). ``ParseLimitError`` when
    it would take the document's text (``used`` characters so far) past ``limit``: checked with
    PDFium's character count first, before the text is copied out, and again on the copied text."""
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        try:
            count = textpage.count_chars()
            if used + count > limit:
                raise _text_limit(limit, index)
            # get_text_bounded covers full Unicode; get_text_range is limited to UCS-2
            # (pypdfium2 5.x docstring of PdfTextPage.get_text_range).
            text = str(textpage.get_text_bounded())
            needs = _needs_ocr(page, textpage, text, count)
        finally:
            textpage.close()
    finally:
        page.close()
    if used + len(text) > limit:
        raise _text_limit(limit, index)
    return text, needs


def _needs_ocr(page: pdfium.PdfPage, textpage: pdfium.PdfTextPage, text: str, count: int) -> bool:
    """``ocr.needs_ocr`` from the page's measured text and image areas (measured only when the
    text is short enough to be a stray line)."""
    chars = sum(1 for c in text if not c.isspace())
    if chars > ocr.MAX_STRAY_CHARS:
        return False
    width, height = page.get_size()
    area = max(width * height, 1.0)
    text_area = 0.0
    for i in range(count):
        left, bottom, right, top = textpage.get_charbox(i)
        text_area += max(right - left, 0.0) * max(top - bottom, 0.0)
    image_area = 0.0
    for obj in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=3):
        left, bottom, right, top = obj.get_bounds()
        image_area += _clipped(left, right, width) * _clipped(bottom, top, height)
    return ocr.needs_ocr(chars, min(text_area / area, 1.0), min(image_area / area, 1.0))


def _clipped(low: float, high: float, size: float) -> float:
    return max(min(high, size) - max(low, 0.0), 0.0)


def _warnings(unread: int, pages: int) -> tuple[str, ...]:
    if not unread:
        return ()
    return (f"{unread} of {pages} pages had no text layer and no image to OCR",)


def _text_limit(limit: int, index: int) -> ParseLimitError:
    return ParseLimitError(
        f"PDF text exceeds the limit of {limit:,} characters at page {index + 1} (PDF_MAX_TEXT_CHARS)"
    )
