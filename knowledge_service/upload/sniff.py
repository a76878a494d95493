"""Upload type by content (pure; no I/O): the bytes must agree with the name and the registry.

The accepted formats and how their bytes are recognised are :mod:`shared.domain.formats`'s; the
byte rules are :mod:`shared.domain.containers`'s. Two steps:

1. :func:`judge`, on the first :data:`HEAD_BYTES` of the file, before anything is stored:

   | name says                 | content must be                                              |
   |---------------------------|--------------------------------------------------------------|
   | a PDF kind (``.pdf``)     | ``%PDF-`` within the first 1024 bytes                        |
   | a ZIP kind (``.docx``,    | a ZIP (its marker part is checked in step 2; an ODF/EPUB     |
   | ``.pptx``, ``.odt``...)   | ``mimetype`` entry is read here), or an OLE2 file (step 2    |
   |                           | tells a password-protected or legacy Office file)            |
   | ``.msg``, ``.doc``,       | an OLE2 compound file (step 2 checks its streams)            |
   | ``.xls``, ``.ppt``        |                                                              |
   | an image (``.png``...)    | the magic bytes of PNG, JPEG, TIFF, WebP, BMP or HEIF        |
   | an archive: ``.zip``      | a ZIP (any: its members are the worker's to type)            |
   | ``.tar``, ``.tgz``, ``.gz``| a tar (``ustar`` at 257) or a gzip stream                   |
   | a text kind (``.txt``,    | text: UTF-16/32 (BOM, or NUL pattern + strict decode, see    |
   | ``.md``, ``.csv``,        | ``shared.text_sniff``), or UTF-8/legacy text with at most a  |
   | ``.json``, ``.eml``...)   | few stray NUL bytes (:func:`stray_nul_limit`, counted over   |
   |                           | the whole upload); ``.rtf`` must start with ``{\\rtf``        |
   | a refused kind            | nothing: 415 with the registry's refusal (none at present)   |
   | no extension              | any of the above, typed by content (a ZIP or OLE2 file in    |
   |                           | step 2: a ZIP that is no package is a ``zip`` archive; a tar |
   |                           | by ``ustar``; text by the registry's ``text_pattern``, else  |
   |                           | txt)                                                         |
   | anything else             | nothing: 415                                                 |

2. :func:`identify_package`, for a ZIP or OLE2 file once it is whole (in memory, or stored:
   from the bytes kept, or ranged reads): the ZIP's central directory must list the format's
   marker part; an OLE2 file's directory says msg, a refused legacy format, or a
   password-protected package (415 ``encrypted``).

"No extension" follows the worker's rule (``formats.extension``: the ``PurePosixPath`` suffix)
so the API and the worker always agree; a suffix that does not look like an extension (``Dr.
Smith``, ``v1.2``, ``report.pdf `` with a trailing space) counts as none. The detected type is
stored as a MIME string in ``document_info.content_type``; the worker parses by it whenever the
name's extension does not say (``formats.parser_filename``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import BinaryIO, cast

from shared.domain import containers
from shared.domain.errors import NeedBytesError, UnsupportedContentError
from shared.domain.formats import (
    ENCRYPTED_MESSAGE,
    FORMATS,
    Container,
    Format,
    by_extension,
    by_kind,
    hint,
    is_extension,
)
from shared.domain.text_sniff import stray_nul_limit, strip_stray_nuls, wide_encoding

__all__ = [
    "HEAD_BYTES",
    "NeedBytesError",
    "UnsupportedContentError",
    "Verdict",
    "identify_package",
    "judge",
    "stray_nul_limit",
]

HEAD_BYTES = 8192
#: The content type of a stored ZIP / OLE2 file until :func:`identify_package` has typed it.
ZIP_MIME = "application/zip"
OLE_MIME = "application/x-ole-storage"
_WIDE_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),  # UTF-32 first
              (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_WIDE_BOM_PREFIXES = tuple(bom for bom, _ in _WIDE_BOMS)
_WIDE_TEXT = "UTF-16/32 text"
_TEXT = ("text", _WIDE_TEXT)
_PDF, _ZIP, _OLE = "a PDF", "a ZIP archive", "an OLE2 compound file (Office 97-2003 or Outlook)"
# Magic numbers of binary formats whose first bytes are not text in any encoding (GIF, ELF,
# Windows PE, gzip, xz, 7z, RAR, zstd, Java class, Mach-O, WebAssembly, SQLite): binary even
# when the head happens to hold no NUL byte (images, PDF, ZIP, OLE2 are recognised first).
_BINARY_MAGIC = (
    b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"\x7fELF", b"MZ\x90\x00", b"\x1f\x8b",
    b"\xfd7zXZ\x00", b"7z\xbc\xaf\x27\x1c", b"Rar!\x1a\x07", b"\x28\xb5\x2f\xfd", containers.OLE_MAGIC,
    b"\xca\xfe\xba\xbe", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe",
    b"\x00asm", b"SQLite format 3\x00",
)
_PACKAGES = (Container.ZIP, Container.ZIP_MIMETYPE)


@dataclass(frozen=True)
class Verdict:
    """What :func:`judge` decided from the head.

    ``kind``: the format, or None when a ZIP/OLE2 file without a telling name is typed by
    :func:`identify_package` once whole. ``mime``: the content type to store meanwhile.
    ``reject_nul``: text that is not UTF-16/32 (more NUL bytes than :func:`stray_nul_limit`
    of the size so far make it binary → 415). ``check_package``: call :func:`identify_package`.
    ``named``: the format the name's extension says, if any.
    """

    kind: str | None
    mime: str
    reject_nul: bool = False
    check_package: bool = False
    named: str | None = None


def _of(fmt: Format, *, reject_nul: bool = False, check: bool = False, mime: str | None = None,
        named: bool = True) -> Verdict:
    return Verdict(fmt.kind, mime or fmt.mime, reject_nul, check, fmt.kind if named else None)


def name_extension(ext: str) -> Format | None:
    """The format an extension names (accepted or refused); None for no extension (or a suffix
    that is not one). Raises :class:`UnsupportedContentError` for an extension outside the
    registry."""
    fmt = by_extension(ext)
    if fmt is None and is_extension(ext):
        raise UnsupportedContentError(f"file type .{ext} is not allowed; allowed: {hint()}")
    return fmt


def _wide(head: bytes) -> str | None:
    """The UTF-16/32 codec of a head with a BOM or a clear NUL pattern (``text_sniff``), else None."""
    for bom, codec in _WIDE_BOMS:
        if head.startswith(bom):
            return codec
    return wide_encoding(head)


def _head_text(head: bytes) -> str:
    """The head as text, well enough to match a format's ``text_pattern`` (ASCII prefixes)."""
    codec = _wide(head) or ("utf-8" if head.startswith(b"\xef\xbb\xbf") else "latin-1")
    return head.decode(codec, errors="ignore")


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
    if containers.looks_pdf(head, anywhere=False):
        return _PDF
    if containers.is_zip(head):
        return _ZIP
    if containers.is_ole(head):
        return _OLE
    image = containers.image_mime(head)
    if image is not None:
        return f"an image ({image})"
    if head.startswith(_BINARY_MAGIC):
        return "binary data"
    is_text, wide = _text_head(head)
    if not is_text:
        return "binary data"
    return _WIDE_TEXT if wide else "text"


def judge(ext: str, head: bytes) -> Verdict:
    """Decide the type of an upload from its name's extension (``formats.extension``) and its
    first :data:`HEAD_BYTES` (fewer only when the file is shorter).

    Raises :class:`UnsupportedContentError` (→ 415) with a readable reason. Only the first
    :data:`HEAD_BYTES` of a longer ``head`` are looked at.
    """
    head = head[:HEAD_BYTES]
    named = name_extension(ext)
    seen = _describe(head)
    if named is not None and _other_format(named, head, seen):
        return _judge_content(head, seen)  # a DOCX named .doc, a PDF named .txt: read as what it is
    if named is not None and named.refusal is not None:
        raise UnsupportedContentError(named.refusal)
    if named is not None:
        return _judge_named(named, ext, head, seen)
    return _judge_content(head, seen)


def _other_format(named: Format, head: bytes, seen: str) -> bool:
    """Whether ``head`` bears the signature of a container other than the one ``named``'s format has:
    a PDF, a ZIP or an image where the name says something else (an OLE2 file or mere text is not
    evidence enough: text named .pdf stays refused). The content's own format then decides."""
    if seen == _PDF:
        return named.container is not Container.PDF
    if seen == _ZIP:  # a .zip takes any ZIP, a package too (its parts are the archive's members)
        return named.container not in _PACKAGES and not named.is_archive
    if containers.image_mime(head) is not None:
        return named.container is not Container.IMAGE
    return False


def _judge_content(head: bytes, seen: str) -> Verdict:
    """No extension: by content alone."""
    if seen == _PDF:
        return _of(by_kind("pdf"), named=False)
    if seen == _ZIP:
        fmt = containers.zip_format(head, None)
        return Verdict(None, ZIP_MIME, check_package=True) if fmt is None else _of(fmt, named=False)
    if seen == _OLE:
        return Verdict(None, OLE_MIME, check_package=True)
    if containers.is_tar(head):
        return _of(by_kind("tar"), named=False)
    image = containers.image_mime(head)
    if image is not None:
        return _of(by_kind("image"), mime=image, named=False)
    if seen in _TEXT:
        fmt = containers.text_format(_head_text(head)) or by_kind("txt")
        return _of(fmt, reject_nul=seen == "text", named=False)
    raise UnsupportedContentError(f"the content is {seen}, not one of: {hint()}")


def _judge_named(fmt: Format, ext: str, head: bytes, seen: str) -> Verdict:
    """The name's extension is an accepted format's: the content must agree with it."""
    says = f"the name says .{ext} ({fmt.label})"
    if fmt.container is Container.PDF:
        if not containers.looks_pdf(head, anywhere=True):
            raise UnsupportedContentError(f"{says} but the content is {seen}, not a PDF")
        return _of(fmt)
    if fmt.container in _PACKAGES or fmt.container is Container.OLE:
        return _judge_package(fmt, ext, head, seen)
    if fmt.is_archive:
        return _judge_archive(fmt, says, head, seen)
    if fmt.container is Container.IMAGE:
        image = containers.image_mime(head)
        if image is None:
            raise UnsupportedContentError(
                f"{says} but the content is {seen}, not a PNG, JPEG, TIFF, WebP, BMP or HEIC/HEIF image"
            )
        return _of(fmt, mime=image)
    if seen not in _TEXT:  # text kinds
        raise UnsupportedContentError(f"{says}, a text format, but the content is {seen}")
    if fmt.pattern_required and not re.match(fmt.text_pattern, _head_text(head).lstrip("\ufeff \t\r\n"), re.I):
        raise UnsupportedContentError(f"{says} but the content is text that is not {fmt.label}")
    return _of(fmt, reject_nul=seen == "text")


def _judge_package(fmt: Format, ext: str, head: bytes, seen: str) -> Verdict:
    """A ZIP or OLE2 kind by name: a ZIP (checked whole later, unless its ``mimetype`` says), or
    an OLE2 file (encrypted, legacy or msg: checked whole later)."""
    if seen == _OLE:
        return _of(fmt, check=True)
    if seen == _ZIP and fmt.container is not Container.OLE:
        typed = containers.zip_format(head, None)
        if typed is not None and typed.kind != fmt.kind:
            return _of(typed, named=False)  # an ODT named .epub: read as what it is
        return _of(fmt, check=typed is None)
    wanted = "an OLE2 compound file" if fmt.container is Container.OLE else f"a {ext.upper()} (ZIP) file"
    raise UnsupportedContentError(f"the name says .{ext} ({fmt.label}) but the content is {seen}, not {wanted}")


def _judge_archive(fmt: Format, says: str, head: bytes, seen: str) -> Verdict:
    """``.zip``: any ZIP; ``.tar``/``.tgz``/``.gz``: a tar or a gzip stream (the worker finds a
    gzip stream that is no tar corrupt). The members are typed by the worker's plan."""
    if fmt.kind == "zip" and seen == _ZIP:
        return _of(fmt)
    if fmt.kind == "tar" and (containers.is_tar(head) or containers.is_gzip(head)):
        return _of(fmt)
    wanted = "a ZIP archive" if fmt.kind == "zip" else "a tar archive (or a gzip stream)"
    raise UnsupportedContentError(f"{says} but the content is {seen}, not {wanted}")


# ------------------------------------------------------------------ step 2: the whole package


def identify_package(verdict: Verdict, size: int, pieces: list[tuple[int, bytes]]) -> Verdict:
    """The final verdict for a ZIP or OLE2 upload (``verdict.check_package``) of ``size`` bytes
    of which ``pieces`` (``(offset, bytes)``, the first at offset 0) are known.

    Raises :class:`UnsupportedContentError` (``error_code`` ``encrypted`` for a password-protected
    Office file) and ``NeedBytesError(offset, length)`` when the directory lies outside
    ``pieces`` (fetch that range and call again).
    """
    file = cast(BinaryIO, containers.SparseFile(size, pieces))
    head = pieces[0][1]
    if containers.is_zip(head):
        fmt = _zip(verdict, head, containers.zip_names(file))
    else:
        fmt = _ole(containers.ole_names(file))
    if verdict.named is not None and fmt.kind != verdict.named:
        return Verdict(fmt.kind, fmt.mime)  # a PPTX named .docx: read as what it is (its content type)
    return Verdict(fmt.kind, fmt.mime, named=verdict.named)


def _zip(verdict: Verdict, head: bytes, names: list[str] | None) -> Format:
    fmt = containers.zip_format(head, names)
    if fmt is not None:
        return fmt
    if verdict.named is not None:
        named = by_kind(verdict.named)
        raise UnsupportedContentError(f"the content is a ZIP archive without {named.marker}, not a "
                                      f"{named.extensions[0].upper()} ({named.label})")
    return by_kind("zip")  # no name to go by, no package: an archive of files


def _ole(names: list[str] | None) -> Format:
    if names is None:
        raise UnsupportedContentError("the content is not a readable OLE2 compound file")
    found = containers.ole_format(names)
    if found == "encrypted":
        raise UnsupportedContentError(ENCRYPTED_MESSAGE, error_code="encrypted")
    if found is None:
        kinds = ", ".join(f".{f.extensions[0]}" for f in FORMATS if f.container is Container.OLE)
        raise UnsupportedContentError(f"the content is an OLE2 compound file that is none of: {kinds}")
    if found.refusal is not None:
        raise UnsupportedContentError(found.refusal)
    return found
