"""ODP reader (``task_service.pipeline.readers.odf.odp``): the fidelity corpus, reading order, sections,
warnings and skipped pictures, and broken or hostile packages."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from shared.domain.errors import CorruptDocumentError, EncryptedDocumentError, ParseLimitError
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits
from task_service.pipeline.readers.odf import ods, odt
from task_service.pipeline.readers.odf.odp import read, read_with_images
from tests.fidelity import odp_corpus, zip_bytes

PARSED = read(odp_corpus.deck(), DEFAULT_LIMITS)


def block_with(document: ParsedDocument, marker: str) -> int:
    word = re.compile(rf"\b{re.escape(marker)}\b")
    found = [i for i, block in enumerate(document.blocks) if word.search(block.text)]
    assert len(found) == 1, f"{marker} in {len(found)} blocks"
    return found[0]


def test_every_marker_is_found_once() -> None:
    for marker in odp_corpus.MUST:
        block_with(PARSED, marker)


def test_reading_order_sections_and_literal_text() -> None:
    positions = [block_with(PARSED, marker) for marker in odp_corpus.ORDER]
    assert positions == sorted(positions)
    for marker, section in odp_corpus.SECTIONS.items():
        assert PARSED.blocks[block_with(PARSED, marker)].section == section
    assert [s for s in odp_corpus.LITERAL if s not in PARSED.text] == []
    assert PARSED.blocks[block_with(PARSED, "ODPCELLMARK")].text == "P-7 | ODPCELLMARK ODPCELLTWOMARK"
    assert PARSED.blocks[block_with(PARSED, "ODPHIDDENMARK")].page == 3


def test_warnings_and_skipped_images() -> None:
    document, images = read_with_images(odp_corpus.deck(), DEFAULT_LIMITS)
    assert document.warnings == ("1 image not read (no OCR)", "1 chart read as its titles only")
    assert [(i.part, i.pixels, i.page) for i in images] == [("Pictures/p1.png", (64, 48), 2)]


def test_big_sample_reads_whole() -> None:
    text = read(odp_corpus.big_sample(smoke=True).data, DEFAULT_LIMITS).text
    assert "Box 19 text." in text and "Notes of slide 19" in text and "r3c2 s19" in text


ENCRYPTED_MANIFEST = (
    b'<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
    b'<manifest:file-entry manifest:full-path="content.xml"><manifest:encryption-data/></manifest:file-entry>'
    b"</manifest:manifest>"
)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not a zip", "not a ZIP"),
        (odp_corpus.package("", mime="application/vnd.oasis.opendocument.text"), "another type"),
        (zip_bytes({"mimetype": odp_corpus.MIME.encode()}), "no presentation"),
        (zip_bytes({"content.xml": b"<office:document-content"}), "not well-formed XML"),
    ],
    ids=["text", "odt", "no-content", "malformed"],
)
def test_broken_packages_are_corrupt(data: bytes, message: str) -> None:
    with pytest.raises(CorruptDocumentError, match=re.escape(message)):
        read(data, DEFAULT_LIMITS)


@pytest.mark.parametrize("reader", [read, ods.read, odt.read], ids=["odp", "ods", "odt"])
def test_a_password_protected_odf_file_is_encrypted(reader: Callable[[bytes, ParseLimits], object]) -> None:
    data = zip_bytes({"content.xml": b"<x/>", "META-INF/manifest.xml": ENCRYPTED_MANIFEST})
    with pytest.raises(EncryptedDocumentError, match="password-protected"):
        reader(data, DEFAULT_LIMITS)


def test_zip_bomb_is_a_parse_limit() -> None:
    with pytest.raises(ParseLimitError, match="ODP entry"):
        read(zip_bytes({"content.xml": b" " * (20 * 1024 * 1024)}), DEFAULT_LIMITS)


def test_xml_nested_too_deep_is_a_parse_limit() -> None:
    deep = "<draw:g>" * 300 + "</draw:g>" * 300
    with pytest.raises(ParseLimitError, match="levels of nesting"):
        read(odp_corpus.package(f"<draw:page>{deep}</draw:page>"), DEFAULT_LIMITS)


def test_groups_nested_within_the_parser_limit_are_read() -> None:
    shape = '<draw:rect svg:x="1cm" svg:y="1cm"><text:p>DEEPMARK</text:p></draw:rect>'
    deep = "<draw:g>" * 200 + shape + "</draw:g>" * 200
    assert "DEEPMARK" in read(odp_corpus.package(f"<draw:page>{deep}</draw:page>"), DEFAULT_LIMITS).text
