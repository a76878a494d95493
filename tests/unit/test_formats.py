"""The format registry (``shared.domain.formats``) and every layer that derives from it: the
API's typing by name and by content, the package check once whole, the worker's dispatch, the
refusals and their messages, ``GET /api/v1/formats``, the README's table. Every sample is
generated here (ZIPs with each marker, ODF/EPUB ``mimetype``, OLE2 files from ``tests/cfb.py``)."""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import io
import re
import struct
import tarfile
import zipfile
from pathlib import Path

import pytest

from knowledge_service import upload
from knowledge_service.upload import sink, sniff
from shared.domain import containers, formats
from shared.domain.errors import EncryptedDocumentError, NeedBytesError, UnsupportedTypeError, UnsupportedUploadError
from shared.domain.formats import ACCEPTED, FORMATS, Container, Format, by_kind
from task_service.pipeline import parse, readers
from tests.cfb import cfb
from tests.fakes import FakeObjectWriter
from tests.fidelity.cfb_writer import write_cfb
from tests.fidelity.legacy_writer import make_doc, make_ppt, make_xls
from tests.unit.test_upload_checks import _multipart, _request

ROOT = Path(__file__).resolve().parents[2]

#: Kinds whose reader module (``task_service/pipeline/readers/<family>/<name>.py``) is being written
#: elsewhere: their dispatch test is expected to fail (strict: it must be removed from here when
#: the reader arrives).
MISSING_READERS: frozenset[str] = frozenset()


# ------------------------------------------------------------------ generated samples


def zip_with(names: list[str], *, mimetype: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        if mimetype is not None:
            z.writestr(zipfile.ZipInfo("mimetype"), mimetype, compress_type=zipfile.ZIP_STORED)
        for n in names:
            z.writestr(n, f"<x>{n}</x>" * 20)
    return buf.getvalue()


def tar_with(files: dict[str, bytes], *, gz: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


_IMAGES = {
    "png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64),
    "jpg": b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(64),
    "tif": b"II*\x00\x08\x00\x00\x00" + bytes(64),
    "tiff": b"MM\x00*\x00\x00\x00\x08" + bytes(64),
    "webp": b"RIFF\x24\x00\x00\x00WEBPVP8 " + bytes(64),
    "bmp": b"BM" + struct.pack("<I", 90) + b"\x00\x00\x00\x00" + struct.pack("<II", 54, 40) + bytes(64),
    "heic": struct.pack(">I", 24) + b"ftypheic" + bytes(4) + b"mif1heic" + bytes(64),
    "heif": struct.pack(">I", 20) + b"ftypmif1" + bytes(4) + b"mif1" + bytes(64),
}
_TEXT = {
    "html": b"<!DOCTYPE html><html><body><p>MARKER</p></body></html>",
    "md": b"# Title\n\nMARKER paragraph\n",
    "txt": b"MARKER plain text\n",
    "csv": b"name,price\nMARKER,0.42\n",
    "json": b'{"readings": [{"note": "MARKER"}]}',
    "xml": b'<?xml version="1.0"?><root><item>MARKER</item></root>',
    "rtf": b"{\\rtf1\\ansi MARKER\\par}",
    "eml": b"From: Ann <ann@example.com>\r\nTo: bob@example.com\r\nSubject: MARKER\r\n\r\nBody MARKER\r\n",
}


def sample(fmt: Format, ext: str | None = None) -> bytes:
    """Bytes of ``fmt`` as its registry entry says they are recognised."""
    if fmt.container is Container.PDF:
        return b"%PDF-1.7\n1 0 obj\n<<>>\nendobj\n"
    if fmt.container is Container.ZIP:
        return zip_with(["[Content_Types].xml", fmt.marker, "docProps/core.xml"])
    if fmt.container is Container.ZIP_MIMETYPE:
        return zip_with(["content.xml", "META-INF/container.xml"], mimetype=fmt.marker)
    if fmt.container is Container.OLE:
        return write_cfb({f"{fmt.marker}0037001F" if fmt.marker.endswith("_") else fmt.marker: b"\0" * 64,
                          "\x05SummaryInformation": b"\0" * 16})
    if fmt.container is Container.ARCHIVE:
        return zip_with(["notes/a.txt"]) if fmt.kind == "zip" else tar_with({"notes/a.txt": b"MARKER\n"})
    if fmt.container is Container.IMAGE:
        return _IMAGES["png" if ext in (None, "jpeg") and fmt.kind == "image" else ("jpg" if ext == "jpeg" else ext)]
    return _TEXT.get(fmt.kind, b"MARKER line of text\n")  # markup, code, configuration, logs


def typed(ext: str, data: bytes) -> sniff.Verdict:
    """What the API decides for a whole file named ``*.ext`` ("" = no extension)."""
    verdict = sniff.judge(ext, data)
    return sniff.identify_package(verdict, len(data), [(0, data)]) if verdict.check_package else verdict


# ------------------------------------------------------------------ the registry itself


def test_registry_is_consistent() -> None:
    kinds = [f.kind for f in FORMATS]
    extensions = [e for f in FORMATS for e in f.extensions]
    mimes = [m for f in FORMATS for m in f.mimes]
    assert len(set(kinds)) == len(kinds) and len(set(extensions)) == len(extensions) and len(set(mimes)) == len(mimes)
    for f in FORMATS:
        assert f.extensions and all(re.fullmatch(r"[a-z0-9]+", e) for e in f.extensions), f.kind
        assert f.zip_based == (f.container in (Container.ZIP, Container.ZIP_MIMETYPE))
        if f.container in (Container.ZIP, Container.ZIP_MIMETYPE, Container.OLE):
            assert f.marker, f.kind
        assert f.reader in readers.FAMILIES, f.kind
        if not f.accepted:
            assert f.container is Container.OLE
            assert re.fullmatch(r".+ \(\.[a-z]+\) are not supported: open it in .+ and save it as \.[a-z]+x",
                                f.refusal or "")
        assert not f.pattern_required or f.text_pattern


def test_registry_holds_the_kinds_of_issues_22_and_29() -> None:
    assert {f.kind for f in ACCEPTED} >= {"pdf", "docx", "html", "md", "txt", "pptx", "odp", "xlsx", "ods", "csv",
                                          "epub", "odt", "rtf", "json", "xml", "eml", "msg", "image",
                                          "doc", "xls", "ppt", "rst", "org", "adoc", "tex", "yaml", "toml", "ini",
                                          "log", "python", "go", "javascript", "typescript", "java", "c", "cpp",
                                          "rust"}
    assert set(formats.accepted_extensions()) >= {"pptm", "xlsm", "tsv", "jsonl", "ndjson", "png", "jpg", "jpeg",
                                                   "tif", "tiff", "webp", "bmp", "heic", "heif", "dot", "xlt", "pot",
                                                   "yml", "cfg", "h", "ts", "rb", "sh", "sql"}
    assert {f.kind for f in FORMATS if not f.accepted} == set()


def _defines_read(path: Path) -> bool:
    """Whether the module at ``path`` defines a top-level ``read`` (what makes it a reader)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef) and node.name == "read" for node in tree.body)


def test_every_reader_module_on_disk_is_named_by_the_registry() -> None:
    """A reader is a module of a family package defining ``read``; helpers define none (and the
    private ones live in ``readers/_shared/``), so no list of helpers is kept here."""
    base = ROOT / "task_service/pipeline/readers"
    on_disk = {".".join(p.relative_to(base).with_suffix("").parts) for p in base.rglob("*.py") if _defines_read(p)}
    named = {readers.FAMILIES[f.reader] for f in FORMATS}
    assert on_disk == named, f"reader modules no registry entry names: {sorted(on_disk - named)}"
    assert not any(p.parent.name.startswith("_") for p in base.rglob("*.py") if _defines_read(p))


def test_every_family_name_resolves_to_a_reader_module() -> None:
    for name, relative in readers.FAMILIES.items():
        module = importlib.import_module(f"task_service.pipeline.readers.{relative}")
        assert callable(module.read), name
        assert readers.module_of(name) == module.__name__


def test_readme_format_table_is_the_registrys() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert formats.markdown_table() in readme, "README's format table differs: paste formats.markdown_table()"


# ------------------------------------------------------------------ one kind, every layer


def _reader_cases() -> list[object]:
    return [pytest.param(f.kind, marks=pytest.mark.xfail(strict=True, reason="reader module not written yet"))
            if f.kind in MISSING_READERS else f.kind for f in ACCEPTED]


@pytest.mark.parametrize("kind", [f.kind for f in ACCEPTED])
def test_api_types_every_extension_of_every_kind(kind: str) -> None:
    fmt = by_kind(kind)
    for ext in fmt.extensions:
        verdict = typed(ext, sample(fmt, ext))
        assert (verdict.kind, verdict.named) == (kind, kind), ext
        assert formats.by_mime(verdict.mime) is fmt, ext


@pytest.mark.parametrize("kind", [f.kind for f in ACCEPTED if f.container is not Container.TEXT or f.text_pattern])
def test_api_types_every_kind_by_content_alone(kind: str) -> None:
    """Without an extension: by container, magic or text pattern (text kinds without a pattern
    are read as plain text: md, csv, json)."""
    verdict = typed("", sample(by_kind(kind)))
    assert verdict.kind == kind and verdict.named is None


@pytest.mark.parametrize("kind", [f.kind for f in ACCEPTED])
def test_worker_dispatches_every_extension_and_mime_of_every_kind(kind: str) -> None:
    fmt = by_kind(kind)
    for ext in fmt.extensions:
        assert parse.document_kind(f"report.{ext.upper()}") == kind
        assert parse.SUPPORTED_EXTENSIONS[ext] == kind
    for mime in fmt.mimes:  # a stored name without extension: the detected MIME type decides
        assert parse.document_kind(formats.parser_filename("upload", mime)) == kind


def _module(fmt: Format) -> str:
    """The dotted module the registry's short name resolves to."""
    return readers.module_of(fmt.reader) or f"task_service.pipeline.readers.{fmt.reader}"


@pytest.mark.parametrize("kind", _reader_cases())
def test_every_kind_has_its_reader_module(kind: str) -> None:
    fmt = by_kind(kind)
    assert importlib.util.find_spec(_module(fmt)) is not None, fmt.reader
    reader = parse.reader_for(fmt)
    assert callable(reader.read)


def test_missing_readers_list_is_exact() -> None:
    """The xfail list above names only kinds whose module is really missing."""
    missing = {f.kind for f in ACCEPTED if importlib.util.find_spec(_module(f)) is None}
    assert MISSING_READERS >= missing


@pytest.mark.parametrize("kind", sorted(MISSING_READERS))
def test_a_kind_without_a_reader_is_unsupported_type_at_dispatch(kind: str) -> None:
    fmt = by_kind(kind)
    if importlib.util.find_spec(_module(fmt)) is not None:
        pytest.skip("its reader exists now")
    with pytest.raises(UnsupportedTypeError, match="no reader"):
        parse.parse_document(sample(fmt), f"x.{fmt.extensions[0]}")


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(("ext", "data", "marker"), [
    ("doc", make_doc(["Legacy LEGACYDOCMARK words"]), "LEGACYDOCMARK"),
    ("xls", make_xls({"S": [["Legacy LEGACYXLSMARK words"]]}), "LEGACYXLSMARK"),
    ("ppt", make_ppt([("Legacy LEGACYPPTMARK", "b", "x", "n")]), "LEGACYPPTMARK"),
])
def test_legacy_office_is_accepted_by_name_and_by_content_and_read(ext: str, data: bytes, marker: str) -> None:
    """Issue 29: .doc/.xls/.ppt are read (``readers/legacy``), not refused; renamed to a ZIP kind they
    are typed by their bytes and read as what they are (the worker by the content type); by name
    alone the reader refuses them with what they are."""
    for name_ext in (ext, "", "docx"):
        assert typed(name_ext, data).kind == ext
    assert formats.parser_filename("renamed.docx", typed("docx", data).mime) == f"document.{ext}"
    assert marker in parse.parse_document(data, f"old.{ext}").text
    with pytest.raises(UnsupportedTypeError, match=f"upload it named .{ext}"):
        parse.parse_document(data, "renamed.docx")


ENCRYPTED = write_cfb({"EncryptionInfo": b"\0" * 8, "EncryptedPackage": b"\0" * 64, "\x06DataSpaces/Version": b"1"})


@pytest.mark.parametrize("ext", ["docx", "xlsx", "pptx", ""])
def test_password_protected_office_file_is_encrypted(ext: str) -> None:
    with pytest.raises(sniff.UnsupportedContentError, match="password-protected") as info:
        typed(ext, ENCRYPTED)
    assert info.value.error_code == "encrypted"


def test_password_protected_docx_at_dispatch_is_encrypted() -> None:
    with pytest.raises(EncryptedDocumentError, match="password-protected") as info:
        parse.parse_document(ENCRYPTED, "secret.docx")
    assert info.value.error_code == "encrypted"


@pytest.mark.parametrize(("name", "data", "reason"), [
    ("a.xlsx", zip_with(["content.xml"]), "a ZIP archive without xl/workbook.xml, not a XLSX (Excel workbook)"),
    ("a.msg", write_cfb({"Random": b"x"}), "an OLE2 compound file that is none of: .msg, .doc, .xls, .ppt"),
    ("a.docx", cfb(["x"], loop=True), "not a readable OLE2 compound file"),
    ("a.png", b"GIF89a" + bytes(32), "not a PNG, JPEG, TIFF, WebP, BMP or HEIC/HEIF image"),
    ("a.rtf", b"plain text, no RTF header", "text that is not Rich Text Format"),
    ("a.exe", b"MZ", "file type .exe is not allowed; allowed: pdf, docx, pptx, pptm, xlsx"),
])
def test_content_that_disagrees_is_refused(name: str, data: bytes, reason: str) -> None:
    with pytest.raises(sniff.UnsupportedContentError, match=re.escape(reason)):
        typed(formats.extension(name), data)


@pytest.mark.parametrize(("name", "data", "kind"), [
    ("a.pptx", zip_with(["word/document.xml"]), "docx"),
    ("a.odt", zip_with(["content.xml"], mimetype=f"{formats.by_kind('ods').mime}"), "ods"),
    ("a.msg", zip_with(["word/document.xml"]), "docx"),
    ("a.doc", zip_with(["word/document.xml"]), "docx"),
    ("a.ppt", zip_with(["ppt/presentation.xml"]), "pptx"),
    ("a.json", b"\x89PNG\r\n\x1a\n" + bytes(16), "image"),
])
def test_content_of_another_format_is_read_as_what_it_is(name: str, data: bytes, kind: str) -> None:
    """Issue 29: a DOCX named .doc, a PPTX named .ppt... is typed by its bytes, and the worker reads it
    by that type (``parser_filename``)."""
    verdict = typed(formats.extension(name), data)
    assert verdict.kind == kind
    assert formats.extension(formats.parser_filename(name, verdict.mime)) in formats.by_kind(kind).extensions


def test_text_kinds_by_content_alone() -> None:
    assert typed("", b"\xef\xbb\xbf  <?xml version='1.0'?><a/>").kind == "xml"
    assert typed("", "{\\rtf1 x}".encode("utf-16")).kind == "rtf"
    assert typed("", b"Return-Path: <a@b>\nReceived: by x\n  continued\nFrom: a@b.example\n\nhi").kind == "eml"
    assert typed("", b"Note: not a mail\nFrom: nobody\n").kind == "txt"  # no address
    assert typed("", b"BMW annual report").kind == "txt"  # not a BMP: no reserved zero bytes


# ------------------------------------------------------------------ OLE2 directory reader


@pytest.mark.parametrize("shift", [9, 12])
def test_ole_names_follow_the_directory_chain(shift: int) -> None:
    names = [f"stream{i}" for i in range(40)]  # 41 entries: 11 sectors of 512 bytes, 2 of 4096
    assert containers.ole_names(io.BytesIO(cfb(names, shift=shift))) == ["Root Entry", *names]


def test_ole_names_refuse_loops_and_truncation() -> None:
    assert containers.ole_names(io.BytesIO(cfb(list("abcdefgh"), loop=True))) is None
    assert containers.ole_names(io.BytesIO(cfb(list("abcdefgh"))[:1200])) is None
    assert containers.ole_names(io.BytesIO(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100))) is None


def test_ole_names_agree_with_olefile_when_installed() -> None:
    olefile = pytest.importorskip("olefile")
    data = cfb(["__substg1.0_0037001F", "__properties_version1.0", "__attach_version1.0_#00000000/"])
    theirs = {"/".join(p) for p in olefile.OleFileIO(io.BytesIO(data)).listdir(streams=True, storages=True)}
    assert theirs == set(containers.ole_names(io.BytesIO(data)) or []) - {"Root Entry"}


def test_sparse_file_asks_for_what_it_lacks() -> None:
    data = cfb([f"s{i}" for i in range(30)])
    file = containers.SparseFile(len(data), [(0, data[:512])])
    with pytest.raises(NeedBytesError) as need:
        containers.ole_names(file)  # type: ignore[arg-type]
    assert (need.value.offset, need.value.length) == (1024, 512)  # the first directory sector (sector 1)


# ------------------------------------------------------------------ the upload path


async def test_a_streamed_package_is_typed_with_ranged_reads_and_refused_encrypted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past SINGLE_PUT_MAX the package is checked once stored: from the head, the tail and what
    it reads back; refused, it is removed."""
    monkeypatch.setattr(sink, "SINGLE_PUT_MAX", 1024)
    monkeypatch.setattr(sink, "TAIL_BYTES", 600)
    big = cfb([f"pad{i}" for i in range(60)] + ["EncryptionInfo", "EncryptedPackage"]) + bytes(20_000)
    store = FakeObjectWriter()
    with pytest.raises(UnsupportedUploadError) as info:
        await upload.receive_upload(_request(_multipart([("file", "locked.docx", big)]), chunk=4096), store,
                                    kb_id=3, limit=10**6, part_size=5 * 2**20)
    assert info.value.error_code == "encrypted"
    assert store.streams == 1 and store.ranges and store.objects == {}


async def test_a_streamed_zip_without_a_name_gets_its_kind_from_the_directory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sink, "SINGLE_PUT_MAX", 1024)
    monkeypatch.setattr(sink, "TAIL_BYTES", 300)
    data = zip_with([f"ppt/slides/slide{i}.xml" for i in range(400)] + ["ppt/presentation.xml"])  # directory > head
    store = FakeObjectWriter()
    got = await upload.receive_upload(_request(_multipart([("file", None, data)]), chunk=256), store, kb_id=3,
                                      limit=10**6, part_size=5 * 2**20)
    assert got.content_type == by_kind("pptx").mime and got.sha256 == hashlib.sha256(data).hexdigest()
    assert store.objects[got.object_key] == data and store.ranges  # the central directory was read back
    assert formats.parser_filename(got.filename, got.content_type) == "document.pptx"


async def test_a_small_refused_package_never_reaches_storage() -> None:
    store = FakeObjectWriter()
    with pytest.raises(UnsupportedUploadError, match=re.escape("not an OLE2 compound file")) as info:
        await upload.receive_upload(_request(_multipart([("file", "memo.doc", b"\xd0\xcf\x11\xe0")])), store,
                                    kb_id=3, limit=10**6, part_size=5 * 2**20)
    assert info.value.error_code == "unsupported_type"
    assert (store.puts, store.streams, store.objects) == (0, 0, {})


async def test_an_image_is_stored_with_its_own_mime_type() -> None:
    store = FakeObjectWriter()
    got = await upload.receive_upload(_request(_multipart([("file", "scan.jpeg", _IMAGES["tif"])])), store,
                                      kb_id=3, limit=10**6, part_size=5 * 2**20)
    assert got.content_type == store.content_types[got.object_key] == "image/tiff"


# ------------------------------------------------------------------ surfaces


async def test_formats_route_lists_the_registry() -> None:
    from knowledge_service import routes

    out = await routes.list_formats(user_id=1)
    assert [i.kind for i in out.items] == [f.kind for f in FORMATS]
    doc = next(i for i in out.items if i.kind == "doc")
    assert doc.accepted and doc.refusal is None
    assert out.accept.split(",") == [f".{e}" for e in formats.accepted_extensions()]
    assert next(i for i in out.items if i.kind == "epub").zip_based


def test_upload_hint_names_every_accepted_extension() -> None:
    description = upload.OPENAPI_BODY["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]
    assert all(ext in description["file"]["description"] for ext in formats.accepted_extensions())


def test_old_docx_limit_names_are_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.settings import WorkerSettings
    from task_service.pipeline.limits import ParseLimits

    monkeypatch.setenv("DOCX_MAX_ENTRIES", "77")
    monkeypatch.setenv("DOCX_MAX_INFLATE_RATIO", "55")
    monkeypatch.setenv("ZIP_MAX_UNCOMPRESSED_MB", "3")
    limits = ParseLimits.from_settings(WorkerSettings(_env_file=None))  # type: ignore[call-arg]
    assert (limits.zip_max_entries, limits.zip_max_ratio, limits.zip_max_uncompressed_bytes) == (77, 55.0, 3 * 2**20)


def test_nested_packages_are_bounded() -> None:
    from shared.domain.errors import ParseLimitError
    from task_service.pipeline.limits import ParseLimits, check_zip_limits

    check_zip_limits(sample(by_kind("docx")), ParseLimits(zip_max_depth=1), depth=1)
    with pytest.raises(ParseLimitError, match="ZIP_MAX_DEPTH"):
        check_zip_limits(sample(by_kind("docx")), ParseLimits(zip_max_depth=1), depth=2)


def test_registry_modules_are_pure() -> None:
    """The registry and its byte rules import the standard library and ``shared.domain`` only
    (the whole of ``shared/domain/`` is checked by test_layering)."""
    import ast
    import sys

    for path in (ROOT / "shared/domain/formats.py", ROOT / "shared/domain/containers.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or name.startswith("shared.domain") \
                    or top == "__future__", f"{path.name} imports {name}"


# ------------------------------------------------------------------ archives (issue 29 item 3)


def test_archives_are_typed_by_name_and_by_content() -> None:
    """``.zip`` takes any ZIP (a package too: its parts are the worker's to type); a ZIP with no
    name and no package marker is a zip archive, no longer a 415; ``.tar``/``.tgz``/``.gz`` a tar
    or a gzip stream; a tar without a name by ``ustar``."""
    assert typed("zip", zip_with(["word/document.xml"])).kind == "zip"
    assert typed("", zip_with(["a/b.txt", "c.pdf"])).kind == "zip"
    assert typed("", tar_with({"a.txt": b"x"})).kind == "tar"
    for ext in ("tar", "tgz", "gz"):
        assert typed(ext, tar_with({"a.txt": b"x"}, gz=ext != "tar")).kind == "tar"
    with pytest.raises(sniff.UnsupportedContentError, match="not a ZIP archive"):
        typed("zip", b"plain text")
    with pytest.raises(sniff.UnsupportedContentError, match="not a tar archive"):
        typed("tar", zip_with(["a.txt"]))


def test_an_archive_met_inside_a_document_is_refused_by_its_reader() -> None:
    with pytest.raises(UnsupportedTypeError, match="archive inside another document is not expanded"):
        parse.parse_document(zip_with(["a.txt"]), "attached.zip")
