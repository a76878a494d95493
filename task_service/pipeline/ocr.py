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

This module is the thin engine adapter (:func:`recognize`) and the OCR of embedded pictures; the
pure policy (which PDF page needs OCR, the per-document page budget, the pixel check made before an
image is decoded, the warnings, the resolution and script rules) is :mod:`ocr_policy`, re-exported
here. Per-page progress goes to whoever called :func:`progress_to` (the sandbox
child forwards it to the worker as stage ``OCR``); readers call :func:`report_progress`.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from shared.domain.errors import DependencyMissingError

if TYPE_CHECKING:
    from PIL import Image

    from task_service.pipeline.document import Block
    from task_service.pipeline.limits import ParseLimits

from task_service.pipeline.ocr_policy import (
    DPI_RANGE,
    MAX_STRAY_CHARS,
    MAX_TEXT_AREA_SHARE,
    MIN_EMBEDDED_SIZE,
    MIN_IMAGE_AREA_SHARE,
    OcrResult,
    OcrTally,
    PageBudget,
    big_enough,
    check_pixels,
    estimated_dpi,
    join_stray_text,
    needs_ocr,
    plural,
    script_chars,
    script_language,
    tidy,
)

__all__ = [
    "MAX_STRAY_CHARS", "MAX_TEXT_AREA_SHARE", "MIN_EMBEDDED_SIZE", "MIN_IMAGE_AREA_SHARE", "EmbeddedOcr", "OcrResult",
    "OcrTally", "PageBudget", "ProgressCallback", "big_enough", "check_pixels", "ensure_ocr_ready", "estimated_dpi",
    "join_stray_text", "needs_ocr", "ocr_embedded_images", "prepare", "progress_to", "recognize", "report_progress",
    "script_language", "tidy",
]

#: Told (pages done, pages to do) as OCR progresses.
ProgressCallback = Callable[[int, int], None]
_PROGRESS: ContextVar[ProgressCallback | None] = ContextVar("ocr_progress", default=None)


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
            if script_chars(again, single) >= script_chars(result, single):  # confidences of two models
                result = again  # do not compare; the script's characters read do
    return result


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
            notes.append(f"{plural(self.ignored, 'image')} ignored (too small for text, unreadable, or over "
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
