"""E-mail readers (``task_service.pipeline.readers.mail.eml`` / ``msg``): the fidelity corpus, the body
choice, attachments and their sections, nesting limits, and bad input."""

from __future__ import annotations

import base64
import time

import pytest

from shared.domain.errors import CorruptDocumentError, NoTextError, ParseLimitError
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits
from task_service.pipeline.parse import attachment_reader, parse_document
from task_service.pipeline.readers.mail import eml, msg
from task_service.pipeline.readers.mail.common import Attachments
from task_service.pipeline.readers.plain import rtf
from tests.fidelity import Sample, mail_corpus
from tests.fidelity.msg_writer import Attachment, Message, build_msg

SAMPLES = mail_corpus.samples()


def _eml(data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    """The .eml reader as the dispatch calls it (attachments read under the same ``limits``)."""
    return eml.read(data, limits, attachment_reader(limits))


def _msg(data: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    return msg.read(data, limits, attachment_reader(limits))


def _read(sample: Sample) -> ParsedDocument:
    if sample.filename.endswith(".eml"):
        return _eml(sample.data)
    return _msg(sample.data)


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_every_marker_is_read(sample: Sample) -> None:
    text = _read(sample).text
    assert [m for m in sample.must if m not in text] == []
    for marker in mail_corpus.ONCE:
        assert text.count(marker) in (0, 1), marker


def test_attachment_markers_carry_their_section() -> None:
    sections = {}
    for sample in SAMPLES:
        for block in _read(sample).blocks:
            for marker in mail_corpus.SECTIONS:
                if marker in block.text:
                    sections[marker] = block.section
    assert {m: (s or "").split(" > ")[0] for m, s in sections.items()} == mail_corpus.SECTIONS


def test_header_block_comes_first() -> None:
    first = _read(SAMPLES[0]).blocks[0].text.split("\n")
    assert [line.split(":")[0] for line in first] == ["Subject", "From", "To", "Cc", "Date"]
    assert first[0] == "Subject: Plain SUBJECTMARK"


def test_msg_header_fields() -> None:
    sample = next(s for s in SAMPLES if s.name == "msg-plain")
    head = _msg(sample.data).blocks[0].text
    assert "From: Mia MSGFROMMARK <mia@example.org>" in head
    assert "To: Tom MSGTOMARK <tom@example.org>" in head
    assert "Date: Fri, 01 Mar 2024 12:00:00 +0000" in head


def test_warnings_count_what_was_not_read() -> None:
    eml_doc = _read(next(s for s in SAMPLES if s.name == "eml-attachments"))
    assert "1 attachment not read: a.zip" in eml_doc.warnings
    msg_doc = _read(next(s for s in SAMPLES if s.name == "msg-attachments"))
    assert "1 attachment not read: tool.exe" in msg_doc.warnings
    assert "1 inline image ignored" in msg_doc.warnings


def test_injected_attachment_reader_gets_name_bytes_and_depth() -> None:
    calls: list[tuple[str, bytes, int]] = []

    def reader(name: str, data: bytes, depth: int) -> ParsedDocument | None:
        calls.append((name, data, depth))
        return None

    eml.read(next(s for s in SAMPLES if s.name == "eml-attachments").data, DEFAULT_LIMITS, Attachments(reader))
    assert calls[0] == ("notes.txt", b"attached text ATTTXTMARK", 0)


def _nested_eml(levels: int) -> bytes:
    from email.message import EmailMessage

    inner = EmailMessage()
    inner["Subject"] = "level 0 DEEPESTMARK"
    inner.set_content("deepest body")
    for level in range(1, levels + 1):
        outer = EmailMessage()
        outer["Subject"] = f"level {level}"
        outer.set_content(f"body {level}")
        outer.add_attachment(inner)
        inner = outer
    return inner.as_bytes()


def _eml_with_csv(columns: int) -> bytes:
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = "quarterly figures"
    message["From"] = "a@example.org"
    message.set_content("the table is attached")
    header = ",".join(f"c{i}" for i in range(columns))
    row = ",".join(f"WIDEMARK{i}" for i in range(columns))
    message.add_attachment(f"{header}\n{row}\n".encode(), maintype="text", subtype="csv", filename="wide.csv")
    return message.as_bytes()


def test_an_attachment_is_parsed_under_the_configured_limits() -> None:
    """Issue 27: attachments were parsed under the default limits. A CSV attachment wider than
    the configured ``table_max_columns`` is refused as such (a warning naming the limit) while
    the message is read; the same attachment under the default limits is read."""
    data = _eml_with_csv(40)
    narrow = ParseLimits(table_max_columns=10)
    for doc in (_eml(data, narrow), parse_document(data, "figures.eml", narrow)):
        assert "WIDEMARK" not in doc.text and "quarterly figures" in doc.text
        assert any(w.startswith("attachment wide.csv not read:") and "TABLE_MAX_COLUMNS" in w for w in doc.warnings)
    assert "WIDEMARK39" in parse_document(data, "figures.eml").text


def test_shallow_excess_nesting_is_a_warning() -> None:
    doc = _eml(_nested_eml(5), ParseLimits(mail_max_depth=3))
    assert "DEEPESTMARK" not in doc.text and "level 2" in doc.text
    assert any("deeper than 3 levels (MAIL_MAX_DEPTH)" in w for w in doc.warnings)


def test_nesting_bomb_is_a_parse_limit() -> None:
    started = time.perf_counter()
    with pytest.raises(ParseLimitError, match="MAIL_MAX_NESTING"):
        _eml(_nested_eml(100))
    assert time.perf_counter() - started < 10


def test_msg_nesting_bomb_is_a_parse_limit() -> None:
    inner = Message(subject="deepest", body="x")
    for _ in range(100):
        inner = Message(subject="level", body="y", attachments=[Attachment("in.msg", message=inner)])
    with pytest.raises(ParseLimitError, match="MAIL_MAX_NESTING"):
        _msg(build_msg(inner))


def test_huge_header_line_is_cut_in_bounded_time() -> None:
    data = b"Subject: " + b"ab cd " * 1_000_000 + b"HEADTAILMARK\r\nFrom: a@b.c\r\n\r\nbody BODYMARK\r\n"
    started = time.perf_counter()
    doc = _eml(data)
    assert time.perf_counter() - started < 10
    assert "BODYMARK" in doc.text
    assert any("MAIL_MAX_HEADER_CHARS" in w for w in doc.warnings)


def test_truncated_mime_keeps_what_it_has() -> None:
    sample = next(s for s in SAMPLES if s.name == "eml-attachments")
    doc = _eml(sample.data[: len(sample.data) // 3])
    assert "BODYWITHATTMARK" in doc.text
    assert any("damaged MIME structure" in w for w in doc.warnings)


def test_bogus_base64_gives_a_warning_not_a_crash() -> None:
    head = b"Subject: b64\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    body = base64.b64encode(b"decoded words B64OKMARK")[:-3] + b"!!!*\r\n"
    doc = _eml(head + body)
    assert "Subject: b64" in doc.text
    assert any("damaged MIME structure" in w for w in doc.warnings)


def test_not_a_message() -> None:
    with pytest.raises(NoTextError):
        _eml(b"")
    with pytest.raises(CorruptDocumentError):
        _msg(b"not a compound file")
    with pytest.raises(CorruptDocumentError):
        _msg(build_msg(Message(subject="x"))[:700])


def test_rtf_body_plain_and_encapsulated_html() -> None:
    plain = rb"{\rtf1\ansi{\fonttbl{\f0 Arial;}}caf\'e9\par \u8364?x}"
    assert rtf.encapsulated_html(plain) is None
    assert [block.text for block in rtf.read(plain, DEFAULT_LIMITS).blocks] == ["café", "€x"]
    encapsulated = rb"{\rtf1\fromhtml1{\*\htmltag <p>}\htmlrtf{\htmlrtf0 Hi\htmlrtf}\htmlrtf0{\*\htmltag </p>}}"
    assert rtf.encapsulated_html(encapsulated) == "<p>Hi</p>"


def _alternative(plain: str, html: str) -> bytes:
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = "Newsletter"
    message.set_content(plain)
    message.add_alternative(html, subtype="html")
    return message.as_bytes()


def test_a_thin_plain_part_beside_the_html_text_keeps_both() -> None:
    # The plain part has more "words" (a tracking link's pieces) and none of the HTML's text (issue 29).
    plain = "View this e-mail in your browser: https://mail.example/v?id=a1b2c3&u=d4e5f6&list=g7h8&src=nl-2026-12"
    html = "<p>The Wexholm depot reopens on Monday; the Kasprzak shuttle runs hourly.</p>"
    text = _eml(_alternative(plain, html)).text
    assert "Wexholm" in text and "Kasprzak" in text and "View this e-mail" in text
    assert text.index("View this e-mail") < text.index("Wexholm")  # plain first


def test_two_copies_of_one_body_are_read_once_the_richer() -> None:
    plain = "The Wexholm depot reopens on Monday.\nSee https://depot.example/wexholm"
    html = "<p>The <b>Wexholm</b> depot reopens on Monday, and the Kasprzak shuttle runs hourly.</p>"
    text = _eml(_alternative(plain, html)).text
    assert text.count("Wexholm") == 1 and "Kasprzak" in text
