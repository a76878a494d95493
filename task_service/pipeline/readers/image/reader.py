"""Images (PNG, JPEG, TIFF incl. multi-page, WebP, BMP, GIF, HEIC/HEIF) → OCR paragraphs, one page per frame.

HEIC/HEIF (phone photos) open through pillow-heif's Pillow plugin (libheif and libde265 in its wheel;
the image's rotation and mirroring are applied as it decodes), lazily like the others: the size is
checked from the header before any pixel is decoded; a multi-image file's images are its frames.

Pillow reads the header first: each frame's width × height is checked against ``IMAGE_MAX_PIXELS``
before its pixels are decoded (a 20,000 × 20,000 px image, or a tiny PNG whose IHDR promises
100,000 × 100,000 px over a highly compressed IDAT, fails with ``ParseLimitError`` having decoded
nothing), and frames count against ``OCR_MAX_PAGES`` as they are reached (a 1,000-page TIFF fails
at frame ``OCR_MAX_PAGES + 1``, having OCRed the ones before). EXIF orientation is applied; then
each frame is OCRed (``ocr.py``) into one block per paragraph with ``page`` = the frame number.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator

import pillow_heif
from PIL import Image, UnidentifiedImageError

from shared.domain.errors import CorruptDocumentError, NoTextError, ParseLimitError
from task_service.pipeline import ocr
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits, check_ocr_pixels

pillow_heif.register_heif_opener()  # HEIC/HEIF open like any Pillow image

#: Pillow's own bomb check (a warning above, an error above twice) is ours to make: ``check_pixels``.
_PIL_ERRORS = (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError)


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """OCR every frame of the image in ``data``.

    Raises ``CorruptDocumentError`` (not an image Pillow can read, truncated data),
    ``ParseLimitError`` (a frame over ``IMAGE_MAX_PIXELS``, more frames than ``OCR_MAX_PAGES``, more
    pixels in all than ``OCR_MAX_PIXELS``),
    ``DependencyMissingError`` (tesserocr or the language data not installed), ``NoTextError`` when
    OCR finds no word in any frame (thresholded both ways, ``ocr.recognize``), saying so with the
    languages tried. A frame OCR reads nothing from is counted in a warning.
    """
    blocks: list[Block] = []
    tally = ocr.OcrTally()
    budget = ocr.PageBudget(limits.ocr_max_pages, "image")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        for number, frame, total in _frames(data, limits, budget):
            result = ocr.recognize(ocr.prepare(frame), limits, _stated_dpi(frame))
            tally.add(result)
            blocks.extend(Block(text, page=number) for text in result.paragraphs)
            ocr.report_progress(number, total)
    if not blocks:
        frames = f"{budget.used:,} frames" if budget.used > 1 else "the image"
        raise NoTextError(f"OCR found no text in {frames} (Tesseract read no word, mean confidence 0 %; "
                          f"OCR_LANGUAGES={limits.ocr_languages})")
    return ParsedDocument(tuple(blocks), tally.warnings("page" if budget.used > 1 else "image"))


def _stated_dpi(frame: Image.Image) -> int | None:
    """The resolution the file states (a scanner's TIFF or PNG), when plausible (100-600 dpi); else
    ``None`` (``ocr.estimated_dpi``): cameras write 72 dpi whatever they took."""
    stated = frame.info.get("dpi")
    try:
        dpi = round(float(stated[0])) if stated else 0
    except (TypeError, ValueError, IndexError):
        return None
    return dpi if 100 <= dpi <= 600 else None


def _frames(data: bytes, limits: ParseLimits, budget: ocr.PageBudget) -> Iterator[tuple[int, Image.Image, int]]:
    """(1-based frame number, decoded frame, frames known so far) for each frame, each checked first."""
    try:
        image = Image.open(io.BytesIO(data))
    except _PIL_ERRORS as exc:
        raise _corrupt(exc) from exc
    total = min(int(getattr(image, "n_frames", 1) or 1), limits.ocr_max_pages + 1)
    check_ocr_pixels(_pixels(image, total), total, "image", limits)  # before any frame is decoded
    index = 0
    while True:
        ocr.check_pixels(*image.size, limits, f"image frame {index + 1}" if index else "image")
        budget.take()
        try:
            image.load()
            frame = image.copy()
        except _PIL_ERRORS as exc:
            raise _corrupt(exc) from exc
        yield index + 1, frame, total
        index += 1
        try:
            image.seek(index)
        except EOFError:
            return
        except _PIL_ERRORS as exc:
            raise _corrupt(exc) from exc


def _pixels(image: Image.Image, frames: int) -> int:
    """Pixels of the first ``frames`` frames, from their headers (each seek reads a frame's header,
    decodes nothing); the image is left at its first frame."""
    total = 0
    try:
        for index in range(frames):
            image.seek(index)
            total += image.size[0] * image.size[1]
        image.seek(0)
    except EOFError:
        image.seek(0)
    except _PIL_ERRORS as exc:
        raise _corrupt(exc) from exc
    return total


def _corrupt(exc: BaseException) -> Exception:
    if isinstance(exc, Image.DecompressionBombError):
        return ParseLimitError(f"image refused as a decompression bomb: {exc} (IMAGE_MAX_PIXELS)")
    return CorruptDocumentError(f"image cannot be read: {exc}")
