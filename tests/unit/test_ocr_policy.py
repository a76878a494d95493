"""The pure parts of OCR: which PDF page is OCRed, the page budget, the pixel check, the warnings."""

from __future__ import annotations

import struct
import zlib

import pytest

from shared.domain.errors import ParseLimitError
from task_service.pipeline import ocr
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits
from task_service.pipeline.readers.image import reader as image


def test_a_page_without_text_over_a_scan_needs_ocr() -> None:
    assert ocr.needs_ocr(0, 0.0, 1.0)


def test_a_stray_header_over_a_scan_needs_ocr_but_a_real_text_layer_does_not() -> None:
    assert ocr.needs_ocr(12, 0.004, 0.95)
    assert not ocr.needs_ocr(12, 0.05, 0.95)  # big letters: a real title page with a picture
    assert not ocr.needs_ocr(1_500, 0.01, 0.95)  # many characters
    assert not ocr.needs_ocr(12, 0.004, 0.1)  # a stray line beside a small logo: a letterhead, not a scan


def test_a_text_free_page_is_ocred_whatever_the_share_of_its_pictures() -> None:
    assert ocr.needs_ocr(0, 0.0, 0.08)  # a picture of text on 8 % of an otherwise empty page
    assert ocr.needs_ocr(0, 0.0, 0.001)
    assert not ocr.needs_ocr(0, 0.0, 0.0)  # nothing to read


def test_the_page_budget_refuses_the_page_after_the_limit() -> None:
    budget = ocr.PageBudget(2, "image")
    budget.take()
    budget.take()
    with pytest.raises(ParseLimitError, match="OCR_MAX_PAGES"):
        budget.take()


def test_pixel_check_names_the_setting() -> None:
    ocr.check_pixels(2480, 3508, DEFAULT_LIMITS)  # A4 at 300 dpi
    with pytest.raises(ParseLimitError, match="IMAGE_MAX_PIXELS"):
        ocr.check_pixels(20_000, 20_000, DEFAULT_LIMITS)


def test_warnings_count_pages_read_and_pages_unreadable() -> None:
    tally = ocr.OcrTally()
    tally.add(ocr.OcrResult(("a",), 90.0))
    tally.add(ocr.OcrResult(("b",), 80.0))
    tally.add(ocr.OcrResult((), 0.0))
    assert tally.warnings() == ("2 pages read by OCR (mean confidence 85 %)", "1 page gave no text to OCR")
    assert ocr.OcrTally().warnings() == ()


def test_embedded_images_worth_ocr_are_page_sized_not_icons() -> None:
    assert ocr.big_enough(1654, 2339) and ocr.big_enough(800, 300)
    assert not ocr.big_enough(64, 64) and not ocr.big_enough(1200, 100)


def test_stray_text_is_dropped_when_ocr_read_it_too() -> None:
    assert ocr.join_stray_text("Page  two", "page two\nThe tunnel reopens.") is None
    assert ocr.join_stray_text("Header 7", "The tunnel reopens.") == "Header 7"


def test_tesseract_spaces_between_chinese_characters_are_removed() -> None:
    assert ocr.tidy(" 城市 图 书馆 将 于 下 个 月 ， Bus 42 开放 ") == "城市图书馆将于下个月， Bus 42 开放"


def test_progress_goes_to_the_callback_of_the_block() -> None:
    seen: list[tuple[int, int]] = []
    with ocr.progress_to(lambda done, total: seen.append((done, total))):
        ocr.report_progress(1, 4)
    ocr.report_progress(2, 4)  # outside: nobody listens
    assert seen == [(1, 4)]


def _png_header_bomb(width: int, height: int) -> bytes:
    """A PNG whose IHDR promises ``width`` × ``height`` greyscale pixels over a tiny IDAT of zeros
    (a 1 MiB run of zeros compresses ≈1000:1; a decoder would inflate gigabytes)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(1 << 20), 9)) + chunk(
        b"IEND", b"")


@pytest.mark.parametrize("side", [20_000, 100_000])
def test_a_decompression_bomb_png_is_refused_before_decoding(side: int) -> None:
    data = _png_header_bomb(side, side)
    assert len(data) < 10_000
    with pytest.raises(ParseLimitError, match="IMAGE_MAX_PIXELS"):
        image.read(data, DEFAULT_LIMITS)


def test_an_image_just_over_our_limit_is_refused_before_decoding() -> None:
    limits = ParseLimits(image_max_pixels=1_000_000)
    with pytest.raises(ParseLimitError, match="1,200 × 1,000 px"):
        image.read(_png_header_bomb(1200, 1000), limits)


def test_a_tiff_with_more_frames_than_the_budget_is_refused_before_ocr_of_the_extra_ones() -> None:
    from io import BytesIO

    from PIL import Image

    frames = [Image.new("L", (8, 8), 255) for _ in range(5)]
    out = BytesIO()
    frames[0].save(out, "TIFF", save_all=True, append_images=frames[1:])
    recognized: list[int] = []

    def fake(frame: Image.Image, limits: ParseLimits, dpi: int | None = None) -> ocr.OcrResult:
        recognized.append(1)
        return ocr.OcrResult((), 0.0)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ocr, "recognize", fake)
        with pytest.raises(ParseLimitError, match="OCR_MAX_PAGES"):
            image.read(out.getvalue(), ParseLimits(ocr_max_pages=3))
    assert len(recognized) == 3


def test_bytes_that_are_no_image_are_corrupt() -> None:
    from shared.domain.errors import CorruptDocumentError

    with pytest.raises(CorruptDocumentError):
        image.read(b"GIF89a-but-not-really", DEFAULT_LIMITS)


def test_a_page_mostly_in_hangul_is_read_again_in_korean_alone() -> None:
    every = "eng+deu+chi_sim+kor+jpn"
    assert ocr.script_language(["시립 도서관은 다음 달에 OFS 다시"], every) == "kor"
    assert ocr.script_language(["市立図書館は来月から再び開館します。"], every) is None  # read well in one pass
    assert ocr.script_language(["城市图书馆将于下个月重新开放"], every) is None  # Han only: chi_sim among the rest
    assert ocr.script_language(["The Rookhaven tunnel, 시립"], every) is None  # a Latin page with one word
    assert ocr.script_language(["시립 도서관은"], "eng+deu") is None  # kor not configured
    assert ocr.script_language(["시립 도서관은"], "kor") is None  # already alone
