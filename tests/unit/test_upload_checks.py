"""Upload hardening, pure parts (no network): file names, type sniffing, the package check, and
the streaming multipart receiver against an in-memory ``ObjectWriter`` (tests/fakes.py)."""

from __future__ import annotations

import hashlib
import io
import random
import re
import unicodedata
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from knowledge_service import upload
from knowledge_service.upload import sniff
from knowledge_service.upload.filenames import clean_filename, decode_form_filename
from shared.domain import formats
from shared.domain.errors import (
    MalformedUploadError,
    MissingFileError,
    StorageUnavailableError,
    UnsupportedUploadError,
    UploadTooLargeError,
)
from shared.domain.formats import by_kind, extension
from shared.domain.records import NewContent
from tests.fakes import FakeObjectWriter

DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

# ------------------------------------------------------------------ file names


@pytest.mark.parametrize(("raw", "clean"), [
    ("报告[2023]#1 50%+.pdf", "报告[2023]#1 50%+.pdf"),
    ("a|b?.txt", "a|b?.txt"),
    ("../../etc/passwd", "../../etc/passwd"),
    ("nul\x00byte.txt", "nulbyte.txt"),
    ("tab\tand\r\nnewline\x7f.md", "tabandnewline.md"),
    ("  spaced.txt  ", "spaced.txt"),
    ("evil\u202egnp.exe", "evilgnp.exe"),
    ("line\u2028sep.txt", "linesep.txt"),
    ("", "upload"),
    ("\x00\x01 \t", "upload"),
    (None, "upload"),
])
def test_clean_filename(raw: str | None, clean: str) -> None:
    assert clean_filename(raw) == clean


def test_clean_filename_is_nfc() -> None:
    decomposed = "cafe\u0301.txt"
    assert clean_filename(decomposed) == "café.txt"
    assert unicodedata.is_normalized("NFC", clean_filename("e\x00\u0301.txt"))


def test_long_name_is_capped_at_255_bytes_keeping_the_extension() -> None:
    name = "x" * 296 + ".pdf"
    assert len(name.encode()) == 300
    out = clean_filename(name)
    assert len(out.encode()) == 255 and out.endswith(".pdf") and out.startswith("xxx")


def test_long_multibyte_name_is_cut_on_a_character_boundary() -> None:
    out = clean_filename("报" * 120 + ".docx")  # 365 bytes
    assert len(out.encode()) <= 255 and out.endswith(".docx")
    assert set(out[:-5]) == {"报"}


def test_long_suffix_is_not_kept_whole() -> None:
    out = clean_filename("a." + "b" * 400)
    assert len(out.encode()) <= 255 and out.startswith("a.bbb")


@pytest.mark.parametrize(("raw", "text"), [
    (b"a%22quoted%22.txt", 'a"quoted".txt'),
    (b"nul%00.txt", "nul\x00.txt"),  # httpx escapes C0 controls; clean_filename removes it
    (b"50%+ 100%20.pdf", "50%+ 100%20.pdf"),  # not one of the form escapes: as given
    ("报告.pdf".encode(), "报告.pdf"),
    (b"caf\xe9.txt", "café.txt"),  # not UTF-8: read as Latin-1
])
def test_decode_form_filename(raw: bytes, text: str) -> None:
    assert decode_form_filename(raw) == text


@pytest.mark.parametrize(("name", "ext"), [
    ("a.PDF", "pdf"), ("../../etc/passwd", ""), ("dir.d/file", ""), (".bashrc", ""), ("a.tar.gz", "gz"),
    ("C:\\x\\y.docx", "docx"), ("report.pdf ", "pdf "),
])
def test_extension_follows_the_parsers_rule(name: str, ext: str) -> None:
    assert extension(name) == ext


def test_allowed_extensions_are_the_parsers() -> None:
    from task_service.pipeline.parse import SUPPORTED_EXTENSIONS

    assert set(SUPPORTED_EXTENSIONS) == set(formats.accepted_extensions())


# ------------------------------------------------------------------ sniffing

PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n" + b"\x00\x01" * 10


def _zip(names: list[str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n in names:
            z.writestr(n, f"<x>{n}</x>" * 50)
    return buf.getvalue()


DOCX = _zip(["[Content_Types].xml", "word/document.xml", "word/styles.xml"])


@pytest.mark.parametrize(("name", "head", "kind"), [
    ("a.pdf", PDF, "pdf"),
    ("a.pdf", b"garbage before header\n" + PDF, "pdf"),  # %PDF- within the first 1024 bytes
    ("a.docx", DOCX, "docx"),
    ("a.txt", b"plain text", "txt"),
    ("a.txt", b"", "txt"),  # empty: accepted, the worker answers no_text
    ("a.md", b"# Title\n", "md"),
    ("a.markdown", b"# Title\n", "md"),
    ("a.htm", b"<p>hi</p>", "html"),
    ("a.txt", "\ufeffUTF-16 text".encode("utf-16"), "txt"),  # BOM + NULs: text
    ("a.txt", "UTF-32".encode("utf-32"), "txt"),
    ("../../etc/passwd", b"root:x:0:0:root:/root:/bin/bash\n", "txt"),
    ("no-extension", b"  <!DOCTYPE html><html><body>x</body></html>", "html"),
    ("no-extension", PDF, "pdf"),
    ("no-extension", DOCX, None),  # a ZIP: typed by its marker part once whole
    ("Dr. Smith notes", b"not an extension", "txt"),
    ("v1.2", b"digits are no extension", "txt"),
    ("report.pdf ", PDF, "pdf"),
])
def test_judge_accepts(name: str, head: bytes, kind: str | None) -> None:
    verdict = sniff.judge(extension(clean_filename(name)), head)
    assert verdict.kind == kind
    assert verdict.mime == (by_kind(kind).mime if kind else sniff.ZIP_MIME)
    assert verdict.check_package == (head == DOCX)


@pytest.mark.parametrize(("name", "head", "kind", "mime"), [
    ("a.docx", PDF, "pdf", "application/pdf"),
    ("pdf-in-disguise.txt", PDF, "pdf", "application/pdf"),
    ("zip-in-disguise.md", DOCX, None, sniff.ZIP_MIME),  # typed by its marker part once whole
    ("page.html", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "image", "image/png"),
    ("report.doc", DOCX, None, sniff.ZIP_MIME),  # a DOCX named .doc (issue 29)
    ("sheet.xls", DOCX, None, sniff.ZIP_MIME),
])
def test_content_of_another_format_is_judged_as_what_it_is(name: str, head: bytes, kind: str | None,
                                                            mime: str) -> None:
    verdict = sniff.judge(extension(name), head)
    assert (verdict.kind, verdict.mime, verdict.named) == (kind, mime, None)


@pytest.mark.parametrize(("name", "head", "reason"), [
    ("fake.pdf", b"this is not a pdf at all", "not a PDF"),
    ("empty.pdf", b"", "not a PDF"),
    ("late.pdf", b" " * 2000 + PDF, "not a PDF"),
    ("a.docx", b"plain", "not a DOCX"),
    ("binary.txt", bytes(range(256)) * 4, "binary data"),
    ("tool.exe", b"MZ\x90\x00", ".exe is not allowed"),
    ("archive.7z", b"7z\xbc\xaf\x27\x1c", ".7z is not allowed"),  # .zip is an archive now (issue 29)
    ("sheet.xls", b"just text", "(Excel 97-2003 workbook) but the content is text, not an OLE2 compound file"),
    ("no-extension", b"\x7fELF\x02\x01\x01\x00", "binary data"),
])
def test_judge_refuses(name: str, head: bytes, reason: str) -> None:
    with pytest.raises(sniff.UnsupportedContentError, match=re.escape(reason)) as info:
        sniff.judge(extension(name), head)
    assert info.value.error_code == "unsupported_type"


def test_text_that_is_not_utf16_counts_later_nul_bytes() -> None:
    assert sniff.judge("txt", b"ascii").reject_nul
    assert sniff.judge("txt", b"ascii with a stray \x00 NUL").reject_nul
    assert not sniff.judge("txt", "wide".encode("utf-16")).reject_nul
    assert not sniff.judge("txt", ("BOM-less wide text " * 20).encode("utf-16-le")).reject_nul
    assert not sniff.judge("pdf", PDF).reject_nul


# ------------------------------------------------------------------ text vs binary (issue 8)

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT.parent / "shared" / "cases" / "extraction"
_ZH = "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。"
_RU = "Все люди рождаются свободными и равными в своем достоинстве и правах."
_FR = "L'été était très chaud, la señora a mangé des crêpes à Noël."
_TEXTS = {"ascii": "Quarterly report on indexing throughput.", "latin": _FR, "cjk": _ZH, "cyrillic": _RU}


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
@pytest.mark.parametrize("text", sorted(_TEXTS))
@pytest.mark.parametrize("size", [1, 200])  # one line; the 8 KiB head cut mid-file
def test_judge_accepts_bom_less_wide_text(codec: str, text: str, size: int) -> None:
    data = ((_TEXTS[text] + "\r\n") * size).encode(codec)
    for ext in ("txt", "md", ""):
        verdict = sniff.judge(ext, data[: sniff.HEAD_BYTES])
        assert verdict.kind == (ext or "txt") if ext != "md" else verdict.kind == "md"
        assert not verdict.reject_nul


def test_judge_accepts_chinese_utf16_whose_only_nul_is_in_a_character() -> None:
    data = "一切人生而自由，在尊严和权利上平等。".encode("utf-16-le")  # 一 = U+4E00: 00 4E
    assert data.count(0) == 1
    assert sniff.judge("txt", data).kind == "txt"


def test_judge_recognizes_bom_less_utf16_html() -> None:
    data = "<!DOCTYPE html><html><body><p>Hi</p></body></html>".encode("utf-16-le")
    assert sniff.judge("", data).kind == "html"


@pytest.mark.parametrize("data", [
    b"A text with one stray \x00 NUL byte in it.",
    "Größe, café, L'été était très chaud.\x00 Fin.".encode("cp1252"),
    "人人生而自由\x00，在尊严和权利上一律平等。".encode("gbk"),
    b"abc\x00def",
    (b"a line of a log file\n" * 400)[:8000] + b"\x00" * 16,
    b"header line\n" * 10 + b"\x00" * 200,  # a log cut short, padded with zeros (issue 29)
    b"".join(b"line %d of an export\x00\n" % i for i in range(300)),  # a NUL per line
])
def test_judge_accepts_text_with_stray_nul_bytes(data: bytes) -> None:
    verdict = sniff.judge("txt", data)
    assert verdict.kind == "txt" and verdict.reject_nul


def _elf() -> bytes:
    return b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 + b"\x02\x00\x3e\x00\x01\x00\x00\x00" + bytes(range(256)) * 30


def _png() -> bytes:
    return b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00" + random.Random(3).randbytes(8000)


@pytest.mark.parametrize(("name", "data"), [
    ("elf", _elf()),
    ("png", _png()),
    ("png-head-without-nul", b"\x89PNG\r\n\x1a\n" + b"IHDR" * 10),
    ("jpeg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + random.Random(4).randbytes(4000)),
    ("random", random.Random(5).randbytes(sniff.HEAD_BYTES)),
    ("random-few-nuls", random.Random(6).randbytes(sniff.HEAD_BYTES).replace(b"\x00", b"")[:-8] + b"\x00" * 3),
    ("int16-array", b"".join(i.to_bytes(2, "little") for i in range(4000))),
    ("text-then-mostly-nuls", b"header line\n" * 10 + b"\x00" * 2000),
    ("zip", DOCX),
    ("pdf", PDF),
])
def test_judge_still_refuses_binary_named_as_text(name: str, data: bytes) -> None:
    typed_by_content = ("zip", "pdf", "png", "png-head-without-nul", "jpeg")  # a container's signature:
    for ext in ("txt", "html", "md", ""):
        if name in typed_by_content:  # judged as what it is, whatever the name says (issue 29)
            assert sniff.judge(ext, data[: sniff.HEAD_BYTES]).named is None
            continue
        with pytest.raises(sniff.UnsupportedContentError):
            sniff.judge(ext, data[: sniff.HEAD_BYTES])


needs_cases = pytest.mark.skipif(not CASES.is_dir(), reason=f"cases not found at {CASES}")


@needs_cases
def test_handed_utf16le_case_is_accepted() -> None:
    data = (CASES / "utf16le-no-bom.txt").read_bytes()
    verdict = sniff.judge("txt", data[: sniff.HEAD_BYTES])
    assert (verdict.kind, verdict.reject_nul) == ("txt", False)


def _package(data: bytes, name: str = "x.docx", tail: int | None = None) -> sniff.Verdict:
    verdict = sniff.judge(extension(name), data)
    assert verdict.check_package
    pieces = [(0, data)] if tail is None else [(0, data[:sniff.HEAD_BYTES]), (len(data) - tail, data[-tail:])]
    return sniff.identify_package(verdict, len(data), pieces)


def test_docx_directory_check() -> None:
    assert _package(DOCX).kind == "docx"
    assert _package(DOCX, "no-extension").kind == "docx"
    with pytest.raises(sniff.UnsupportedContentError, match=r"without word/document\.xml, not a DOCX \(Word"):
        _package(_zip(["mimetype-not-first", "content.xml"]))
    # no name, no package marker: a ZIP archive whose members become documents (issue 29)
    assert _package(_zip(["content.xml"]), "no-extension").kind == "zip"
    for broken in (b"PK\x03\x04" + b"\x00" * 16, DOCX[: len(DOCX) // 2]):
        with pytest.raises(sniff.UnsupportedContentError):
            _package(broken)


def test_docx_check_asks_for_a_directory_outside_the_tail() -> None:
    big = _zip([f"word/media/image{i}.xml" for i in range(300)] + ["word/document.xml"])
    with pytest.raises(sniff.NeedBytesError) as need:
        _package(big, tail=200)
    assert 0 < need.value.offset < len(big) - 200 and need.value.length > 0
    verdict = sniff.judge("docx", big)
    pieces = [(0, big[:100]), (need.value.offset, big[need.value.offset:])]
    assert sniff.identify_package(verdict, len(big), pieces).kind == "docx"


@pytest.mark.parametrize(("filename", "content_type", "parse_as"), [
    ("../../etc/passwd", "text/plain", "document.txt"),
    ("page", "text/html", "document.html"),
    ("Dr. Smith notes", "text/plain", "document.txt"),
    ("scan", "application/pdf", "document.pdf"),
    ("memo", DOCX_MIME, "document.docx"),
    ("report.pdf", "application/pdf", "report.pdf"),
    ("notes.md", "text/markdown", "notes.md"),
    ("legacy", "application/octet-stream", "legacy"),  # older rows: the client's header, as before
    ("legacy", None, "legacy"),
])
def test_parser_filename(filename: str, content_type: str | None, parse_as: str) -> None:
    assert formats.parser_filename(filename, content_type) == parse_as


# ------------------------------------------------------------------ streaming receiver (in-memory store)


MemoryStore = FakeObjectWriter


def _multipart(parts: list[tuple[str, str | None, bytes]], boundary: str = "b0undary") -> bytes:
    out = b""
    for name, filename, data in parts:
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        out += f"--{boundary}\r\nContent-Disposition: {disp}\r\nContent-Type: application/octet-stream\r\n\r\n".encode()
        out += data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode()


def _request(body: bytes, *, chunk: int = 65536, content_type: str = "multipart/form-data; boundary=b0undary",
             declare_length: bool = True) -> Request:
    pieces = [body[i:i + chunk] for i in range(0, len(body), chunk)] or [b""]
    headers = [(b"content-type", content_type.encode())]
    if declare_length:
        headers.append((b"content-length", str(len(body)).encode()))
    it = iter(range(len(pieces)))

    async def receive() -> dict[str, Any]:
        i = next(it, None)
        if i is None:
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": pieces[i], "more_body": i < len(pieces) - 1}

    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers, "query_string": b""}
    return Request(scope, receive)


async def _receive(store: MemoryStore, body: bytes, *, limit: int = 1_000_000, part_size: int = 5 * 2**20,
                   **kw: Any) -> NewContent:
    return await upload.receive_upload(_request(body, **kw), store, kb_id=7, limit=limit, part_size=part_size)


async def test_receives_and_hashes_the_file_part() -> None:
    store = MemoryStore()
    data = b"hello streaming world\n" * 5000
    body = _multipart([("note", None, b"ignored"), ("file", "../../etc/passwd", data)])
    got = await _receive(store, body, chunk=1000)
    assert (got.size_bytes, got.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert got.filename == "../../etc/passwd" and got.content_type == "text/plain"
    assert got.object_key.startswith("kb/7/") and store.objects == {got.object_key: data}
    assert store.content_types[got.object_key] == "text/plain"
    assert (store.puts, store.streams) == (1, 0)  # small: one PUT, not a multipart upload


async def test_a_file_past_single_put_max_is_streamed() -> None:
    store = MemoryStore()
    data = b"0123456789abcdef" * (2 * 2**20 // 16) + b"tail"  # 2 MiB + 4
    got = await _receive(store, _multipart([("file", "big.txt", data)]), limit=3 * 2**20, part_size=2**20)
    assert store.objects[got.object_key] == data and got.sha256 == hashlib.sha256(data).hexdigest()
    assert (store.puts, store.streams) == (0, 1)


async def test_declared_length_over_the_limit_is_refused_before_reading() -> None:
    store = MemoryStore()
    body = _multipart([("file", "big.txt", b"x" * 2000)])
    request = _request(body)
    request.scope["headers"] = [(b"content-type", b"multipart/form-data; boundary=b0undary"),
                                (b"content-length", b"99999999")]

    async def never() -> dict[str, Any]:
        raise AssertionError("the body must not be read")

    request._receive = never  # type: ignore[method-assign]
    with pytest.raises(UploadTooLargeError):
        await upload.receive_upload(request, store, kb_id=1, limit=1000, part_size=5 * 2**20)
    assert store.objects == {}


async def test_oversize_mid_stream_aborts_and_leaves_nothing() -> None:
    store = MemoryStore()
    body = _multipart([("file", "big.txt", b"y" * 3 * 2**20)])  # past SINGLE_PUT_MAX: streamed
    with pytest.raises(UploadTooLargeError):
        await _receive(store, body, limit=2 * 2**20, declare_length=False, chunk=65536)
    assert store.objects == {} and store.aborted == 1


async def test_fake_pdf_is_refused_without_touching_storage() -> None:
    store = MemoryStore()
    with pytest.raises(UnsupportedUploadError, match="not a PDF"):
        await _receive(store, _multipart([("file", "fake.pdf", b"I am text pretending to be a PDF" * 1000)]))
    assert store.objects == {} and (store.puts, store.streams) == (0, 0)


async def test_binary_after_the_head_refuses_text_and_removes_the_object() -> None:
    store = MemoryStore()
    data = b"a" * (sniff.HEAD_BYTES * 3) + bytes(range(256)) * 200 + b"b" * 100  # then mostly binary
    with pytest.raises(UnsupportedUploadError, match=r"binary \(\d+ NUL bytes and \d+ other control bytes in its "
                                                     r"first \d+ bytes\)"):
        await _receive(store, _multipart([("file", "late-binary.txt", data)]), chunk=4096)
    assert store.objects == {}


async def test_binary_in_a_long_first_chunk_past_the_judged_head_is_counted() -> None:
    store = MemoryStore()
    data = b"a" * (sniff.HEAD_BYTES + 800) + b"\x00\x01" * 100  # one 64 KiB chunk, the whole file
    with pytest.raises(UnsupportedUploadError, match=r"binary \(100 NUL bytes and 100 other control bytes"):
        await _receive(store, _multipart([("file", "tail-binary.txt", data)]), chunk=65536)
    assert store.objects == {} and (store.puts, store.streams) == (0, 0)


async def test_a_stray_nul_after_the_head_is_accepted() -> None:
    store = MemoryStore()
    data = b"a" * (sniff.HEAD_BYTES * 3) + b"\x00" + b"b" * 100
    got = await _receive(store, _multipart([("file", "late-nul.txt", data)]), chunk=4096)
    assert store.objects[got.object_key] == data and got.content_type == "text/plain"


async def test_a_text_with_a_run_of_nul_padding_after_the_head_is_accepted() -> None:
    store = MemoryStore()
    data = b"a log line\n" * 2000 + b"\x00" * 4096 + b"the log goes on\n"  # a crash left a zeroed block
    got = await _receive(store, _multipart([("file", "app.txt", data)]), chunk=4096)
    assert store.objects[got.object_key] == data and got.content_type == "text/plain"


async def test_utf16_without_bom_streams_with_all_its_nuls() -> None:
    store = MemoryStore()
    data = ("Quarterly report on indexing throughput.\r\n" * 500).encode("utf-16-le")
    got = await _receive(store, _multipart([("file", "report.txt", data)]), chunk=4096)
    assert store.objects[got.object_key] == data and got.content_type == "text/plain"


async def test_zip_without_word_document_is_refused_after_upload_and_removed() -> None:
    store = MemoryStore()
    with pytest.raises(UnsupportedUploadError, match=r"word/document\.xml"):
        await _receive(store, _multipart([("file", "fake.docx", _zip(["content.xml"]))]))
    assert store.objects == {}
    got = await _receive(store, _multipart([("file", "real.docx", DOCX)]))
    assert store.content_types[got.object_key] == DOCX_MIME


@pytest.mark.parametrize(("body", "kw", "error"), [
    (_multipart([("other", None, b"x")]), {}, MissingFileError),
    (_multipart([("file", "a.txt", b"x"), ("file", "b.txt", b"y")]), {}, MalformedUploadError),
    (_multipart([("file", "a.txt", b"x")])[:-20], {}, MalformedUploadError),  # no closing boundary
    (b'{"file": "x"}', {"content_type": "application/json"}, UnsupportedUploadError),
    (b"--x\r\n", {"content_type": "multipart/form-data"}, MalformedUploadError),  # no boundary
    (b"--b0undary\r\nContent-Disposition: " + b"x" * 20000 + b"\r\n\r\n", {}, MalformedUploadError),
])
async def test_malformed_requests(body: bytes, kw: dict[str, Any], error: type[Exception]) -> None:
    store = MemoryStore()
    with pytest.raises(error):
        await _receive(store, body, **kw)
    assert store.objects == {}


async def test_storage_failure_mid_stream_surfaces_and_leaves_nothing() -> None:
    store = MemoryStore(fail_after=10)
    with pytest.raises(StorageUnavailableError):
        await _receive(store, _multipart([("file", "a.txt", b"z" * 3 * 2**20)]), limit=4 * 2**20,
                       part_size=2**20, chunk=65536)
    assert store.objects == {}


async def test_file_part_without_filename_is_typed_by_content() -> None:
    store = MemoryStore()
    got = await _receive(store, _multipart([("file", None, PDF)]))
    assert (got.filename, got.content_type) == ("upload", "application/pdf")


async def test_odd_names_survive_httpx_encoding() -> None:
    """The exact bytes httpx puts on the wire for the names the issue lists."""
    store = MemoryStore()
    names = ["报告[2023]#1 50%+.pdf", "a|b?.txt", "../../etc/passwd", "n" * 296 + ".txt", "nul\x00in-name.txt",
             'quote"d.txt']
    for name in names:
        req = httpx.Request("POST", "http://x/", files={"file": (name, PDF if name.endswith(".pdf") else b"text")})
        body = req.read()
        got = await upload.receive_upload(
            _request(body, content_type=req.headers["content-type"]), store, kb_id=1,
            limit=10_000, part_size=5 * 2**20)
        assert got.filename == clean_filename(name), name
    assert [clean_filename(n) for n in names[-2:]] == ["nulin-name.txt", 'quote"d.txt']



@settings(max_examples=300, deadline=None)
@given(data=st.one_of(st.binary(max_size=9000), st.binary(max_size=64).map(lambda b: b * 200)))
def test_judge_answers_a_verdict_or_415_for_any_bytes(data: bytes) -> None:
    for ext in ("txt", "", "pdf"):
        try:
            verdict = sniff.judge(ext, data)
        except sniff.UnsupportedContentError:
            continue
        assert verdict.kind is None or by_kind(verdict.kind).accepted


_LETTERS = st.characters(categories=["Lu", "Ll", "Lo"])


@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.text(_LETTERS, min_size=1, max_size=10), min_size=6, max_size=60),
       codec=st.sampled_from(["utf-16-le", "utf-16-be"]))
def test_judge_accepts_bom_less_utf16_words(words: list[str], codec: str) -> None:
    data = "\r\n".join(" ".join(words[i:i + 6]) for i in range(0, len(words), 6)).encode(codec)
    assert sniff.judge("txt", data[:sniff.HEAD_BYTES]).kind == "txt"
