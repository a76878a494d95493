"""PDF text layer via pypdfium2, in reading order, with form fields and annotations, and OCR for
scanned pages (no layout model).

Reading order (``layout.py``, ``columns.py``): the page's characters (code point, glyph box, loose box, angle:
``FPDFText_GetUnicode``/``GetCharBox``/``GetLooseCharBox``/``GetCharAngle``, in the page's own,
unrotated space) are laid out by text direction and a recursive XY-cut, so rotated pages and
text read in the author's line order and columns read column by column whatever order they were
drawn in. Filled form fields and FreeText/sticky-note text (``pdf_annotations``) follow the
page's text as one block ("Customer name: Jane Doe"). Cost: four ctypes calls per character,
measured 2.5-15× slower than ``get_text_bounded`` (``bench/RESULTS.md``, section pdf_layout).

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

import ctypes
import math
import threading
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from shared.domain.errors import CorruptDocumentError, ParseLimitError, PdfEncryptedError
from task_service.pipeline import ocr
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits, check_ocr_pixels
from task_service.pipeline.readers.pdf import annotations as pdf_annotations
from task_service.pipeline.readers.pdf import layout as pdf_layout
from task_service.pipeline.readers.pdf.hyphens import load_word_list, resolve_line_hyphens

_PDFIUM_LOCK = threading.Lock()
_NO_BOX = (0.0, 0.0, 0.0, 0.0)
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
    """Return the text layer of a PDF in reading order, one block per page (``page`` 1-based; not
    yet normalized), the OCR paragraphs of its scanned pages (``limits``' OCR settings; ``None``:
    no OCR), and after each page's text a block of its filled form fields and annotation text.

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
            form_warnings = pdf_annotations.open_forms(pdf)
            texts: list[str] = []
            notes: list[list[str]] = []
            scanned: list[int] = []
            seen: set[str] = set()
            used = 0
            for index in range(pages):
                text, needs, page_notes = _page_text(pdf, index, (used, max_text_chars), seen)
                used += len(text) + sum(len(note) for note in page_notes)
                texts.append(text)
                notes.append(page_notes)
                if needs and limits is not None:
                    scanned.append(index)
            read = _ocr_pages(pdf, scanned, limits) if limits is not None and scanned else {}
        except pdfium.PdfiumError as exc:
            raise CorruptDocumentError(f"PDF page cannot be read: {exc}") from exc
        finally:
            pdf.close()
    words = load_word_list()
    texts = resolve_line_hyphens(texts, words.__contains__)
    blocks = _assemble(texts, read, notes)
    tally = ocr.OcrTally()
    for result in read.values():
        tally.add(result)
    unread = sum(1 for index, text in enumerate(texts) if not text.strip() and index not in read and not notes[index])
    return ParsedDocument(tuple(blocks), form_warnings + _warnings(unread, pages) + tally.warnings())


def _assemble(texts: list[str], read: dict[int, ocr.OcrResult], notes: list[list[str]]) -> list[Block]:
    """One block per page's text layer, after it the page's OCR paragraphs (the stray text layer
    is dropped when OCR read the same words), then its form fields and annotations (one block)."""
    blocks: list[Block] = []
    for index, text in enumerate(texts):
        result = read.get(index)
        if result is None:
            blocks.append(Block(text, page=index + 1))
        else:
            stray = ocr.join_stray_text(text, "\n".join(result.paragraphs))
            if stray is not None:
                blocks.append(Block(stray, page=index + 1))
            blocks.extend(Block(paragraph, page=index + 1) for paragraph in result.paragraphs)
        if notes[index]:
            blocks.append(Block("\n".join(notes[index]), page=index + 1))
    return blocks


def _ocr_pages(pdf: pdfium.PdfDocument, indexes: list[int], limits: ParseLimits) -> dict[int, ocr.OcrResult]:
    """OCR the pages ``indexes`` (0-based), reporting progress; ``ParseLimitError`` up front when they
    are more than ``OCR_MAX_PAGES`` or would render to more than ``OCR_MAX_PIXELS``."""
    budget = ocr.PageBudget(limits.ocr_max_pages, "PDF")
    if len(indexes) > limits.ocr_max_pages:
        raise ParseLimitError(
            f"PDF has {len(indexes):,} scanned pages; the limit for OCR is {limits.ocr_max_pages:,} (OCR_MAX_PAGES)"
        )
    pixels = sum(_render_pixels(pdf.get_page_size(index), limits)[1] for index in indexes)
    check_ocr_pixels(pixels, len(indexes), "PDF", limits)  # before any page is rendered
    ocr.ensure_ocr_ready(limits)
    results: dict[int, ocr.OcrResult] = {}
    ocr.report_progress(0, len(indexes))
    for done, index in enumerate(indexes, 1):
        budget.take()
        image, dpi = _render(pdf, index, limits)
        results[index] = ocr.recognize(image, limits, dpi)
        ocr.report_progress(done, len(indexes))
    return results


def _render(pdf: pdfium.PdfDocument, index: int, limits: ParseLimits) -> tuple[Any, int]:
    """Page ``index`` as a greyscale PIL image at ``OCR_DPI``, scaled down to fit ``IMAGE_MAX_PIXELS``,
    and its resolution (dots per inch, told to Tesseract)."""
    page = pdf[index]
    try:
        scale, _ = _render_pixels(page.get_size(), limits)
        bitmap = page.render(scale=scale, grayscale=True, may_draw_forms=False)
        try:
            return bitmap.to_pil().copy(), max(round(scale * 72), 1)
        finally:
            bitmap.close()
    finally:
        page.close()


def _render_pixels(size: tuple[float, float], limits: ParseLimits) -> tuple[float, float]:
    """The scale a page of ``size`` (width, height in points) is rendered at for OCR (``OCR_DPI``,
    scaled down to fit ``IMAGE_MAX_PIXELS``) and the pixels that gives."""
    width, height = size
    scale = limits.ocr_dpi / 72
    pixels = width * scale * height * scale
    if pixels > limits.image_max_pixels:
        scale *= math.sqrt(limits.image_max_pixels / pixels)
        pixels = float(limits.image_max_pixels)
    return scale, pixels


def _page_text(
    pdf: pdfium.PdfDocument, index: int, budget: tuple[int, int], seen: set[str]
) -> tuple[str, bool, list[str]]:
    """The text of page ``index`` in reading order (``layout.py``), whether it needs OCR
    (``ocr.needs_ocr``) and its form field and annotation lines (``pdf_annotations``; ``seen``
    holds those of earlier pages). ``budget`` is (characters used so far, limit):
    ``ParseLimitError`` when the page would pass it, checked with PDFium's character count first,
    before the characters are copied out, and again on the ordered text and annotations."""
    used, limit = budget
    page = pdf[index]
    try:
        textpage = page.get_textpage()
        try:
            count = textpage.count_chars()
            if used + count > limit:
                raise _text_limit(limit, index)
            chars = _chars(textpage, count, page.get_bbox())
            notes = pdf_annotations.page_annotations(pdf, page, textpage, seen)
        finally:
            textpage.close()
        text = pdf_layout.page_text(chars)
        needs = _needs_ocr(page, chars, text)
    finally:
        page.close()
    if used + len(text) + sum(len(note) for note in notes) > limit:
        raise _text_limit(limit, index)
    return text, needs, notes


def _chars(textpage: pdfium.PdfTextPage, count: int, bounds: pdf_layout.Box) -> list[pdf_layout.Char]:
    """PDFium's characters of a page: code point (a UTF-16 surrogate pair made one), glyph box in
    page space, baseline direction (``FPDFText_GetCharAngle`` is clockwise, in radians). Glyphs
    centred outside ``bounds`` (the crop box: printer's marks) are left out, as
    ``get_text_bounded`` did."""
    raw = textpage.raw
    unicode, char_box = pdfium_c.FPDFText_GetUnicode, pdfium_c.FPDFText_GetCharBox
    char_angle, loose_box = pdfium_c.FPDFText_GetCharAngle, pdfium_c.FPDFText_GetLooseCharBox
    left, right, bottom, top = (ctypes.c_double() for _ in range(4))
    refs = tuple(ctypes.byref(v) for v in (left, right, bottom, top))
    loose = pdfium_c.FS_RECTF()
    loose_ref = ctypes.byref(loose)
    chars: list[pdf_layout.Char] = []
    pending = 0
    for i in range(count):
        code = unicode(raw, i)
        if 0xD800 <= code < 0xDC00:
            pending = code
            continue
        if 0xDC00 <= code < 0xE000 and pending:
            code, pending = 0x10000 + ((pending - 0xD800) << 10) + (code - 0xDC00), 0
        text = chr(code)
        if not code or text in "\r\n":
            continue  # PDFium's line breaks: the layout finds lines from the boxes
        if text.isspace():
            chars.append(pdf_layout.Char(" ", _NO_BOX))  # only separates words
            continue
        char_box(raw, i, *refs)
        box = (left.value, bottom.value, right.value, top.value)
        if not _inside(bounds, box):
            continue
        angle = char_angle(raw, i)
        degrees = 0.0 if angle < 0 else (360.0 - math.degrees(angle)) % 360.0
        wide = (loose.left, loose.bottom, loose.right, loose.top) if loose_box(raw, i, loose_ref) else None
        chars.append(pdf_layout.Char(text, box, degrees, wide))
    return chars


def _inside(bounds: pdf_layout.Box, box: pdf_layout.Box) -> bool:
    """Whether the centre of ``box`` lies within ``bounds``."""
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return bounds[0] <= x <= bounds[2] and bounds[1] <= y <= bounds[3]


def _needs_ocr(page: pdfium.PdfPage, chars: list[pdf_layout.Char], text: str) -> bool:
    """``ocr.needs_ocr`` from the page's measured text and image areas (measured only when the
    text is short enough to be a stray line)."""
    visible = sum(1 for c in text if not c.isspace())
    if visible > ocr.MAX_STRAY_CHARS:
        return False
    width, height = page.get_size()
    area = max(width * height, 1.0)
    text_area = 0.0
    for char in chars:
        left, bottom, right, top = char.box
        text_area += max(right - left, 0.0) * max(top - bottom, 0.0)
    image_area = 0.0
    for obj in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=3):
        left, bottom, right, top = obj.get_bounds()
        image_area += _clipped(left, right, width) * _clipped(bottom, top, height)
    return ocr.needs_ocr(visible, min(text_area / area, 1.0), min(image_area / area, 1.0))


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
