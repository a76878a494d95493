"""Upload type by content (pure; no I/O): magic bytes must agree with the name and the allow-list.

Allowed: pdf, docx, html, md, txt. The decision is made on the first :data:`HEAD_BYTES` of the
file, before anything is stored:

| name says            | content must be                                                  |
|----------------------|------------------------------------------------------------------|
| ``.pdf``             | ``%PDF-`` within the first 1024 bytes (what PDF readers accept)  |
| ``.docx``            | a ZIP (``PK\\x03\\x04``) whose central directory lists            |
|                      | ``word/document.xml`` (checked once the whole file is stored)    |
| ``.html .htm .md``   | text: UTF-16/32 (BOM, or NUL pattern + strict decode, see        |
| ``.markdown .txt``   | ``shared.text_sniff``), or UTF-8/legacy text with at most a few  |
|                      | stray NUL bytes (:func:`stray_nul_limit`, counted over the whole |
|                      | upload); not a PDF, ZIP or other known binary format             |
| no extension         | any of the above, typed by content (text → txt, or html when it  |
|                      | starts with ``<!doctype html`` / ``<html``)                      |
| anything else        | nothing: 415                                                     |

"No extension" follows the worker's rule (``document_kind``: the ``PurePosixPath`` suffix) so the
API and the worker always agree; a suffix that does not look like an extension (``Dr. Smith``,
``v1.2``, ``report.pdf `` with a trailing space) counts as none. The detected type is stored as a
MIME string in ``document_info.content_type``; the worker parses by it whenever the name's
extension does not say (:func:`parser_filename`).
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from typing import Literal

from shared.doc_types import _EXTENSION, ALLOWED_EXTENSIONS, MIME_TYPES, Kind, parser_filename
from shared.domain.errors import NeedBytesError, UnsupportedContentError
from shared.domain.text_sniff import stray_nul_limit, strip_stray_nuls, wide_encoding

__all__ = [
    "ALLOWED_EXTENSIONS",
    "HEAD_BYTES",
    "MIME_TYPES",
    "NeedBytesError",
    "UnsupportedContentError",
    "Verdict",
    "docx_has_document",
    "judge",
    "parser_filename",
    "stray_nul_limit",
]

HEAD_BYTES = 8192
_PDF_WINDOW = 1024
_PDF_MAGIC = b"%PDF-"
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # local file header; empty archive
_WIDE_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),  # UTF-32 first
              (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_WIDE_BOM_PREFIXES = tuple(bom for bom, _ in _WIDE_BOMS)
_WIDE_TEXT = "UTF-16/32 text"
# Magic numbers of binary formats whose first bytes are not text in any encoding (PNG, JPEG, GIF,
# ELF, Windows PE, gzip, xz, 7z, RAR, zstd, OLE2 (.doc/.xls), Java class, Mach-O, WebAssembly,
# SQLite): binary even when the head happens to hold no NUL byte.
_BINARY_MAGIC = (
    b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"\x7fELF", b"MZ\x90\x00", b"\x1f\x8b",
    b"\xfd7zXZ\x00", b"7z\xbc\xaf\x27\x1c", b"Rar!\x1a\x07", b"\x28\xb5\x2f\xfd", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
    b"\xca\xfe\xba\xbe", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe",
    b"\x00asm", b"SQLite format 3\x00",
)
_EXTENSION_LIKE = re.compile(r"[a-z0-9]{0,9}[a-z][a-z0-9]{0,9}")
DOCX_MAIN_PART = "word/document.xml"
#: Never read more than this much of a ZIP's end (central directory + comment) to type it.
MAX_ZIP_DIRECTORY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    #: Text that is not UTF-16/32: more NUL bytes than :func:`stray_nul_limit` of the size so far
    #: make it binary (→ 415); a few stray ones are accepted (the worker removes and reports them).
    reject_nul: bool
    #: A ZIP: the central directory must list ``word/document.xml`` (:func:`docx_has_document`).
    check_docx: bool

    @property
    def mime(self) -> str:
        return MIME_TYPES[self.kind]


def name_extension(ext: str) -> Kind | Literal["unknown"] | None:
    """The kind an extension names; None for no extension (or a suffix that is not one);
    ``"unknown"`` for an extension outside the allow-list."""
    if ext in ALLOWED_EXTENSIONS:
        return ALLOWED_EXTENSIONS[ext]
    return "unknown" if _EXTENSION_LIKE.fullmatch(ext) else None


def _looks_pdf(head: bytes, anywhere: bool) -> bool:
    return head.startswith(_PDF_MAGIC) or (anywhere and _PDF_MAGIC in head[:_PDF_WINDOW])


def _wide(head: bytes) -> str | None:
    """The UTF-16/32 codec of a head with a BOM or a clear NUL pattern (``text_sniff``), else None."""
    for bom, codec in _WIDE_BOMS:
        if head.startswith(bom):
            return codec
    return wide_encoding(head)


def _looks_html(head: bytes) -> bool:
    codec = _wide(head) or ("utf-8" if head.startswith(b"\xef\xbb\xbf") else "latin-1")
    text = head.decode(codec, errors="ignore").lstrip("\ufeff")
    start = text.lstrip()[:16].lower()
    return start.startswith(("<!doctype html", "<html"))


def _text_head(head: bytes) -> tuple[bool, bool]:
    """``(is text, is UTF-16/32)`` for a head that is not a PDF/ZIP/known binary format; the
    same rules as the worker's ``decode``.

    Text: no NUL at all; or UTF-16/32 (BOM, or a clear NUL pattern unless the NULs are a few
    stray ones in otherwise plausible text); or a few stray NULs in such text; or (weak
    pattern) a strict, plausible UTF-16 reading, e.g. Chinese whose only NULs come from U+xx00
    characters.
    """
    if b"\x00" not in head:
        return True, False
    wide = _wide(head)
    stray = strip_stray_nuls(head, complete=False)
    if wide is not None and (head.startswith(_WIDE_BOM_PREFIXES) or stray is None):
        return True, True
    if stray is not None:
        return True, False
    lenient = wide_encoding(head, lenient=True) is not None
    return lenient, lenient


def _describe(head: bytes) -> str:
    if _looks_pdf(head, anywhere=False):
        return "a PDF"
    if head.startswith(_ZIP_MAGIC):
        return "a ZIP archive"
    if head.startswith(_BINARY_MAGIC):
        return "binary data"
    is_text, wide = _text_head(head)
    if not is_text:
        return "binary data"
    return _WIDE_TEXT if wide else "text"


def _allowed() -> str:
    return ", ".join(_EXTENSION.values())


def judge(ext: str, head: bytes) -> Verdict:
    """Decide the type of an upload from its name's extension (:func:`extension`) and its
    first :data:`HEAD_BYTES` (fewer only when the file is shorter).

    Raises :class:`UnsupportedContentError` (→ 415) with a readable reason. Only the first
    :data:`HEAD_BYTES` of a longer ``head`` are looked at.
    """
    head = head[:HEAD_BYTES]
    named = name_extension(ext)
    if named == "unknown":
        raise UnsupportedContentError(f"file type .{ext} is not allowed; allowed: {_allowed()}")
    seen = _describe(head)
    if named is not None:
        return _judge_named(named, ext, head, seen)
    # No extension: by content alone.
    if seen == "a PDF":
        return Verdict("pdf", reject_nul=False, check_docx=False)
    if seen == "a ZIP archive":
        return Verdict("docx", reject_nul=False, check_docx=True)
    if seen in ("text", _WIDE_TEXT):
        kind: Kind = "html" if _looks_html(head) else "txt"
        return Verdict(kind, reject_nul=seen == "text", check_docx=False)
    raise UnsupportedContentError(f"the content is {seen}, not one of: {_allowed()}")


def _judge_named(named: Kind, ext: str, head: bytes, seen: str) -> Verdict:
    """The name's extension is an allowed one: the content must agree with it."""
    if named == "pdf":
        if not _looks_pdf(head, anywhere=True):
            raise UnsupportedContentError(f"the name says PDF but the content is {seen}, not a PDF")
        return Verdict("pdf", reject_nul=False, check_docx=False)
    if named == "docx":
        if not head.startswith(_ZIP_MAGIC):
            raise UnsupportedContentError(f"the name says DOCX but the content is {seen}, not a DOCX (ZIP) file")
        return Verdict("docx", reject_nul=False, check_docx=True)
    if seen not in ("text", _WIDE_TEXT):  # html, md, txt
        raise UnsupportedContentError(f"the name says .{ext} (text) but the content is {seen}")
    return Verdict(named, reject_nul=seen == "text", check_docx=False)


# ------------------------------------------------------------------ DOCX (ZIP central directory)


class _TailFile(io.RawIOBase):
    """A read-only, seekable view of a ``size``-byte file of which only the last bytes are known."""

    def __init__(self, size: int, tail: bytes) -> None:
        super().__init__()
        self._size, self._tail, self._start, self._pos = size, tail, size - len(tail), 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError("seek before start of file")
        self._pos = base + offset
        return self._pos

    def read(self, size: int = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if end - self._pos > MAX_ZIP_DIRECTORY_BYTES:
            raise zipfile.BadZipFile("ZIP central directory too large")
        if self._pos < self._start and end > self._pos:
            raise NeedBytesError(self._pos)
        out = self._tail[self._pos - self._start:end - self._start] if end > self._pos else b""
        self._pos += len(out)
        return out


def docx_has_document(size: int, tail: bytes) -> bool:
    """Whether a ``size``-byte ZIP whose last ``len(tail)`` bytes are ``tail`` lists
    ``word/document.xml`` in its central directory (only the directory is read; nothing is
    decompressed). False for anything that is not a readable ZIP.

    Raises :class:`NeedBytesError` when the directory starts before ``tail``: call again with the
    file from ``exc.offset`` on (if ``size - exc.offset`` is at most :data:`MAX_ZIP_DIRECTORY_BYTES`;
    a larger directory is not a DOCX this service indexes).
    """
    try:
        with zipfile.ZipFile(_TailFile(size, tail)) as archive:
            return DOCX_MAIN_PART in archive.namelist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, KeyError):
        return False


# ------------------------------------------------------------------ the worker's side


