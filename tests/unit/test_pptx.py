"""PPTX reader (``task_service.pipeline.readers.office.pptx``): the fidelity corpus, reading order, sections,
warnings and skipped pictures, the handed case, and broken or hostile packages."""

from __future__ import annotations

import io
import re
import zipfile
from functools import cache
from pathlib import Path

import pytest

from shared.domain.errors import CorruptDocumentError, ParseLimitError, UnsupportedTypeError
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import DEFAULT_LIMITS
from task_service.pipeline.readers.office.pptx import read, read_with_images
from tests.fidelity import pptx_corpus, zip_bytes

ROOT = Path(__file__).resolve().parents[2]
HANDED = ROOT.parent / "shared" / "cases" / "formats" / "speaker-notes-and-groups.pptx"
P = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
A = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'


@cache
def deck() -> bytes:
    return pptx_corpus.deck()


@cache
def parsed() -> ParsedDocument:
    return read(deck(), DEFAULT_LIMITS)


def block_with(document: ParsedDocument, marker: str) -> int:
    word = re.compile(rf"\b{re.escape(marker)}\b")
    found = [i for i, block in enumerate(document.blocks) if word.search(block.text)]
    assert len(found) == 1, f"{marker} in {len(found)} blocks"
    return found[0]


def replaced(data: bytes, parts: dict[str, bytes | None]) -> bytes:
    """``data`` with ``parts`` replaced, added, or (None) removed."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            if info.filename not in parts:
                out.writestr(info, source.read(info))
        for name, content in parts.items():
            if content is not None:
                out.writestr(name, content)
    return buffer.getvalue()


def slide(spTree: str) -> bytes:
    return (f'<p:sld {P} {A}><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/>'
            f"</p:nvGrpSpPr><p:grpSpPr/>{spTree}</p:spTree></p:cSld></p:sld>").encode()


def box(text: str) -> str:
    return (f'<p:sp><p:nvSpPr><p:cNvPr id="9" name="b"/><p:cNvSpPr/><p:nvPr/></p:nvSpPr><p:spPr/>'
            f"<p:txBody><a:bodyPr/><a:p><a:r><a:t>{text}</a:t></a:r></a:p></p:txBody></p:sp>")


def group(inner: str) -> str:
    props = '<p:nvGrpSpPr><p:cNvPr id="8" name="g"/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>'
    return f"<p:grpSp>{props}{inner}</p:grpSp>"


# ---------------------------------------------------------------- fidelity corpus


def test_every_marker_is_found_and_no_layout_prompt() -> None:
    text = parsed().text
    assert [m for m in pptx_corpus.MUST if m not in text] == []
    assert [m for m in pptx_corpus.MUST_NOT if m in text] == []


def test_every_marker_comes_out_once() -> None:
    for marker in pptx_corpus.MUST:
        block_with(parsed(), marker)


def test_reading_order_title_first_then_by_offset_with_inherited_placeholder_position() -> None:
    positions = [block_with(parsed(), marker) for marker in pptx_corpus.ORDER]
    assert positions == sorted(positions)


def test_sections_pages_and_literal_text() -> None:
    for marker, section in pptx_corpus.SECTIONS.items():
        assert parsed().blocks[block_with(parsed(), marker)].section == section
    assert parsed().blocks[block_with(parsed(), "TABLECELLMARK")].page == 3
    assert [s for s in pptx_corpus.LITERAL if s not in parsed().text] == []
    furniture = parsed().blocks[block_with(parsed(), "MASTERTEXTMARK")]
    assert (furniture.section, furniture.page) == (None, None)


def test_table_row_is_one_block_with_cells_kept_apart() -> None:
    row = parsed().blocks[block_with(parsed(), "TABLECELLMARK")].text
    assert row == "P-7 | TABLECELLMARK | CELLPARAONEMARK CELLPARATWOMARK"


def test_alternate_content_is_read_once_and_fallback_not() -> None:
    assert "ALTCONTENTFALLBACK" not in parsed().text and "MATHFALLBACK" not in parsed().text


def test_warnings_and_skipped_images_for_ocr() -> None:
    document, images = read_with_images(deck(), DEFAULT_LIMITS)
    assert document.warnings == ("2 images not read (no OCR)", "1 chart read as its titles only")
    assert [(i.pixels, i.page) for i in images] == [((40, 30), 4), ((20, 10), 4)]
    assert all(i.part.startswith("ppt/media/") and i.size > 0 for i in images)


def test_big_sample_reads_whole() -> None:
    text = read(pptx_corpus.big_sample(smoke=True).data, DEFAULT_LIMITS).text
    assert "Box 19 text." in text and "Notes of slide 19" in text and "r3c2 s19" in text


def test_macro_enabled_package_is_read_as_data() -> None:
    data = replaced(deck(), {"ppt/vbaProject.bin": b"\xd0\xcf\x11\xe0 macro bytes never run"})
    assert "BODYMARK" in read(data, DEFAULT_LIMITS).text


def test_groups_nested_within_the_parser_limit_are_read() -> None:
    deep = box("DEEPMARK")
    for _ in range(120):
        deep = group(deep)
    data = replaced(deck(), {"ppt/slides/slide1.xml": slide(deep)})
    assert "DEEPMARK" in read(data, DEFAULT_LIMITS).text


@pytest.mark.skipif(not HANDED.is_file(), reason=f"handed case not found at {HANDED}")
def test_handed_deck_yields_every_marker() -> None:
    document = read(HANDED.read_bytes(), DEFAULT_LIMITS)
    for marker in ("Corvalline", "Duskmarrow", "Wistlecombe", "Ambergrove"):
        assert marker in document.text
    assert document.blocks[block_with(document, "Wistlecombe")].text.startswith("Speaker notes: ")
    assert document.blocks[block_with(document, "Duskmarrow")].section == "Pump ratings"


# ---------------------------------------------------------------- broken and hostile packages


STRICT = b'<p:presentation xmlns:p="http://purl.oclc.org/ooxml/presentationml/main"/>'


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a ZIP"),
        (b"not a zip at all", "not a ZIP"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600, "encrypted PPTX or a legacy .ppt"),
        (zip_bytes({"word/document.xml": b"<w:document/>"}), "no presentation part"),
        (zip_bytes({"ppt/presentation.xml": b"<presentation>"}), "not well-formed XML"),
        (zip_bytes({"ppt/presentation.xml": b"<html/>"}), "not a PresentationML presentation"),
        (zip_bytes({"ppt/presentation.xml": b'<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>'}), "DOCTYPE"),
    ],
    ids=["empty", "text", "cfb", "docx", "malformed", "not-pml", "doctype"],
)
def test_broken_packages_are_corrupt(data: bytes, message: str) -> None:
    with pytest.raises(CorruptDocumentError, match=re.escape(message)):
        read(data, DEFAULT_LIMITS)


def test_truncated_package_is_corrupt() -> None:
    for cut in (0.3, 0.9):
        with pytest.raises(CorruptDocumentError):
            read(deck()[: int(len(deck()) * cut)], DEFAULT_LIMITS)


def test_malformed_slide_is_corrupt() -> None:
    with pytest.raises(CorruptDocumentError, match=r"slide1\.xml"):
        read(replaced(deck(), {"ppt/slides/slide1.xml": b"<p:sld"}), DEFAULT_LIMITS)


def test_strict_open_xml_is_refused_clearly() -> None:
    with pytest.raises(UnsupportedTypeError, match="Strict Open XML"):
        read(zip_bytes({"ppt/presentation.xml": STRICT}), DEFAULT_LIMITS)


def test_zip_bomb_is_a_parse_limit() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("ppt/presentation.xml", b" " * (20 * 1024 * 1024))
    with pytest.raises(ParseLimitError, match="PPTX entry"):
        read(buffer.getvalue(), DEFAULT_LIMITS)


def test_xml_nested_too_deep_is_a_parse_limit() -> None:
    deep = box("deep")
    for _ in range(300):
        deep = group(deep)
    with pytest.raises(ParseLimitError, match="levels of nesting"):
        read(replaced(deck(), {"ppt/slides/slide1.xml": slide(deep)}), DEFAULT_LIMITS)


def test_missing_slide_part_is_counted_not_fatal() -> None:
    document = read(replaced(deck(), {"ppt/slides/slide7.xml": None}), DEFAULT_LIMITS)
    assert "1 slide missing from the package" in document.warnings
    assert "NOTITLEMARK" not in document.text and "BODYMARK" in document.text
