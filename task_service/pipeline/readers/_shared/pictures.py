"""Pictures a reader counted but did not read (PPTX, ODP...), with what an OCR stage needs to pick them.

``SkippedImage``: part name, bytes, pixel size read from the file header (``image_pixels``: PNG,
GIF, BMP, JPEG), page; ``skipped_image`` builds one from a ``ZipPackage`` part (pure).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from task_service.pipeline.readers._shared.xmlzip import ZipPackage


@dataclass(frozen=True)
class SkippedImage:
    """A picture a reader counted but did not read: where it is and how big, for an OCR stage.

    ``part``: ZIP part name ("ppt/media/image3.png"); ``size``: its bytes (uncompressed);
    ``pixels``: (width, height) from the file header (PNG, GIF, BMP, JPEG), None when unknown;
    ``page``: the slide (or page) it sits on, 1-based, None when not meaningful.
    """

    part: str
    size: int
    pixels: tuple[int, int] | None = None
    page: int | None = None


IMAGE_HEAD_BYTES = 64 * 1024  # enough for a JPEG frame header after the usual EXIF/ICC segments


def skipped_image(package: ZipPackage, part: str | None, page: int | None) -> SkippedImage | None:
    """The picture at ``part`` of ``package`` (its size and header pixels), None when it is not there."""
    if part is None or package.entry(part) is None:
        return None
    return SkippedImage(part, package.size(part), image_pixels(package.head(part, IMAGE_HEAD_BYTES)), page)


def image_pixels(head: bytes) -> tuple[int, int] | None:
    """(width, height) from the first bytes of a PNG, GIF, BMP or JPEG file; None otherwise."""
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return width, height
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return width, height
    if head[:2] == b"BM" and len(head) >= 26:
        width, height = struct.unpack("<ii", head[18:26])
        return abs(width), abs(height)
    if head[:2] == b"\xff\xd8":
        return _jpeg_pixels(head)
    return None


_JPEG_FRAMES = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def _jpeg_pixels(head: bytes) -> tuple[int, int] | None:
    """Walk JPEG marker segments up to the first start-of-frame (ITU T.81 §B.2.2)."""
    at = 2
    while at + 9 <= len(head):
        if head[at] != 0xFF:
            return None
        marker = head[at + 1]
        if marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", head[at + 5: at + 9])
            return width, height
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        (length,) = struct.unpack(">H", head[at + 2: at + 4])
        at += 2 + length
    return None
