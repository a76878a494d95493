"""parse_document over the whole shared corpus, plus decoding/normalization edge cases (no network)."""

from __future__ import annotations

import codecs
import io
import random
import subprocess
import sys
import textwrap
import time
import unicodedata
import zipfile
from pathlib import Path

import pytest

from shared.domain.errors import (
    CorruptDocumentError,
    IndexingError,
    NoTextError,
    PdfEncryptedError,
    UndecodableTextError,
    UnsupportedTypeError,
)
from shared.domain.normalize import normalize_text, reflow_plain_text
from task_service.pipeline.decode import decode_text, sniff_html_charset
from task_service.pipeline.parse import document_kind, ensure_parsers_ready, parse_text
from tests.support import CORPUS

REPO = Path(__file__).parents[2]
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")

# Every corpus file → a substring its text must contain, or the error it must raise.
EXPECTED: dict[str, str | type[IndexingError]] = {
    "DA-1p.pdf": "We arrived in the dead of night",
    "README.md": "A 10-K SEC filing in HTML format",
    "SOURCES.md": "Universal Declaration of Human Rights",
    # Hard-wrapped over two lines in the file: checks the paragraph reflow too.
    "book-war-and-peace-1225p.txt": "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes.",
    "codeblock.md": "Don't forget me this weekend!",
    "docx-tables.docx": "Header Col 1",
    "empty.txt": NoTextError,
    "eng_spa_mult.md": "Todos los seres humanos nacen libres e iguales en dignidad",
    "fake-html-cp1252.html": 'El niño comió paella con ñoquis. La señora dijo: "¡Qué rico!" y pagó 25,75 €.',
    "fake-html.html": "With sub-bullets!",
    "fake-text-all-whitespace.txt": NoTextError,
    "fake-text-utf-16.txt": "This is a test document to use for unit tests.",
    "fake-text.txt": "Doylestown, PA 18901",
    "handbook-1p.docx": "The United States Trustee appoints and supervises standing trustees",
    "korean-text-with-tables.pdf": "적립 제외 대상",
    "layout-parser-paper-fast.pdf": "A Unified Toolkit for Deep",
    "password.pdf": PdfEncryptedError,
    "reliance.pdf": "Integrated Annual Report 2021-22",
    "simple.docx": "These are a few of my favorite things:",
    "udhr-chinese-gbk.txt": "人人生而自由，在尊严和权利上一律平等。",
}


def corpus_bytes(name: str) -> bytes:
    return (CORPUS / name).read_bytes()


def assert_normalized(text: str) -> None:
    assert text and text == text.strip()
    assert "\x00" not in text and "\r" not in text and "\n\n\n" not in text
    assert unicodedata.is_normalized("NFC", text)
    assert all(line == line.rstrip() for line in text.split("\n"))


@needs_corpus
def test_expectations_cover_every_corpus_file() -> None:
    assert sorted(p.name for p in CORPUS.iterdir() if p.is_file()) == sorted(EXPECTED)


@needs_corpus
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file(name: str) -> None:
    expected = EXPECTED[name]
    if isinstance(expected, str):
        text = parse_text(corpus_bytes(name), name)
        assert expected in text
        assert_normalized(text)
    else:
        with pytest.raises(expected):
            parse_text(corpus_bytes(name), name)


@needs_corpus
def test_no_text_error_message() -> None:
    with pytest.raises(NoTextError, match="no extractable text"):
        parse_text(corpus_bytes("fake-text-all-whitespace.txt"), "fake-text-all-whitespace.txt")


@needs_corpus
def test_password_pdf_message_is_clear() -> None:
    with pytest.raises(PdfEncryptedError, match="password") as info:
        parse_text(corpus_bytes("password.pdf"), "password.pdf")
    assert info.value.error_code == "pdf_encrypted"


@needs_corpus
def test_cp1252_html_is_not_mojibake() -> None:
    # charset-normalizer alone guesses cp1250 here: ñ→ń, å→ĺ, ¡→ˇ.
    text = parse_text(corpus_bytes("fake-html-cp1252.html"), "fake-html-cp1252.html")
    for fragment in ("Die schöne Frau", "15,50 €", "L'été était très chaud", "Kvinnan åt köttbullar", "O João"):
        assert fragment in text
    assert not set("ńĺˇ\ufffd") & set(text)


@needs_corpus
def test_utf16_and_utf8_versions_give_the_same_text() -> None:
    utf16 = parse_text(corpus_bytes("fake-text-utf-16.txt"), "a.txt")
    assert utf16 == parse_text(corpus_bytes("fake-text.txt"), "b.txt")
    assert "- Hamburgers are delicious\n- Dogs are the best" in utf16  # list lines are not joined


@needs_corpus
def test_novel_parses_fast() -> None:
    data = corpus_bytes("book-war-and-peace-1225p.txt")
    started = time.perf_counter()
    text = parse_text(data, "book.txt")
    elapsed = time.perf_counter() - started
    assert elapsed < 5.0, f"novel took {elapsed:.2f} s"  # measured ≈0.7 s on the 2-core machine
    assert len(text) > 3_000_000
    assert "\n\n" in text and "Buonapartes. But I warn you" in text


@needs_corpus
@pytest.mark.parametrize("cut", [0.05, 0.3])
def test_truncated_pdf_is_corrupt(cut: float) -> None:
    data = corpus_bytes("layout-parser-paper-fast.pdf")
    with pytest.raises(CorruptDocumentError):
        parse_text(data[: int(len(data) * cut)], "truncated.pdf")


@pytest.mark.parametrize("data", [b"", b"%PDF-1.7\n\x00\xff garbage " * 20, random.Random(7).randbytes(4096)])
def test_garbage_pdf_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptDocumentError):
        parse_text(data, "garbage.pdf")


def _zip_without_word_parts() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "not a word document")
    return buffer.getvalue()


@pytest.mark.parametrize("data", [b"", b"not a zip at all", _zip_without_word_parts()])
def test_corrupt_docx(data: bytes) -> None:
    with pytest.raises(CorruptDocumentError):
        parse_text(data, "broken.docx")


@pytest.mark.parametrize("filename", ["virus.exe", "README", "old.wpd", "archive.pdf.zip", "drawing.odg", ".txt.bak"])
def test_unsupported_types(filename: str) -> None:
    with pytest.raises(UnsupportedTypeError) as info:
        parse_text(b"whatever", filename)
    assert info.value.error_code == "unsupported_type"


@pytest.mark.parametrize(
    ("filename", "kind"),
    [("A.PDF", "pdf"), ("x.Docx", "docx"), ("page.htm", "html"), ("notes.markdown", "md"), ("dir.v2/file.TXT", "txt")],
)
def test_document_kind_by_extension(filename: str, kind: str) -> None:
    assert document_kind(filename) == kind


def test_binary_txt_is_undecodable() -> None:
    with pytest.raises(UndecodableTextError):
        parse_text(random.Random(1).randbytes(3000), "blob.txt")


# ---------------------------------------------------------------- decoding


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (codecs.BOM_UTF8 + "héllo".encode(), "héllo"),
        (codecs.BOM_UTF16_BE + "héllo 世界".encode("utf-16-be"), "héllo 世界"),
        (codecs.BOM_UTF16_LE + "héllo 世界".encode("utf-16-le"), "héllo 世界"),
        (codecs.BOM_UTF32_LE + "héllo 😀".encode("utf-32-le"), "héllo 😀"),
        (codecs.BOM_UTF32_BE + "héllo 😀".encode("utf-32-be"), "héllo 😀"),
        (b"plain ascii", "plain ascii"),
        ("Größe € café".encode("cp1252"), "Größe € café"),
        ("café".encode("cp1252"), "café"),  # charset-normalizer alone says UTF-16-BE ("捡曩")
        ("L'été était très chaud cette année.".encode("cp1252"), "L'été était très chaud cette année."),
        ("Die schöne Frau, Größe, Übel, Äpfel.".encode("latin-1"), "Die schöne Frau, Größe, Übel, Äpfel."),
        ("人人生而自由，在尊严和权利上一律平等。".encode("gbk"), "人人生而自由，在尊严和权利上一律平等。"),
        ("Война и мир — роман Льва Толстого.".encode("cp1251"), "Война и мир — роман Льва Толстого."),
    ],
)
def test_decode_text(data: bytes, expected: str) -> None:
    assert decode_text(data) == expected


def test_stray_bytes_in_utf8_text_do_not_reject_the_document() -> None:
    data = ("Crème brûlée, naïve café — “quoted” " * 5).encode() + b"price 5\x80 fin. "
    text = decode_text(data)
    # the stray byte is read as windows-1252 (0x80 = "€"), the rest stays UTF-8
    assert text.startswith("Crème brûlée, naïve café — “quoted”") and text.endswith("price 5€ fin. ")


def test_lone_surrogates_and_nul_are_removed() -> None:
    data = codecs.BOM_UTF16_LE + b"A\x00\x00\xd8B\x00\x00\x00C\x00"  # A, lone high surrogate, B, NUL, C
    assert normalize_text(decode_text(data)) == "ABC"
    assert parse_text(data, "s.txt") == "ABC"


def test_html_meta_charset_is_honoured() -> None:
    html = '<html><head><meta charset="windows-1251"></head><body><p>Привет, мир</p></body></html>'
    data = html.encode("cp1251")
    assert sniff_html_charset(data) == "cp1251"
    assert parse_text(data, "ru.html") == "Привет, мир"


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        (b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">', "cp1252"),
        (b"<meta charset='GB2312'>", "gb18030"),
        (b'<meta charset="utf-16">', None),
        (b'<meta charset="no-such-charset">', None),
        (b"<p>no declaration</p>", None),
    ],
)
def test_sniff_html_charset(meta: bytes, expected: str | None) -> None:
    assert sniff_html_charset(b"<html><head>" + meta + b"</head></html>") == expected


# ---------------------------------------------------------------- normalization


def test_normalize_text() -> None:
    raw = "  Title\r\n\r\n\r\n\r\nLine\tone  with   spaces \rnext\x00 line\x0cafter\u2028break"
    raw += "\n  indented e\u0301  \n\n\n"
    assert normalize_text(raw) == "Title\n\nLine one with spaces\nnext line\n\nafter\nbreak\n  indented é"


def test_reflow_joins_hard_wraps_but_keeps_lists_and_cjk() -> None:
    text = "A line that was\nwrapped here.\n\nItems:\n- one\n- two\n2) three\n\n第一行中文\n第二行中文"
    assert reflow_plain_text(text) == (
        "A line that was wrapped here.\n\nItems:\n- one\n- two\n2) three\n\n第一行中文第二行中文"
    )


def test_reflow_keeps_one_line_per_paragraph_files() -> None:
    # Fewer than 10 % blank lines: each line is a paragraph (unstructured's auto grouper rule).
    text = "\n".join(f"Record {i}: value" for i in range(30))
    assert reflow_plain_text(text).split("\n\n") == [f"Record {i}: value" for i in range(30)]


@pytest.mark.parametrize("data", [b"\xef\xbb\xbf", b"\x00\x00\x00", "\u200b\u200d\ufeff \t".encode(), b"\r\n\r\n"])
def test_invisible_only_text_has_no_text(data: bytes) -> None:
    with pytest.raises(NoTextError):
        parse_text(data, "blank.txt")


def test_empty_html_and_markdown_have_no_text() -> None:
    with pytest.raises(NoTextError):
        parse_text(b"<html><body><p>  </p></body></html>", "empty.html")
    with pytest.raises(NoTextError):
        parse_text(b"   \n\n", "empty.md")


# ---------------------------------------------------------------- offline


def test_ensure_parsers_ready_is_idempotent_and_cheap() -> None:
    ensure_parsers_ready()
    ensure_parsers_ready()


@needs_corpus
def test_parsing_opens_no_network_connection() -> None:
    """In a fresh process (every reader imported for the first time), record every connect."""
    script = textwrap.dedent(
        f"""
        import socket
        attempts = []
        def refuse(self, address, *a, **k):
            attempts.append(repr(address))
            raise OSError("network disabled by test")
        def refuse_dns(host, *a, **k):
            attempts.append(repr(host))
            raise socket.gaierror("dns disabled by test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.getaddrinfo = refuse_dns
        from pathlib import Path
        from task_service.pipeline.parse import ensure_parsers_ready, parse_text
        ensure_parsers_ready()
        corpus = Path({str(CORPUS)!r})
        for name in ("simple.docx", "fake-html.html", "codeblock.md", "DA-1p.pdf", "fake-text.txt"):
            assert parse_text((corpus / name).read_bytes(), name)
        print("ATTEMPTS", attempts)
        """
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": "/tmp"}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ATTEMPTS []" in result.stdout, result.stdout
