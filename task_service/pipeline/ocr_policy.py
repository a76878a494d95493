"""The pure OCR policy (no engine, no I/O): which PDF page needs OCR, the pixel check made before
an image is decoded, the per-document page budget, the confidence tally and its warnings, and the
tidying of OCR text. :mod:`task_service.pipeline.ocr` (the engine adapter) re-exports every name."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shared.domain.errors import ParseLimitError

if TYPE_CHECKING:
    from task_service.pipeline.limits import ParseLimits

#: A PDF page needs OCR when its text layer covers less than this share of the page's area ...
MAX_TEXT_AREA_SHARE = 0.02
#: ... and has at most this many non-space characters (a stray header or page number over a scan) ...
MAX_STRAY_CHARS = 200
#: ... and images cover at least this share of the page (a scan under a stray header). A page with no
#: text layer at all is OCRed when it holds any picture, whatever its share of the page (issue 29: a
#: picture of text covering 8 % of an otherwise empty page is all that page says).
MIN_IMAGE_AREA_SHARE = 0.3
#: An image embedded in a DOCX/PPTX is OCRed when at least this big (width, height; either
#: orientation): a scanned page or a screenshot of text, not an icon or a logo.
MIN_EMBEDDED_SIZE = (400, 200)

@dataclass(frozen=True)
class OcrResult:
    """What OCR read on one image: paragraphs in reading order, and Tesseract's mean word
    confidence in percent (0-100; 0 when it read nothing)."""

    paragraphs: tuple[str, ...]
    confidence: float

    @property
    def readable(self) -> bool:
        return any(p.strip() for p in self.paragraphs)


def needs_ocr(text_chars: int, text_area_share: float, image_area_share: float) -> bool:
    """True when a PDF page's text layer is absent or a stray line over a scan.

    ``text_chars``: non-whitespace characters of the text layer; ``text_area_share``: their boxes'
    area / the page's area; ``image_area_share``: the images' area / the page's area (each 0..1,
    clipped). A page without images is never OCRed (nothing to read); a page without text and with
    any picture is; a page with a real text layer and an image (a report with a photo) is not, nor a
    stray line beside a picture smaller than ``MIN_IMAGE_AREA_SHARE`` (a logo in a letterhead).
    """
    if image_area_share <= 0.0:
        return False
    if text_chars == 0:
        return True
    return (image_area_share >= MIN_IMAGE_AREA_SHARE and text_chars <= MAX_STRAY_CHARS
            and text_area_share < MAX_TEXT_AREA_SHARE)


def check_pixels(width: int, height: int, limits: ParseLimits, what: str = "image") -> None:
    """``ParseLimitError`` when a ``width`` × ``height`` image exceeds ``limits.image_max_pixels``
    (checked from the header, before any pixel is decoded: a decompression bomb stops here)."""
    if width <= 0 or height <= 0:
        return
    if width * height > limits.image_max_pixels:
        raise ParseLimitError(
            f"{what} is {width:,} × {height:,} px ({width * height / 1e6:,.0f} Mpx); the limit is "
            f"{limits.image_max_pixels / 1e6:,.0f} Mpx (IMAGE_MAX_PIXELS)"
        )


@dataclass
class PageBudget:
    """The per-document OCR page budget (``OCR_MAX_PAGES``): :meth:`take` one page or raise
    ``ParseLimitError``. ``total`` is how many pages are to be OCRed (for progress; may be unknown)."""

    limit: int
    what: str = "document"
    used: int = 0

    def take(self) -> None:
        if self.used >= self.limit:
            raise ParseLimitError(
                f"{self.what} needs OCR on more than {self.limit:,} pages; the limit is {self.limit:,} (OCR_MAX_PAGES)"
            )
        self.used += 1


@dataclass
class OcrTally:
    """Pages OCRed in one document and their confidences, for :meth:`warnings`."""

    confidences: list[float] = field(default_factory=list)
    unreadable: int = 0

    def add(self, result: OcrResult) -> None:
        if result.readable:
            self.confidences.append(result.confidence)
        else:
            self.unreadable += 1

    def warnings(self, unit: str = "page") -> tuple[str, ...]:
        """E.g. ("2 pages read by OCR (mean confidence 91 %)", "1 page gave no text to OCR")."""
        out = []
        read = len(self.confidences)
        if read:
            mean = sum(self.confidences) / read
            out.append(f"{plural(read, unit)} read by OCR (mean confidence {mean:.0f} %)")
        if self.unreadable:
            out.append(f"{plural(self.unreadable, unit)} gave no text to OCR")
        return tuple(out)


#: Han, kana, Hangul and full-width punctuation: Tesseract puts a space between two of them, which no
#: CJK text has (and which splits every word for search).
_CJK = "\u2e80-\u2fff\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_CJK_GAP = re.compile(f"(?<=[{_CJK}])[ \t]+(?=[{_CJK}])")


def tidy(text: str) -> str:
    """OCR text stripped, without the spaces Tesseract puts between CJK characters."""
    return _CJK_GAP.sub("", text).strip()


def plural(n: int, unit: str) -> str:
    """``"1 page"``, ``"2 pages"`` (thousands separated)."""
    return f"{n:,} {unit}" if n == 1 else f"{n:,} {unit}s"


def big_enough(width: int, height: int) -> bool:
    """True when an embedded image is big enough to hold text worth OCR (see ``MIN_EMBEDDED_SIZE``)."""
    long_side, short_side = max(width, height), min(width, height)
    return long_side >= MIN_EMBEDDED_SIZE[0] and short_side >= MIN_EMBEDDED_SIZE[1]


def join_stray_text(stray: str, ocr_text: str) -> str | None:
    """The text layer's stray text to keep beside a page's OCR text: ``None`` when OCR read it too."""
    words = " ".join(stray.split())
    if not words or words.casefold() in " ".join(ocr_text.split()).casefold():
        return None
    return words


#: The long side of an A4 or Letter page, inches (11.69 and 11): an image of unknown resolution is
#: taken for a page photo or scan of that size.
PAGE_LONG_SIDE_IN = 11.5
#: Bounds of a resolution told to Tesseract, dots per inch.
DPI_RANGE = (70, 600)


def estimated_dpi(width: int, height: int) -> int:
    """The resolution of a ``width`` × ``height`` px image taken for a whole page (``PAGE_LONG_SIDE_IN``),
    within ``DPI_RANGE``: 104 for an 868 × 1199 phone photo, 203 for a 1654 × 2339 A4 scan.

    Told to Tesseract (``SetSourceResolution``), it sizes Sauvola's window (``thresholding_window_size``
    is in inches): left to guess, Tesseract lost the first paragraph of a Korean page and the rows of
    a photographed table (``bench/ocr_pages.py``)."""
    dpi = round(max(width, height) / PAGE_LONG_SIDE_IN)
    return min(max(dpi, DPI_RANGE[0]), DPI_RANGE[1])


def script_chars(result: OcrResult, language: str) -> int:
    """How many characters of ``language``'s script (``_SCRIPTS``) ``result`` read."""
    return sum(len(_SCRIPTS[language][0].findall(p)) for p in result.paragraphs)


#: Scripts read better by their language alone than among others: mixed with Latin and Han models,
#: Tesseract reads some Korean words as Latin garble (CER 0.117 in one pass, 0.020 re-read alone,
#: ``bench/ocr_pages.py``). Japanese is not re-read: one pass already reads it (CER 0.010 either way)
#: and a re-read cost 40 % of its pages/s. Language → (its script's characters, share of the page's
#: letters from which the page is re-read).
_SCRIPTS: dict[str, tuple[re.Pattern[str], float]] = {
    "kor": (re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]"), 0.5),  # Hangul
}


def script_language(paragraphs: Iterable[str], languages: str) -> str | None:
    """The one language of ``languages`` ("eng+kor+...") to read a page again with, when the text read
    is mostly that language's script (``_SCRIPTS``); ``None`` otherwise or when it is the only one."""
    names = languages.split("+")
    if len(names) < 2:
        return None
    text = "".join(paragraphs)
    letters = sum(1 for c in text if c.isalpha())
    if not letters:
        return None
    for language, (pattern, share) in _SCRIPTS.items():
        if language in names and len(pattern.findall(text)) / letters >= share:
            return language
    return None
