"""OCR with the real engine (tesserocr + Debian's tesseract-ocr-eng/-deu/-chi-sim; `make ocr`): images,
scanned and half-scanned PDFs, a scan pasted into a DOCX, and stage OCR from the sandbox child.
A few pages, seconds; no service needed."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from shared.domain.errors import NoTextError
from task_service.pipeline import ocr
from task_service.pipeline.limits import DEFAULT_LIMITS
from task_service.pipeline.parse import parse_document
from task_service.pipeline.readers.image import reader as image
from tests.support import CASES

pytest.importorskip("tesserocr")
ocrgen = pytest.importorskip("tests.support.ocrgen")
if not (Path(DEFAULT_LIMITS.ocr_tessdata_dir) / "chi_sim.traineddata").exists():
    pytest.skip("Tesseract language data not installed (make ocr)", allow_module_level=True)

#: The handed case (``tests.support.CASES``: ../shared/cases, or /work/shared/cases from a worktree).
HALF_SCANNED = CASES / "formats" / "half-scanned.pdf"


@pytest.mark.parametrize("lang", ["eng", "deu", "chi_sim"])
def test_a_png_page_is_read_with_a_low_error_rate(lang: str) -> None:
    parsed = image.read(ocrgen.png_bytes(ocrgen.degrade(ocrgen.language_page(lang, 200))), DEFAULT_LIMITS)
    assert ocrgen.cer("\n".join(ocrgen.TEXTS[lang]), parsed.text, lang) < 0.02
    assert {b.page for b in parsed.blocks} == {1} and len(parsed.blocks) >= 3  # a block per paragraph
    assert parsed.warnings[0].startswith("1 image read by OCR (mean confidence")


def test_a_multi_page_tiff_gives_one_page_per_frame() -> None:
    pages = [ocrgen.language_page("eng", 150), ocrgen.page_image(("The Quillmoor depot closes at six.",), 150)]
    out = io.BytesIO()
    pages[0].save(out, "TIFF", save_all=True, append_images=pages[1:], compression="tiff_deflate")
    parsed = image.read(out.getvalue(), DEFAULT_LIMITS)
    assert "Rookhaven" in " ".join(b.text for b in parsed.blocks if b.page == 1)
    assert "Quillmoor" in " ".join(b.text for b in parsed.blocks if b.page == 2)
    assert parsed.warnings == (parsed.warnings[0],) and parsed.warnings[0].startswith("2 pages read by OCR")


@pytest.mark.parametrize("fmt", ["JPEG", "WEBP", "BMP"])
def test_other_formats_and_exif_orientation(fmt: str) -> None:
    page = ocrgen.page_image(("The Quillmoor depot closes at six.",), 150)
    rotated = page.rotate(90, expand=True)  # stored on its side; EXIF says "rotate 90° clockwise to view"
    exif = rotated.getexif()
    exif[0x0112] = 6
    out = io.BytesIO()
    rotated.convert("RGB").save(out, fmt, **({} if fmt == "BMP" else {"exif": exif}))
    text = image.read(out.getvalue(), DEFAULT_LIMITS).text
    if fmt == "BMP":  # BMP has no EXIF: it is read as stored, on its side
        return
    assert "Quillmoor" in text


def test_a_blank_image_gives_no_text_and_says_so() -> None:
    with pytest.raises(NoTextError, match=r"OCR found no text in the image \(Tesseract read no word, mean confidence "
                                          r"0 %; OCR_LANGUAGES=eng\+deu"):
        image.read(ocrgen.png_bytes(ocrgen.page_image((), 100)), DEFAULT_LIMITS)


def test_a_scanned_pdf_indexes_and_a_stray_header_joins_its_ocr_text() -> None:
    from tests.support.pdfgen import text_page

    pdf = ocrgen.scanned_pdf([
        text_page("Plain text page one"),
        ocrgen.degrade(ocrgen.language_page("eng", 200)),
        (ocrgen.page_image(("The Quillmoor depot closes at six.",), 200), text_page("Header 7")),
    ])
    parsed = parse_document(pdf, "scan.pdf")
    pages = {p: " ".join(b.text for b in parsed.blocks if b.page == p) for p in (1, 2, 3)}
    assert pages[1] == "Plain text page one"
    assert "Rookhaven tunnel reopens in autumn" in pages[2]
    # the stray header is drawn on the rendered page too: OCR reads it, and it is kept once
    assert pages[3].count("Header 7") == 1 and "Quillmoor" in pages[3]
    assert parsed.warnings[0].startswith("2 pages read by OCR (mean confidence")


def test_more_scanned_pages_than_the_budget_is_a_parse_limit() -> None:
    from dataclasses import replace

    from shared.domain.errors import ParseLimitError

    blank_scan = ocrgen.page_image(("x",), 72)
    with pytest.raises(ParseLimitError, match="OCR_MAX_PAGES"):
        parse_document(ocrgen.scanned_pdf([blank_scan] * 3), "s.pdf", replace(DEFAULT_LIMITS, ocr_max_pages=2))


@pytest.mark.skipif(not HALF_SCANNED.exists(), reason="../shared/cases not present")
def test_the_handed_half_scanned_pdf_keeps_both_markers() -> None:
    parsed = parse_document(HALF_SCANNED.read_bytes(), "half-scanned.pdf")
    assert any("Gorsefield" in b.text and b.page == 1 for b in parsed.blocks)
    assert any("Rookhaven" in b.text and b.page == 2 for b in parsed.blocks)
    assert any("read by OCR" in w for w in parsed.warnings)


def test_a_scan_pasted_into_a_docx_is_ocred_and_icons_are_counted() -> None:
    import docx

    document = docx.Document()
    document.add_paragraph("Cover letter text.")
    page = ocrgen.png_bytes(ocrgen.page_image(("The Quillmoor depot closes at six.",), 150))
    icon = ocrgen.png_bytes(ocrgen.page_image(("x",), 10))
    document.add_picture(io.BytesIO(page))
    document.add_picture(io.BytesIO(icon))
    out = io.BytesIO()
    document.save(out)
    parsed = parse_document(out.getvalue(), "letter.docx")
    assert "Quillmoor" in parsed.text and "Cover letter text." in parsed.text
    assert "1 image read by OCR" in parsed.warnings[0] and "1 image ignored" in parsed.warnings[1]
    assert zipfile.is_zipfile(io.BytesIO(out.getvalue()))


def test_ocr_embedded_images_reads_big_images_only() -> None:
    page = ocrgen.png_bytes(ocrgen.page_image(("The Quillmoor depot closes at six.",), 150))
    blocks, notes = ocr.ocr_embedded_images([page, b"not an image"], DEFAULT_LIMITS)
    assert "Quillmoor" in " ".join(b.text for b in blocks)
    assert notes[-1].startswith("1 image ignored")


def test_the_sandbox_reports_stage_ocr_per_page() -> None:
    from task_service.pipeline.sandbox import SandboxedParser

    pdf = ocrgen.scanned_pdf([ocrgen.language_page("eng", 150), ocrgen.page_image(("The Quillmoor depot.",), 150)])
    parser = SandboxedParser()
    try:
        stages: list[tuple[object, ...]] = []
        extraction = parser(pdf, "scan.pdf", on_stage=lambda *args: stages.append(args))
    finally:
        parser.close()
    assert stages == [("OCR", 0.0), ("OCR", 0.5), ("OCR", 1.0), ("CHUNKING",)]
    assert "Quillmoor" in " ".join(c.content for c in extraction.chunks)


# ---------------------------------------------------------------- issue 29: tables, photos, scripts, pictures

_NOTICE = ("The Tamberlyn depot closes at six.", "Ask for Mr Ostrowick at the gate.")


def test_a_scanned_table_with_coloured_cells_reads_its_cells_in_row_order() -> None:
    scan = ocrgen.degrade_colour(ocrgen.table_page(200))
    text = image.read(ocrgen.png_bytes(scan), DEFAULT_LIMITS).text
    cells = [cell for row in ocrgen.TABLE for cell in row]
    assert sum(cell in text for cell in cells) >= 14, text  # greyscale + global Otsu read 0 of 20
    assert ocrgen.rows_in_order(ocrgen.TABLE[1:], text) >= 1, text


def test_a_100_dpi_photo_of_a_page_reads_its_table() -> None:
    text = image.read(ocrgen.png_bytes(ocrgen.photo_page(100)), DEFAULT_LIMITS).text
    cells = [cell for row in ocrgen.TABLE for cell in row]
    assert "Rookhaven" in text and sum(cell in text for cell in cells) >= 14, text  # before: 2 of 20


@pytest.mark.parametrize("lang", ["kor", "jpn"])
def test_korean_and_japanese_pages_are_read_with_the_default_languages(lang: str) -> None:
    parsed = image.read(ocrgen.png_bytes(ocrgen.degrade(ocrgen.language_page(lang, 200))), DEFAULT_LIMITS)
    assert ocrgen.cer("\n".join(ocrgen.TEXTS[lang]), parsed.text, lang) < 0.1, parsed.text


def test_a_picture_on_8_percent_of_an_empty_pdf_page_is_ocred() -> None:
    parsed = parse_document(ocrgen.pdf_with_picture(ocrgen.text_picture(_NOTICE)), "notice.pdf")
    assert "Tamberlyn" in parsed.text and "Ostrowick" in parsed.text
    assert any("read by OCR" in w for w in parsed.warnings)


def test_a_slide_whose_only_content_is_a_picture_of_text_is_read_in_its_place() -> None:
    parsed = parse_document(ocrgen.pptx_with_picture(ocrgen.text_picture(_NOTICE)), "deck.pptx")
    picture = [b for b in parsed.blocks if "Tamberlyn" in b.text]
    assert picture and picture[0].page == 2 and picture[0].section == "Slide 2"
    assert "Ostrowick" in parsed.text and "1 image read by OCR" in parsed.warnings[-1]


def test_a_picture_on_a_sheet_is_ocred_into_its_sheet() -> None:
    parsed = parse_document(ocrgen.xlsx_with_picture(ocrgen.text_picture(_NOTICE)), "depots.xlsx")
    picture = [b for b in parsed.blocks if "Tamberlyn" in b.text]
    assert picture and picture[0].section == "Depots"
    assert "Ostrowick" in parsed.text and parsed.warnings[0].startswith("1 image read by OCR")
