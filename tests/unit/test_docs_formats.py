"""EPUB, ODT, RTF, JSON/JSONL and XML readers (``task_service.pipeline.readers``): the fidelity corpus
(every marker, sections), spacing, and bad input (corrupt ZIP, bombs, deep nesting, DRM)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from shared.domain.errors import CorruptDocumentError, EncryptedDocumentError, ParseLimitError
from shared.domain.normalize import normalize_text
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits
from task_service.pipeline.readers.odf import odt
from task_service.pipeline.readers.plain import jsondoc, rtf, xml
from task_service.pipeline.readers.web import epub
from tests.fidelity import Sample, docs_corpus, zip_bytes

Reader = Callable[[bytes, ParseLimits], ParsedDocument]
READERS: dict[str, Reader] = {"epub": epub.read, "odt": odt.read, "rtf": rtf.read, "json": jsondoc.read,
                              "xml": xml.read}
SAMPLES = [(kind, s) for kind in docs_corpus.KINDS for s in docs_corpus.samples(kind)]


def text_of(kind: str, data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> str:
    return normalize_text(READERS[kind](data, limits).text)


def block_with(parsed: ParsedDocument, marker: str) -> int:
    found = [i for i, block in enumerate(parsed.blocks) if marker in block.text]
    assert len(found) == 1, f"{marker} in {len(found)} blocks"
    return found[0]


# ---------------------------------------------------------------- fidelity corpus


@pytest.mark.parametrize(("kind", "sample"), SAMPLES, ids=[s.name for _, s in SAMPLES])
def test_every_marker_is_found_and_no_forbidden_one(kind: str, sample: Sample) -> None:
    text = text_of(kind, sample.data)
    assert [m for m in sample.must if m not in text] == []
    assert [m for m in sample.must_not if m in text] == []


@pytest.mark.parametrize(("kind", "sample"), [(k, s) for k, s in SAMPLES if s.sections],
                         ids=[s.name for _, s in SAMPLES if s.sections])
def test_sections(kind: str, sample: Sample) -> None:
    parsed = READERS[kind](sample.data, DEFAULT_LIMITS)
    got = {marker: parsed.blocks[block_with(parsed, marker)].section for marker in sample.sections}
    assert got == sample.sections


def test_odt_spacing_elements_never_glue_words() -> None:
    text = odt.read(docs_corpus.odt(docs_corpus.ODT_BODY), DEFAULT_LIMITS).text
    for left, right in docs_corpus.ODT_SEPARATED:
        assert re.search(rf"{left}\s+{right}", text), (left, right)
    assert "ODTBREAKRIGHTMARK   ODTSCMARK" in text  # text:s text:c="3"


def test_odt_reading_order_notes_after_their_paragraph_and_furniture_last() -> None:
    parsed = odt.read(docs_corpus.odt(docs_corpus.ODT_BODY), DEFAULT_LIMITS)
    order = [block_with(parsed, m) for m in ("ODTNOTEREFMARK", "ODTFOOTNOTEMARK", "ODTENDNOTEMARK", "ODTHEADERMARK")]
    assert order == sorted(order)
    assert block_with(parsed, "ODTHEADERMARK") >= len(parsed.blocks) - 2
    assert parsed.warnings == ("1 image ignored (no OCR)",)


def test_rtf_table_row_is_one_block_and_tab_line_kept() -> None:
    parsed = rtf.read(docs_corpus.RTF_DOC, DEFAULT_LIMITS)
    assert parsed.blocks[block_with(parsed, "RTFCELLAMARK")].text == "RTFCELLAMARK | RTFCELLBMARK"
    assert "RTFTABLEFTMARK\tRTFTABRIGHTMARK\nRTFLINERIGHTMARK" in parsed.text


def test_json_values_carry_their_key_path_and_leaves_of_one_object_share_a_block() -> None:
    data = json.dumps(docs_corpus.JSON_DOC).encode()
    parsed = jsondoc.read(data, DEFAULT_LIMITS)
    for line in docs_corpus.JSON_PATHS:
        assert line in parsed.text
    record = parsed.blocks[block_with(parsed, "JSONNOTEMARK")]
    assert record.text == "readings[0].note: JSONNOTEMARK\nreadings[0].value: 4.5\nreadings[0].ok: true"
    assert record.section == "readings"


def test_jsonl_bad_line_is_a_warning_not_a_failure() -> None:
    parsed = jsondoc.read(b'{"a": "ONE"}\n\n{oops\n{"a": "TWO"}\n', DEFAULT_LIMITS)
    assert [b.text for b in parsed.blocks] == ["line 1.a: ONE", "line 4.a: TWO"]
    assert parsed.warnings == ("1 line(s) not valid JSON skipped (line 3)",)
    assert jsondoc.read_lines(b'{"a": 1}', DEFAULT_LIMITS).blocks[0].text == "line 1.a: 1"


def test_json_legacy_encoding_is_decoded_with_a_warning() -> None:
    parsed = jsondoc.read('{"name": "Müller café"}'.encode("utf-16"), DEFAULT_LIMITS)
    assert parsed.blocks[0].text == "name: Müller café"


def test_xml_record_fields_are_grouped_and_mixed_content_is_one_block() -> None:
    parsed = xml.read(docs_corpus.XML_DOC, DEFAULT_LIMITS)
    book = parsed.blocks[block_with(parsed, "XMLTITLEMARK")]
    assert book.text == "title: Attribute XMLATTRMARK\ntitle: XMLTITLEMARK\nauthor: XMLNSMARK"
    assert book.section == "catalog > book"
    assert normalize_text(parsed.blocks[block_with(parsed, "XMLEMMARK")].text) == (
        "Mixed XMLMIXEDMARK XMLEMMARK tail XMLTAILMARK"
    )


def test_epub_book_title_once_and_script_dropped() -> None:
    parsed = epub.read(docs_corpus.samples("epub")[0].data, DEFAULT_LIMITS)
    assert sum(b.text == "BOOKTITLEMARK" for b in parsed.blocks) == 1
    assert parsed.blocks[0].text == "BOOKTITLEMARK"


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("kind", ["epub", "odt"])
def test_corrupt_zip_is_a_corrupt_document(kind: str) -> None:
    good = docs_corpus.samples(kind)[0].data
    with pytest.raises(CorruptDocumentError):
        READERS[kind](good[: len(good) // 2], DEFAULT_LIMITS)
    with pytest.raises(CorruptDocumentError):
        READERS[kind](b"PK\x03\x04 not really a zip", DEFAULT_LIMITS)


@pytest.mark.parametrize("kind", ["epub", "odt"])
def test_zip_bomb_is_refused_before_inflating(kind: str) -> None:
    bomb = zip_bytes({"content.xml": b"\0" * 50_000_000, "META-INF/container.xml": b"<x/>"})
    with pytest.raises(ParseLimitError, match="inflates"):
        READERS[kind](bomb, DEFAULT_LIMITS)


def test_epub_without_container_or_package_is_corrupt() -> None:
    with pytest.raises(CorruptDocumentError, match=r"container\.xml"):
        epub.read(zip_bytes({"mimetype": "application/epub+zip"}), DEFAULT_LIMITS)
    container = docs_corpus._CONTAINER
    with pytest.raises(CorruptDocumentError, match=r"package document"):
        epub.read(zip_bytes({"META-INF/container.xml": container}), DEFAULT_LIMITS)


def _with_encryption(algorithm: str, uri: str) -> bytes:
    chapters = [("c.xhtml", "C", "<p>EPUBDRMMARK</p>")]
    encryption = (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        f'<enc:EncryptionMethod Algorithm="{algorithm}"/><enc:CipherData><enc:CipherReference URI="{uri}"/>'
        "</enc:CipherData></enc:EncryptedData></encryption>"
    )
    return docs_corpus.epub(chapters, extra={"META-INF/encryption.xml": encryption})


def test_drm_epub_is_encrypted_but_font_obfuscation_is_read() -> None:
    with pytest.raises(EncryptedDocumentError) as caught:
        epub.read(_with_encryption("http://www.w3.org/2001/04/xmlenc#aes128-cbc", "OEBPS/text/c.xhtml"),
                  DEFAULT_LIMITS)
    assert caught.value.error_code == "encrypted"
    fonts = _with_encryption("http://www.idpf.org/2008/embedding", "OEBPS/fonts/a.otf")
    assert "EPUBDRMMARK" in epub.read(fonts, DEFAULT_LIMITS).text


def test_password_protected_odt_is_encrypted() -> None:
    with pytest.raises(EncryptedDocumentError):
        odt.read(docs_corpus.odt("<text:p>x</text:p>", encrypted=True), DEFAULT_LIMITS)


def test_odt_without_text_body_is_corrupt() -> None:
    with pytest.raises(CorruptDocumentError, match="office:text"):
        odt.read(zip_bytes({"content.xml": f"<office:document-content {docs_corpus._ODF_NS}><office:body>"
                                      "<office:spreadsheet/></office:body></office:document-content>"}),
                 DEFAULT_LIMITS)


_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10))
    + "]><lolz>&lol9;</lolz>"
).encode()


def test_billion_laughs_is_a_parse_limit_not_a_memory_blow_up() -> None:
    with pytest.raises(ParseLimitError, match="amplification"):
        xml.read(_LAUGHS, DEFAULT_LIMITS)
    content = _LAUGHS.replace(b"<lolz>&lol9;</lolz>", b"<office:document-content/>")
    with pytest.raises((ParseLimitError, CorruptDocumentError)):
        odt.read(zip_bytes({"content.xml": content}), DEFAULT_LIMITS)


def test_xml_external_entities_are_never_read() -> None:
    data = b'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><a>before &x; after</a>'
    parsed = xml.read(data, DEFAULT_LIMITS)
    assert "root:" not in parsed.text
    assert "before" in parsed.text and "after" in parsed.text


def test_xml_deep_nesting_and_malformed_input() -> None:
    with pytest.raises(ParseLimitError):
        xml.read(b"<a>" * 300 + b"x" + b"</a>" * 300, DEFAULT_LIMITS)
    with pytest.raises(ParseLimitError, match="STRUCTURED_MAX_DEPTH"):
        xml.read(b"<a>" * 30 + b"x" + b"</a>" * 30, ParseLimits(structured_max_depth=20))
    with pytest.raises(CorruptDocumentError):
        xml.read(b"<a><b></a>", DEFAULT_LIMITS)


def test_json_nesting_is_bounded() -> None:
    hundred = b'{"a":' * 100 + b'"DEEPMARK"' + b"}" * 100
    assert "DEEPMARK" in jsondoc.read(hundred, DEFAULT_LIMITS).text
    with pytest.raises(ParseLimitError, match="STRUCTURED_MAX_DEPTH"):
        jsondoc.read(b"[" * 500 + b"1" + b"]" * 500, DEFAULT_LIMITS)
    with pytest.raises(ParseLimitError):
        jsondoc.read(b"[" * 100_000 + b"]" * 100_000, DEFAULT_LIMITS)


def test_json_huge_array_is_bounded_by_the_value_limit() -> None:
    data = json.dumps(list(range(10_000))).encode()
    assert len(jsondoc.read(data, DEFAULT_LIMITS).blocks) > 1  # grouped, not one giant block
    with pytest.raises(ParseLimitError, match="STRUCTURED_MAX_VALUES"):
        jsondoc.read(data, ParseLimits(structured_max_values=1_000))


def test_json_that_is_neither_json_nor_lines_is_corrupt() -> None:
    with pytest.raises(CorruptDocumentError):
        jsondoc.read(b"{not json", DEFAULT_LIMITS)
    with pytest.raises(CorruptDocumentError):
        jsondoc.read(b"{not json\nnor this\n", DEFAULT_LIMITS)


def test_rtf_bad_input() -> None:
    with pytest.raises(CorruptDocumentError):
        rtf.read(b"plain text, not RTF", DEFAULT_LIMITS)
    with pytest.raises(ParseLimitError):
        rtf.read(b"{\\rtf1 " + b"{" * 5_000 + b"x" + b"}" * 5_000 + b"}", DEFAULT_LIMITS)
    unbalanced = rtf.read(b"{\\rtf1 UNCLOSEDMARK {\\b more}}}}", DEFAULT_LIMITS)
    assert "UNCLOSEDMARK" in unbalanced.text
    out_of_range = rtf.read(b"{\\rtf1 A\\u-70000?B\\u9999999999?C}", DEFAULT_LIMITS)  # no chr() crash
    assert out_of_range.text == "A\uee90B\ufffdC"
