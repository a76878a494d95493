"""Hostile inputs of issue 28, each a small file built here (``tests.support.hostile``): a reader's
output is bounded as it is emitted (the text budget, chunking that stops at the chunk limit),
repeated targets are read once or refused, ZIP parts are inflated no further than they declare,
the HTML pre-check counts re-opened formatting elements, OCR's pixels are budgeted before any
page is rendered, and bad bytes end ``parse_limit`` or ``corrupt_document``, never a bare
exception. ``e2e/test_hostile_files.py`` sends the full-size files through a worker."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tracemalloc

import pytest

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from task_service.pipeline.chunk import Chunker, load_minilm_tokenizer
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.extract import extract
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits
from task_service.pipeline.parse import parse_document
from task_service.pipeline.readers._shared.xmlzip import ZipPackage
from task_service.pipeline.readers.web.html import extract_html
from tests.support import ROOT, hostile

MIB = 1024 * 1024


# ------------------------------------------------------------------ the text budget


def test_json_key_paths_stop_at_the_text_budget() -> None:
    """127 KB whose every leaf repeats a 9,000-character key path: 73 M characters before."""
    with pytest.raises(ParseLimitError, match=r"more than 50,000,000 characters of text .*PARSE_MAX_TEXT_CHARS"):
        parse_document(hostile.json_key_paths(), "paths.json")


def test_csv_headers_repeated_on_every_cell_stop_at_the_text_budget() -> None:
    """2.6 MB whose 4,000 headers are repeated before every cell: 60 M characters before (here
    against a budget of 5 M, to stay fast; the e2e test sends it under the defaults)."""
    with pytest.raises(ParseLimitError, match=r"more than 5,000,000 characters .*PARSE_MAX_TEXT_CHARS"):
        parse_document(hostile.csv_wide_headers(), "wide.csv", ParseLimits(text_max_chars=5_000_000))


def test_the_text_budget_counts_a_document_once_and_names_its_figure() -> None:
    """A mail's attachment shares its message's budget and its re-sectioned blocks are not
    charged again: 9,000 characters pass a budget of 12,000, 13,000 do not."""
    from email.message import EmailMessage

    def mail(attached: int) -> bytes:
        message = EmailMessage()
        message["Subject"], message["From"] = "budget", "a@example.org"
        message.set_content("body words " * 300)  # 3,300 characters
        message.add_attachment(("attached " * (attached // 9)).encode(), maintype="text", subtype="plain",
                               filename="notes.txt")
        return message.as_bytes()

    limits = ParseLimits(text_max_chars=12_000)
    assert "attached" in parse_document(mail(5_400), "m.eml", limits).text
    with pytest.raises(ParseLimitError, match=r"more than 12,000 characters"):
        parse_document(mail(9_000), "m.eml", limits)


def test_chunking_stops_as_soon_as_the_chunk_limit_is_passed() -> None:
    chunker = Chunker(load_minilm_tokenizer(), 20, 0, 200, max_chunks=3)
    document = ParsedDocument(tuple(Block(f"paragraph {i} " + "word " * 12) for i in range(2_000)))
    assert len(chunker.chunk(document, limit=3)) == 4  # one past the limit, not 2,000
    assert len(chunker.chunk(document)) >= 2_000
    with pytest.raises(ParseLimitError, match=r"more than 3 chunks .*CHUNK_MAX_PER_DOCUMENT"):
        extract(document.text.encode(), "long.txt", DEFAULT_LIMITS, chunker)


# ------------------------------------------------------------------ repeated targets


def test_an_epub_spine_naming_one_chapter_again_reads_it_once() -> None:
    doc = parse_document(hostile.epub_repeated_spine(2_000), "book.epub")
    assert doc.text.count("SPINEMARK") == 1
    assert "1,999 spine entries name a document already read (each read once)" in doc.warnings


def test_pptx_slide_ids_naming_one_slide_again_read_it_once() -> None:
    doc = parse_document(hostile.pptx_repeated_slide(3_000), "deck.pptx")
    assert doc.text.count("SLIDEMARK") == 1
    assert "2,999 slide ids naming a slide already read (each read once)" in doc.warnings


def test_xlsx_sheets_naming_one_worksheet_again_read_it_once() -> None:
    doc = parse_document(hostile.xlsx_repeated_sheet(300), "book.xlsx")
    assert doc.text.count("SHEETMARK 200") == 1  # the last row of the one worksheet
    assert "299 sheets naming a worksheet already read (each read once)" in doc.warnings


def test_msg_streams_sharing_their_data_are_refused() -> None:
    with pytest.raises(CorruptDocumentError, match="share their data"):
        parse_document(hostile.msg_aliased_attachments(), "aliased.msg")


# ------------------------------------------------------------------ bounded reads, bad bytes


def test_a_zip_part_lying_about_its_size_is_inflated_no_further_than_declared() -> None:
    """64 MiB of XML declared as 1,000 bytes: ``ZipFile.read`` inflated all of it before its CRC
    check; a bounded read stops at 1,001 bytes (then the CRC refuses the part)."""
    data = hostile.zip_part_lying_about_its_size()
    with ZipPackage.load(data, "DOCX") as package:
        tracemalloc.start()
        try:
            with pytest.raises(CorruptDocumentError, match=r"big\.xml"):
                package.read("big.xml")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 4 * MIB, f"{peak / MIB:.1f} MiB allocated reading a part declared as 1,000 bytes"


def test_a_json_integer_past_the_digit_limit_is_parse_limit() -> None:
    with pytest.raises(ParseLimitError, match="more than 4,300 digits"):
        parse_document(hostile.json_huge_integer(), "big.json")


def test_html_reopening_formatting_elements_is_refused_before_lexbor() -> None:
    """2,000 formatting elements re-opened by 2,000 text runs: 4 million elements for lexbor."""
    with pytest.raises(ParseLimitError, match=r"formatting elements re-opened"):
        extract_html(hostile.html_reopened_formatting(2_000, 2_000).decode())


def test_an_html_parser_allocation_failure_is_parse_limit() -> None:
    """lexbor under an address-space limit fails to allocate its tree (``SelectolaxError``,
    an ``internal_error`` before): a child process with a tight ``RLIMIT_AS``."""
    code = textwrap.dedent("""
        import resource
        from shared.domain.errors import ParseLimitError
        from task_service.pipeline.readers.web.html import extract_html
        html = "<p>" + ("<b>" + "x" * 500 + "</b>") * 100_000  # 50 MB, 200,000 elements
        size = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize"))
        room = size + len(html) + 30 * 2**20  # the text's UTF-8 copy fits, lexbor's tree does not
        resource.setrlimit(resource.RLIMIT_AS, (room, room))
        try:
            extract_html(html)
        except ParseLimitError as exc:
            print("parse_limit:", exc)
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "parse_limit: the HTML parser could not build" in done.stdout, done.stdout + done.stderr


def test_ocr_pixels_are_budgeted_before_any_page_is_rendered() -> None:
    """100 scanned pages of 200 × 200 in: 5,000 Mpx to render at OCR_DPI, refused at once."""
    with pytest.raises(ParseLimitError, match=r"100 page\(s\) to OCR of 5,000 Mpx .*OCR_MAX_PIXELS"):
        parse_document(hostile.pdf_huge_scanned_pages(), "huge.pdf")
