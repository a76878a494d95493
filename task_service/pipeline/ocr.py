"""OCR: page images → paragraphs + mean confidence, with Tesseract 5 through tesserocr (no network).

Engine: chosen by ``bench/ocr.py`` (figures in ``bench/RESULTS.md``, section ocr): Tesseract 5 (the
tesserocr wheel bundles libtesseract; the language data comes from Debian's ``tesseract-ocr-eng``,
``-deu``, ``-chi-sim``, ``-kor``, ``-jpn`` packages, listed in ``deploy/system-packages.txt``) read our
rendered English, German and Chinese pages with a lower character error rate and ≈10× the pages/s
of RapidOCR (PP-OCRv4 models inside its wheel), and tesserocr keeps one loaded engine per process
where pytesseract starts a ``tesseract`` process (and reloads the model) per page.

How a page is read, chosen by ``bench/ocr_pages.py`` (section ocr_pages: scanned tables with
coloured cells, ~100 dpi phone photos, Korean and Japanese pages): greyscale, Sauvola thresholding
(local: a coloured cell or a shaded side of a photo is thresholded against its own surroundings;
global Otsu turned whole fills black and read 0 of 20 table cells), the image's resolution told to
Tesseract (it sizes Sauvola's window), page segmentation ``PSM.AUTO`` (cells come out row by row;
single-block and sparse modes lost most cells). Not adopted, measured: colour input, 2× upscaling,
deskew, background flattening. A page with no word under Sauvola is read again with Otsu; a page
read mostly in Hangul is read again with Korean alone (``script_language``).

This module holds the pure policy (which PDF page needs OCR, the per-document page budget, the
pixel check made before an image is decoded, the warnings) and a thin engine adapter
(:func:`recognize`). Per-page progress goes to whoever called :func:`progress_to` (the sandbox
child forwards it to the worker as stage ``OCR``); readers call :func:`report_progress`.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shared.domain.errors import DependencyMissingError, ParseLimitError

if TYPE_CHECKING:
    from PIL import Image

    from task_service.pipeline.document import Block
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

#: Told (pages done, pages to do) as OCR progresses.
ProgressCallback = Callable[[int, int], None]
_PROGRESS: ContextVar[ProgressCallback | None] = ContextVar("ocr_progress", default=None)


@dataclass(frozen=True)
class OcrResult:
    """What OCR read on one image: paragraphs in reading order, and Tesseract's mean word
    confidence in percent (0-100; 0 when it read nothing)."""

    paragraphs: tuple[str, ...]
    confidence: float

    @property
    def readable(self) -> bool:
        return any(p.strip() for p in self.paragraphs)


# ---------------------------------------------------------------------- pure policy


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
            out.append(f"{_plural(read, unit)} read by OCR (mean confidence {mean:.0f} %)")
        if self.unreadable:
            out.append(f"{_plural(self.unreadable, unit)} gave no text to OCR")
        return tuple(out)


#: Han, kana, Hangul and full-width punctuation: Tesseract puts a space between two of them, which no
#: CJK text has (and which splits every word for search).
_CJK = "\u2e80-\u2fff\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_CJK_GAP = re.compile(f"(?<=[{_CJK}])[ \t]+(?=[{_CJK}])")


def tidy(text: str) -> str:
    """OCR text stripped, without the spaces Tesseract puts between CJK characters."""
    return _CJK_GAP.sub("", text).strip()


def _plural(n: int, unit: str) -> str:
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


# ---------------------------------------------------------------------- progress


@contextmanager
def progress_to(callback: ProgressCallback | None) -> Iterator[None]:
    """Within the block, :func:`report_progress` calls ``callback(done, total)`` (same thread/context)."""
    token = _PROGRESS.set(callback)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def report_progress(done: int, total: int) -> None:
    callback = _PROGRESS.get()
    if callback is not None:
        callback(done, total)


# ---------------------------------------------------------------------- the engine


def prepare(image: Image.Image) -> Image.Image:
    """``image`` upright (EXIF orientation applied) in 8-bit greyscale, transparency over white.

    Greyscale, not colour: with Sauvola thresholding (``THRESHOLDING_SAUVOLA``) the colour image reads
    coloured table cells no better and photos worse (``bench/ocr_pages.py``, section ocr_pages)."""
    from PIL import Image as PILImage
    from PIL import ImageOps

    upright = ImageOps.exif_transpose(image) or image
    if upright.mode in ("RGBA", "LA", "PA") or (upright.mode == "P" and "transparency" in upright.info):
        rgba = upright.convert("RGBA")
        white = PILImage.new("RGBA", rgba.size, (255, 255, 255, 255))
        upright = PILImage.alpha_composite(white, rgba)
    return upright.convert("L")


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


#: Tesseract's ``thresholding_method`` (5.3+): 0 global Otsu, 1 Leptonica adaptive Otsu, 2 Sauvola
#: (local). Sauvola reads cells painted in different colours and unevenly lit photos, where one
#: global threshold turns a whole fill black (``bench/ocr_pages.py``).
THRESHOLDING_SAUVOLA = 2
THRESHOLDING_OTSU = 0

_ENGINE_LOCK = threading.Lock()
_ENGINES: dict[tuple[str, str], Any] = {}


def _engine(languages: str, tessdata: str) -> Any:
    """One loaded Tesseract per (languages, data dir) in this process (loading takes ≈0.1-0.3 s)."""
    key = (languages, tessdata)
    if key not in _ENGINES:
        try:
            import tesserocr
        except ImportError as exc:
            raise DependencyMissingError("OCR needs tesserocr (pip install tesserocr)") from exc
        try:
            _ENGINES[key] = tesserocr.PyTessBaseAPI(path=tessdata.rstrip("/") + "/", lang=languages,
                                                    psm=tesserocr.PSM.AUTO)
        except RuntimeError as exc:
            raise DependencyMissingError(
                f"Tesseract language data {languages!r} not found in {tessdata} (OCR_LANGUAGES, OCR_TESSDATA_DIR;"
                " Debian: make ocr, or apt-get install the tesseract-ocr-* packages of deploy/system-packages.txt)"
            ) from exc
    return _ENGINES[key]


def ensure_ocr_ready(limits: ParseLimits) -> None:
    """Load the engine with ``limits.ocr_languages`` (raises ``DependencyMissingError`` when the
    library or a language's data is missing)."""
    with _ENGINE_LOCK:
        _engine(limits.ocr_languages, limits.ocr_tessdata_dir)


def recognize(image: Image.Image, limits: ParseLimits, dpi: int | None = None) -> OcrResult:
    """OCR one page image (any mode; use :func:`prepare` first for EXIF/alpha) at ``dpi`` (dots per
    inch; ``None``: :func:`estimated_dpi`). Paragraphs come from Tesseract's layout analysis
    (``RIL.PARA``), in its reading order.

    Sauvola thresholding first; when it reads nothing, the page is read again with global Otsu
    (``THRESHOLDING_OTSU``): an image is reported without text only when neither finds a word."""
    resolution = min(max(dpi or estimated_dpi(*image.size), DPI_RANGE[0]), DPI_RANGE[1])
    with _ENGINE_LOCK:
        api = _engine(limits.ocr_languages, limits.ocr_tessdata_dir)
        result = _read(api, image, resolution, THRESHOLDING_SAUVOLA)
        if not result.readable:
            result = _read(api, image, resolution, THRESHOLDING_OTSU)
        single = script_language(result.paragraphs, limits.ocr_languages)
        if single is not None:
            again = _read(_engine(single, limits.ocr_tessdata_dir), image, resolution, THRESHOLDING_SAUVOLA)
            if _script_chars(again, single) >= _script_chars(result, single):  # confidences of two models
                result = again  # do not compare; the script's characters read do
    return result


def _script_chars(result: OcrResult, language: str) -> int:
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


def _read(api: Any, image: Image.Image, resolution: int, thresholding: int) -> OcrResult:
    import tesserocr

    api.SetVariable("thresholding_method", str(thresholding))
    api.SetImage(image)
    api.SetSourceResolution(resolution)
    try:
        api.Recognize()
        paragraphs = tuple(_paragraphs(api.GetIterator(), tesserocr.RIL.PARA))
        confidence = float(api.MeanTextConf()) if paragraphs else 0.0
    finally:
        api.Clear()
    return OcrResult(paragraphs, max(0.0, confidence))


def _paragraphs(iterator: Any, level: Any) -> Iterable[str]:
    if iterator is None:
        return
    from tesserocr import iterate_level

    for item in iterate_level(iterator, level):
        try:
            text = tidy(item.GetUTF8Text(level) or "")
        except RuntimeError:  # tesserocr: "No text returned" for an empty element
            continue
        if text:
            yield text


# ---------------------------------------------------------------------- embedded images (DOCX, PPTX, XLSX)


class EmbeddedOcr:
    """OCR of the pictures pasted into one document (DOCX, PPTX, XLSX), one at a time, in reading order.

    :meth:`read` OCRs a picture big enough to hold text (``MIN_EMBEDDED_SIZE``) within the
    document's ``OCR_MAX_PAGES``; :meth:`warnings` says how many were read (mean confidence), gave
    no text, or were ignored (too small, unreadable format, or over the budget). Never raises for
    one bad image (``DependencyMissingError`` when Tesseract itself is missing).
    """

    def __init__(self, limits: ParseLimits) -> None:
        self.limits = limits
        self.tally = OcrTally()
        self.budget = PageBudget(limits.ocr_max_pages)
        self.ignored = 0

    def read(self, data: bytes) -> tuple[str, ...]:
        """The paragraphs OCR reads in the image ``data`` (empty when it is not OCRed or gives none)."""
        image = _open_embedded(data, self.limits)
        if image is None or self.budget.used >= self.budget.limit:
            self.ignored += 1
            return ()
        self.budget.take()
        result = recognize(prepare(image), self.limits)
        self.tally.add(result)
        return result.paragraphs

    def warnings(self) -> list[str]:
        notes = list(self.tally.warnings("image"))
        if self.ignored:
            notes.append(f"{_plural(self.ignored, 'image')} ignored (too small for text, unreadable, or over "
                         "OCR_MAX_PAGES)")
        return notes


def ocr_embedded_images(images: Iterable[bytes], limits: ParseLimits) -> tuple[list[Block], list[str]]:
    """OCR the images pasted into a document (DOCX) that are big enough to hold text (``EmbeddedOcr``).

    ``images``: the image parts' bytes, in reading order. Returns the blocks read (``page`` None,
    ``section`` None: the caller may re-home them) and ``EmbeddedOcr.warnings``.
    """
    from task_service.pipeline.document import Block

    reader = EmbeddedOcr(limits)
    blocks = [Block(p) for data in images for p in reader.read(data)]
    return blocks, reader.warnings()


def _open_embedded(data: bytes, limits: ParseLimits) -> Image.Image | None:
    """The decoded image when it is worth OCR, else ``None`` (too small, too big, not an image)."""
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)
            image = PILImage.open(_bytes_io(data))
            width, height = image.size
            if not big_enough(width, height) or width * height > limits.image_max_pixels:
                return None
            image.load()
            return image
    except (UnidentifiedImageError, PILImage.DecompressionBombError, OSError, ValueError, SyntaxError):
        return None


def _bytes_io(data: bytes) -> Any:
    import io

    return io.BytesIO(data)
