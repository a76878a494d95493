"""DOCX reader (``task_service.pipeline.readers.office.docx``): the fidelity corpus, the handed cases, the shared corpus
(nothing unstructured found may be lost), sections, warnings, and broken packages."""

from __future__ import annotations

import io
import json
import re
import unicodedata
import zipfile
from pathlib import Path

import pytest

from shared.domain.errors import CorruptDocumentError, ParseLimitError, UnsupportedTypeError
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.parse import parse_document, parse_text
from task_service.pipeline.readers.office.docx import extract_docx
from tests.fidelity import Sample, docx_corpus, zip_bytes

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT.parent / "shared" / "cases" / "extraction"
CORPUS = ROOT.parent / "shared" / "corpus"
# Word sets of the text unstructured 0.27 partition_docx gave for the corpus DOCX files (after
# normalize_text), frozen when unstructured was replaced: every word must still come out.
FROZEN_WORDS = Path(__file__).resolve().parents[1] / "fidelity" / "docx_unstructured_words.json"

SAMPLES = {sample.name: sample for sample in docx_corpus.samples()}
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
_MC = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'


def package(body: str, extra: dict[str, bytes] | None = None, root_attrs: str = "") -> bytes:
    """A minimal DOCX (no _rels: the reader falls back to word/document.xml) with ``body`` XML."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", f"<w:document {W} {root_attrs}><w:body>{body}</w:body></w:document>")
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return buffer.getvalue()


def block_with(parsed: ParsedDocument, marker: str) -> int:
    found = [i for i, block in enumerate(parsed.blocks) if marker in block.text]
    assert len(found) == 1, f"{marker} in {len(found)} blocks"
    return found[0]


# ---------------------------------------------------------------- fidelity corpus


@pytest.mark.parametrize("sample", SAMPLES.values(), ids=SAMPLES.keys())
def test_every_marker_is_found_and_no_forbidden_one(sample: Sample) -> None:
    text = parse_text(sample.data, sample.filename)
    assert [m for m in sample.must if m not in text] == []
    assert [m for m in sample.must_not if m in text] == []


@pytest.mark.parametrize("sample", [s for s in SAMPLES.values() if s.sections], ids=lambda s: s.name)
def test_sections(sample: Sample) -> None:
    parsed = parse_document(sample.data, sample.filename)
    got = {marker: parsed.blocks[block_with(parsed, marker)].section for marker in sample.sections}
    assert got == sample.sections


def own_token(text: str, marker: str) -> bool:
    """Whether ``marker`` occurs as a token of its own both for PostgreSQL's ``simple`` parser and for
    BERT's pre-tokenizer: bounded by whitespace, Unicode punctuation or ASCII punctuation other than the
    characters PostgreSQL keeps inside file paths, hosts and e-mail addresses (``/``, ``@``, ``.`` or
    ``:`` before or after a letter or digit)."""
    def separates(index: int, beyond: int) -> bool:
        if not 0 <= index < len(text):
            return True
        ch = text[index]
        if ch in "/@":
            return False
        if ch in ".:":
            return not (0 <= beyond < len(text) and text[beyond].isalnum())
        return ch.isspace() or unicodedata.category(ch)[0] == "P" or (ch.isascii() and not ch.isalnum())

    return any(separates(m.start() - 1, m.start() - 2) and separates(m.end(), m.end() + 1)
               for m in re.finditer(re.escape(marker), text))


@pytest.mark.parametrize("sample", SAMPLES.values(), ids=SAMPLES.keys())
def test_every_marker_is_a_token_of_its_own(sample: Sample) -> None:
    text = parse_text(sample.data, sample.filename)
    assert [m for m in sample.must if not own_token(text, m)] == []


def test_list_items_begin_with_the_label_word_shows() -> None:
    parsed = parse_document(SAMPLES["docx-numbering"].data, "n.docx")
    got = {marker: parsed.blocks[block_with(parsed, marker)].text[: len(label)]
           for marker, label in docx_corpus.LABELS.items()}
    assert got == docx_corpus.LABELS


def test_equations_read_as_linear_text() -> None:
    text = parse_text(SAMPLES["docx-equations"].data, "e.docx")
    assert [literal for literal in docx_corpus.MATH_LITERAL if literal not in text] == []


def test_heading_block_carries_the_path_ending_with_itself() -> None:
    parsed = parse_document(SAMPLES["docx-structure"].data, "s.docx")
    linux = next(b for b in parsed.blocks if b.text == "Linux")
    assert linux.section == "Guide > Install > Linux"


def test_text_box_stored_twice_comes_out_once() -> None:
    text = parse_text(SAMPLES["docx-text-boxes"].data, "b.docx")
    for marker in docx_corpus.EXACTLY_ONCE:
        assert text.count(marker) == 1


def test_special_characters() -> None:
    text = parse_text(SAMPLES["docx-characters"].data, "c.docx")
    for left, right in docx_corpus.SEPARATED:
        assert re.search(rf"{left}\s+{right}", text), (left, right)
    for literal in docx_corpus.LITERAL:
        assert literal in text


def test_table_rows_and_nested_tables_are_not_duplicated() -> None:
    parsed = parse_document(SAMPLES["docx-structure"].data, "s.docx")
    texts = [b.text for b in parsed.blocks]
    assert "TABLECELLMARK port | 8080" in texts
    assert "NESTEDTABLEMARK inner | value" in texts
    assert parsed.text.count("NESTEDTABLEMARK") == 1


def test_headers_and_footers_come_last_without_section() -> None:
    parsed = parse_document(SAMPLES["docx-structure"].data, "s.docx")
    last_body = block_with(parsed, "OUTLINEMARK")
    for marker in ("HEADERMARK", "FOOTERMARK", "FIRSTPAGEMARK"):
        index = block_with(parsed, marker)
        assert index > last_body and parsed.blocks[index].section is None


def test_identical_header_paragraphs_are_kept_once() -> None:
    rels = (
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="h1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/header" '
        'Target="header1.xml"/><Relationship Id="h2" '
        'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/header" Target="header2.xml"/>'
        "</Relationships>"
    )
    header = f"<w:hdr {W}><w:p><w:r><w:t>ACME confidential</w:t></w:r></w:p></w:hdr>".encode()
    r_ns = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    refs = f'<w:headerReference xmlns:r="{r_ns}" r:id="{{}}"/>'
    body = (f'<w:p><w:pPr><w:sectPr>{refs.format("h1")}</w:sectPr></w:pPr><w:r><w:t>One</w:t></w:r></w:p>'
            f"<w:p><w:r><w:t>Two</w:t></w:r></w:p><w:sectPr>{refs.format('h2')}</w:sectPr>")
    data = package(body, {"word/_rels/document.xml.rels": rels.encode(), "word/header1.xml": header,
                          "word/header2.xml": header})
    assert [b.text for b in extract_docx(data).blocks] == ["One", "Two", "ACME confidential"]


def test_direct_outline_level_overrides_the_style() -> None:
    rels = (
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="s" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" '
        'Target="styles.xml"/></Relationships>'
    )
    styles = (f'<w:styles {W}><w:style w:type="paragraph" w:styleId="H1"><w:name w:val="heading 1"/></w:style>'
              '<w:style w:type="paragraph" w:styleId="Sub"><w:basedOn w:val="H1"/></w:style></w:styles>')
    body = "".join(
        f'<w:p><w:pPr><w:pStyle w:val="{style}"/>{direct}</w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>'
        for style, direct, text in [("H1", "", "Top"), ("H1", '<w:outlineLvl w:val="9"/>', "NOTAHEADINGMARK"),
                                    ("Sub", "", "Second"), ("Normal", '<w:outlineLvl w:val="1"/>', "Third")]
    )
    blocks = extract_docx(package(body, {"word/_rels/document.xml.rels": rels.encode(),
                                         "word/styles.xml": styles.encode()})).blocks
    assert [b.section for b in blocks] == ["Top", "Top", "Second", "Second > Third"]


def test_strict_open_xml_is_refused_clearly() -> None:
    strict = '<w:document xmlns:w="http://purl.oclc.org/ooxml/wordprocessingml/main"><w:body/></w:document>'
    with pytest.raises(UnsupportedTypeError, match="Strict Open XML"):
        extract_docx(zip_bytes({"word/document.xml": strict.encode()}))


def test_warnings() -> None:
    assert parse_document(SAMPLES["docx-structure"].data, "s.docx").warnings == (
        "2 images ignored (too small for text, unreadable, or over OCR_MAX_PAGES)",)
    notes = parse_document(SAMPLES["docx-notes-objects"].data, "n.docx")
    assert notes.warnings == ("1 chart not read", "1 embedded object (OLE) not read", "1 comment not indexed")
    assert docx_corpus.COMMENT_MARKER not in notes.text


def test_alternate_content_falls_back_when_the_choice_is_not_understood() -> None:
    body = (
        f'<w:p><w:r><mc:AlternateContent {_MC} xmlns:x="urn:unknown"><mc:Choice Requires="x"><w:t>CHOICEMARK</w:t>'
        "</mc:Choice><mc:Fallback><w:t>FALLBACKMARK</w:t></mc:Fallback></mc:AlternateContent></w:r></w:p>"
    )
    assert extract_docx(package(body)).text == "FALLBACKMARK"


def test_symbols() -> None:
    syms = "".join(f'<w:sym w:font="{font}" w:char="{char}"/>' for font, char in
                   [("Symbol", "F0B0"), ("Wingdings", "F0FC"), ("Arial", "20AC"), ("Symbol", "zz")])
    assert extract_docx(package(f"<w:p><w:r><w:t>T</w:t>{syms}</w:r></w:p>")).text == "T°€"


def test_big_sample_reads_whole() -> None:
    sample = docx_corpus.big_sample(smoke=True)
    text = extract_docx(sample.data).text
    assert "Paragraph 99 lorem" in text and "Box 95 text." in text and "Deleted words" not in text


# ---------------------------------------------------------------- handed cases and the shared corpus


CASE_MARKERS = {
    "content-controls.docx": (("CELLPLAINMARK", "NESTEDCELLMARK", "SDTBLOCKMARK", "SDTCELLMARK"), ()),
    "revisions-and-fields.docx": (("TRACKINSMARK", "FIELDSIMPLEMARK", "SMARTTAGMARK", "CUSTOMXMLMARK"),
                                  ("DELTEXTMARK",)),
}


@pytest.mark.skipif(not CASES.is_dir(), reason=f"cases not found at {CASES}")
@pytest.mark.parametrize("name", sorted(CASE_MARKERS))
def test_handed_cases(name: str) -> None:
    text = parse_text((CASES / name).read_bytes(), name)
    must, must_not = CASE_MARKERS[name]
    assert [m for m in must if m not in text] == []
    assert [m for m in must_not if m in text] == []


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")
@pytest.mark.parametrize("name", ["simple.docx", "docx-tables.docx", "handbook-1p.docx"])
def test_no_word_unstructured_found_is_lost(name: str) -> None:
    before = set(json.loads(FROZEN_WORDS.read_text(encoding="utf-8"))[name])
    after = set(re.findall(r"\w+", parse_text((CORPUS / name).read_bytes(), name)))
    assert before - after == set()


# ---------------------------------------------------------------- broken packages


def _corrupt_entry() -> bytes:
    """A package whose word/document.xml deflate stream is garbage (the ZIP directory is intact)."""
    data = bytearray(package("<w:p><w:r><w:t>" + "x y z " * 2000 + "</w:t></w:r></w:p>"))
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("word/document.xml")
    start = info.header_offset + 30 + len(info.filename)
    data[start: start + info.compress_size] = b"\xff" * info.compress_size
    return bytes(data)


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">]>'
    f"<w:document {W}><w:body><w:p><w:r><w:t>&lol2;</w:t></w:r></w:p></w:body></w:document>"
).encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not a ZIP"),
        (b"not a zip at all", "not a ZIP"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600, "encrypted DOCX or a legacy .doc"),
        (zip_bytes({"hello.txt": b"not a word document"}), "no main document part"),
        (zip_bytes({"xl/workbook.xml": b"<workbook/>"}), "not a Word file"),
        (zip_bytes({"word/document.xml": f"<w:document {W}><w:body><w:p>".encode()}), "not well-formed XML"),
        (zip_bytes({"word/document.xml": b"<w:document><w:body>"}), "Namespace prefix w on document is not defined"),
        (zip_bytes({"word/document.xml": b"<html><body>hi</body></html>"}), "not a WordprocessingML document"),
        (zip_bytes({"word/document.xml": BILLION_LAUGHS}), "DOCTYPE"),
        (_corrupt_entry(), "cannot be read"),
    ],
    ids=["empty", "text", "cfb", "no-word", "xlsx", "malformed", "no-namespace", "not-wordml", "doctype",
         "bad-deflate"],
)
def test_broken_packages_are_corrupt(data: bytes, message: str) -> None:
    with pytest.raises(CorruptDocumentError, match=re.escape(message)):
        extract_docx(data)
    with pytest.raises(CorruptDocumentError):
        parse_text(data, "broken.docx")


def test_damaged_zip_directory_is_corrupt() -> None:
    data = bytearray(SAMPLES["docx-structure"].data)
    central = data.rindex(b"PK\x01\x02")  # last central directory entry: "version needed" = 25.0
    data[central + 6] = 250
    with pytest.raises(CorruptDocumentError, match="not a ZIP package"):
        parse_text(bytes(data), "damaged.docx")


def test_truncated_package_is_corrupt() -> None:
    data = SAMPLES["docx-structure"].data
    for cut in (0.3, 0.9):
        with pytest.raises(CorruptDocumentError):
            parse_text(data[: int(len(data) * cut)], "truncated.docx")


def test_xml_nested_too_deep_is_a_parse_limit() -> None:
    deep = "<w:sdt><w:sdtContent>" * 200 + "<w:p><w:r><w:t>deep</w:t></w:r></w:p>" + "</w:sdtContent></w:sdt>" * 200
    with pytest.raises(ParseLimitError, match="levels of nesting"):
        extract_docx(package(deep))


def test_nesting_within_the_parser_limit_is_read() -> None:
    deep = "<w:sdt><w:sdtContent>" * 120 + "<w:p><w:r><w:t>DEEPMARK</w:t></w:r></w:p>" + "</w:sdtContent></w:sdt>" * 120
    assert extract_docx(package(deep)).text == "DEEPMARK"


def test_huge_text_node_is_a_parse_limit() -> None:
    with pytest.raises(ParseLimitError, match="per text node"):
        extract_docx(package("<w:p><w:r><w:t>" + "A" * 10_500_000 + "</w:t></w:r></w:p>"))
