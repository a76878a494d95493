"""Legacy Office readers (``readers/legacy``): text, structure, encryption and corrupt files."""

from __future__ import annotations

import io
import struct

import olefile
import pytest

from shared.domain.errors import CorruptDocumentError, EncryptedDocumentError, ParseLimitError, UnsupportedTypeError
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits
from task_service.pipeline.readers.legacy import doc, ppt, xls
from tests.fidelity.cfb_writer import write_cfb
from tests.fidelity.legacy_writer import make_doc, make_ppt, make_xls


def test_doc_paragraphs_unicode_cells_fields_and_header() -> None:
    field = "see \x13HYPERLINK \"x\"\x14the link\x15 end"
    data = make_doc(["Hello DOCASCII", "Grüße 中文 DOCUNI", "a\x07b\x07\x07", field], header="top DOCHDR")
    parsed = doc.read(data, DEFAULT_LIMITS)
    assert [b.text for b in parsed.blocks] == ["Hello DOCASCII", "Grüße 中文 DOCUNI", "a | b", "see the link end",
                                               "top DOCHDR"]
    assert parsed.blocks[-1].section == "Headers and footers"
    assert parsed.blocks[0].section is None


def test_doc_heading_styles_give_section_paths() -> None:
    data = make_doc(["Report", "intro text", "Install", "steps here", "Linux", "apt DOCLINUX"],
                    headings={0: 1, 2: 2, 4: 3})
    blocks = doc.read(data, DEFAULT_LIMITS).blocks
    assert [(b.section, b.text) for b in blocks][-2:] == [("Report > Install > Linux", "Linux"),
                                                           ("Report > Install > Linux", "apt DOCLINUX")]
    assert blocks[1].section == "Report"


def test_doc_encrypted_is_encrypted() -> None:
    with pytest.raises(EncryptedDocumentError):
        doc.read(make_doc(["secret"], encrypted=True), DEFAULT_LIMITS)


def test_doc_text_limit() -> None:
    with pytest.raises(ParseLimitError, match="PARSE_MAX_TEXT_CHARS"):
        doc.read(make_doc(["x" * 500]), ParseLimits(text_max_chars=100))


def test_doc_piece_table_outside_its_stream_is_corrupt() -> None:
    word = write_cfb({"WordDocument": make_doc_fib_only(), "1Table": b"\0" * 4096})
    with pytest.raises(CorruptDocumentError):
        doc.read(word, DEFAULT_LIMITS)


def make_doc_fib_only() -> bytes:
    """A Word 97 FIB whose piece table (fcClx/lcbClx) points past the end of the table stream."""
    base = struct.pack("<HHHHHH", 0xA5EC, 0x00C1, 0, 0x0409, 0, 0x0200).ljust(32, b"\0")
    pairs = [0] * 186
    pairs[66], pairs[67] = 8000, 100
    return (base + struct.pack("<H", 14) + b"\0" * 28 + struct.pack("<H22I", 22, *([0] * 22))
            + struct.pack("<H186I", 93, *pairs)).ljust(4096, b"\0")


def test_doc_named_file_that_is_a_workbook_says_so() -> None:
    with pytest.raises(UnsupportedTypeError, match="Excel"):
        doc.read(make_xls({"S": [["a"]]}), DEFAULT_LIMITS)


def test_ppt_slides_in_order_titles_shapes_and_notes() -> None:
    data = make_ppt([("Title one PPTT1", "Body ünï PPTB1", "box PPTX1", "note PPTN1"),
                     ("Title two", "Body two", "box two", "note two")])
    blocks = ppt.read(data, DEFAULT_LIMITS).blocks
    assert [(b.page, b.section, b.text) for b in blocks[:4]] == [
        (1, "Title one PPTT1", "Title one PPTT1"), (1, "Title one PPTT1", "Body ünï PPTB1"),
        (1, "Title one PPTT1", "box PPTX1"), (1, "Title one PPTT1", "Speaker notes: note PPTN1")]
    assert [b.page for b in blocks[4:]] == [2, 2, 2, 2]


def test_ppt_encrypted_is_encrypted() -> None:
    with pytest.raises(EncryptedDocumentError):
        ppt.read(make_ppt([("t", "b", "x", "n")], encrypted=True), DEFAULT_LIMITS)


def test_ppt_without_persist_directory_reads_slides_in_stream_order() -> None:
    """A broken ``Current User`` (no edit chain): the slide containers are still read."""
    data = make_ppt([("Lost title", "lost body", "BOXONLY", "note")])
    stream = olefile.OleFileIO(io.BytesIO(data)).openstream("PowerPoint Document").read()
    rebuilt = write_cfb({"PowerPoint Document": stream, "Current User": b"\0" * 4})
    texts = [b.text for b in ppt.read(rebuilt, DEFAULT_LIMITS).blocks]
    assert "BOXONLY" in texts


def test_ppt_deep_nesting_is_a_parse_limit() -> None:
    body = b""
    for _ in range(300):
        body = struct.pack("<HHI", 0xF, 0xF004, len(body)) + body
    slide = struct.pack("<HHI", 0xF, 0x03EE, len(body)) + body
    data = write_cfb({"PowerPoint Document": slide.ljust(4096, b"\0"), "Current User": b"\0" * 4})
    with pytest.raises(ParseLimitError, match="STRUCTURED_MAX_DEPTH"):
        ppt.read(data, DEFAULT_LIMITS)


def test_xls_rows_with_column_names_per_sheet() -> None:
    rows: list[list[object]] = [["Item", "Price"], ["widget XLSMARK", 3.5], ["gadget", 4]]
    data = make_xls({"Prices": rows, "Other": [["only ünï"]]})
    blocks = xls.read(data, DEFAULT_LIMITS).blocks
    assert [(b.section, b.text) for b in blocks] == [
        ("Prices", "Item: widget XLSMARK | Price: 3.5"), ("Prices", "Item: gadget | Price: 4"),
        ("Other", "Column A: only ünï")]


def test_xls_used_range_over_the_cell_limit() -> None:
    with pytest.raises(ParseLimitError, match="TABLE_MAX_CELLS"):
        xls.read(make_xls({"S": [["a"] * 30] * 30}), ParseLimits(table_max_cells=100))


def test_xls_filepass_is_encrypted() -> None:
    bof = struct.pack("<HH", 0x0809, 16) + b"\0" * 16
    stream = bof + struct.pack("<HH", 0x002F, 6) + b"\0" * 6 + struct.pack("<HH", 0x000A, 0)
    with pytest.raises(EncryptedDocumentError):
        xls.read(write_cfb({"Workbook": stream.ljust(4096, b"\0")}), DEFAULT_LIMITS)


def test_xls_dimensions_over_the_cell_limit_refused_before_calamine_allocates() -> None:
    """Four cells, but a DIMENSIONS record spanning the whole BIFF8 grid (65,536 × 256)."""
    stream = bytearray(olefile.OleFileIO(io.BytesIO(make_xls({"S": [["a", "b"], ["c", "d"]]}))).openstream(
        "Workbook").read())
    pos = 0
    while pos + 4 <= len(stream):
        rtype, length = struct.unpack_from("<HH", stream, pos)
        if rtype == 0x0200:
            struct.pack_into("<IIHH", stream, pos + 4, 0, 65536, 0, 256)
        pos += 4 + length
    with pytest.raises(ParseLimitError, match=r"16,777,216 cells \(its DIMENSIONS"):
        xls.read(write_cfb({"Workbook": bytes(stream)}), DEFAULT_LIMITS)
