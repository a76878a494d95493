"""The one registry of document formats (pure: stdlib only, no I/O).

Every layer derives from :data:`FORMATS`: the API's typing by name and by content
(``knowledge_service/upload/sniff.py``, with the byte rules in ``shared.domain.containers``),
the worker's dispatch (``task_service/pipeline/parse.py`` resolves :attr:`Format.reader`), the
upload hint and 415 message, ``GET /api/v1/formats`` (the admin page's file picker), the CLI's
folder walk and the README's format table (:func:`markdown_table`; a unit test keeps them equal).

Adding a format = one reader module in its family under ``task_service/pipeline/readers/``
exposing ``read(data: bytes, limits: ParseLimits) -> ParsedDocument``, its short name in
``readers.FAMILIES``, one entry here, and tests. The domain names a reader only by that short
name (``"docx"``), never by a worker module path.

How the bytes are recognised (:class:`Container`):

| container      | rule                                                                             |
|----------------|----------------------------------------------------------------------------------|
| ``pdf``        | ``%PDF-`` within the first 1024 bytes                                            |
| ``zip``        | a ZIP whose central directory lists :attr:`Format.marker` (``word/document.xml``)|
| ``zip-mimetype``| a ZIP whose first entry ``mimetype`` (stored) holds :attr:`Format.marker`       |
|                | (OpenDocument, EPUB: ODF 1.2 part 3 §3.3, EPUB OCF 3 §4.3)                      |
| ``ole``        | an OLE2 compound file (MS-CFB) with a stream whose name starts with the marker   |
| ``text``       | text by the text rules (``shared.text_sniff``); typed by name, or by content     |
|                | (:attr:`Format.text_pattern`, matched case-insensitively at the start of the     |
|                | text) when the name has no extension; with ``pattern_required`` also by name     |
| ``image``      | one of :attr:`Format.magic` (offset, bytes, MIME)                                |
| ``archive``    | an archive whose members become documents (``zip``: a ZIP that is no document    |
|                | package; ``tar``: ``ustar`` at offset 257, or a gzip stream), expanded by the    |
|                | worker, not read (ARCHITECTURE.md "Flow 4: an archive")                          |

A ZIP-based format (:attr:`Format.zip_based`) is read only after the ZIP-bomb and nesting
limits (``ZIP_MAX_*``) pass. A refused format (:attr:`Format.refusal`) would be recognised so
that the answer can say what to do instead of "not allowed" (none is, since the legacy Office
binaries are read: ``readers/legacy/``, issue 29).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePosixPath

__all__ = [
    "ACCEPTED",
    "ENCRYPTED_MESSAGE",
    "ENCRYPTED_OLE_STREAMS",
    "FORMATS",
    "Container",
    "Format",
    "Magic",
    "accepted_extensions",
    "by_extension",
    "by_kind",
    "by_mime",
    "extension",
    "hint",
    "is_extension",
    "markdown_table",
    "parser_filename",
    "skip_reason",
]

class Container(StrEnum):
    """How a format's bytes are recognised (see the module docstring)."""

    PDF = "pdf"
    ZIP = "zip"
    ZIP_MIMETYPE = "zip-mimetype"
    OLE = "ole"
    TEXT = "text"
    IMAGE = "image"
    ARCHIVE = "archive"


@dataclass(frozen=True)
class Magic:
    """``mime`` when every ``(offset, bytes)`` of ``parts`` is found at its offset."""

    mime: str
    parts: tuple[tuple[int, bytes], ...]

    def matches(self, head: bytes) -> bool:
        return all(head[offset:offset + len(b)] == b for offset, b in self.parts)


@dataclass(frozen=True)
class Format:
    """One document format.

    ``extensions``: lower case, no dot, the canonical one first. ``mime``: what is stored as
    the document's content type; ``mime_aliases`` are recognised too. ``marker``: the ZIP part,
    ODF/EPUB ``mimetype`` value or OLE stream-name prefix that identifies the container (see
    :class:`Container`). ``reader``: the short name of its reader (``"docx"``), which the
    worker's dispatch resolves to a module whose ``read(data, limits)`` parses it. ``refusal``:
    set for a format recognised only to be refused, the client-facing reason.
    """

    kind: str
    label: str
    extensions: tuple[str, ...]
    mime: str
    container: Container
    reader: str = ""
    mime_aliases: tuple[str, ...] = ()
    marker: str = ""
    alt_markers: tuple[str, ...] = ()
    text_pattern: str = ""
    pattern_required: bool = False
    magic: tuple[Magic, ...] = ()
    refusal: str | None = None

    @property
    def accepted(self) -> bool:
        return self.refusal is None

    @property
    def zip_based(self) -> bool:
        """ZIP-bomb and nesting limits apply before the reader opens the package."""
        return self.container in (Container.ZIP, Container.ZIP_MIMETYPE)

    @property
    def is_archive(self) -> bool:
        """Its members become documents of their own (the worker expands it; Flow 4)."""
        return self.container is Container.ARCHIVE

    @property
    def markers(self) -> tuple[str, ...]:
        return (self.marker, *self.alt_markers) if self.marker else ()

    @property
    def mimes(self) -> tuple[str, ...]:
        return (self.mime, *self.mime_aliases)


def _code(kind: str, label: str, extensions: tuple[str, ...], mime: str, *aliases: str) -> Format:
    """Source code of one language: text, cut at its top-level definitions (``readers/markup/code.py``)."""
    return Format(kind, label, extensions, mime, Container.TEXT, "code", mime_aliases=aliases)


_OOXML = "application/vnd.openxmlformats-officedocument"
_ODF = "application/vnd.oasis.opendocument"
#: RFC 5322 header lines (continuations included) up to a ``From:`` line with an address.
_RFC822 = r"(?:[!-9;-~]+:[^\n]*\n(?:[ \t][^\n]*\n)*)*?from:[^\n]*@"
_IMAGE_MAGIC = (
    Magic("image/png", ((0, b"\x89PNG\r\n\x1a\n"),)),
    Magic("image/jpeg", ((0, b"\xff\xd8\xff"),)),
    Magic("image/tiff", ((0, b"II*\x00"),)),
    Magic("image/tiff", ((0, b"MM\x00*"),)),
    Magic("image/webp", ((0, b"RIFF"), (8, b"WEBP"))),
    Magic("image/bmp", ((0, b"BM"), (6, b"\x00\x00\x00\x00"))),  # "BM", file size, 4 reserved zero bytes
    # HEIF (ISO/IEC 23008-12): an ``ftyp`` box first, its major brand says HEVC-coded (HEIC) or any
    *(Magic("image/heic", ((4, b"ftyp" + brand),)) for brand in (b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis")),
    *(Magic("image/heif", ((4, b"ftyp" + brand),)) for brand in (b"mif1", b"msf1")),
)

#: Every format, accepted ones first in the order of the README table; refused ones last.
FORMATS: tuple[Format, ...] = (
    Format("pdf", "PDF document", ("pdf",), "application/pdf", Container.PDF, "pdf"),
    Format("docx", "Word document", ("docx",), f"{_OOXML}.wordprocessingml.document", Container.ZIP,
           "docx", marker="word/document.xml"),
    Format("pptx", "PowerPoint presentation", ("pptx", "pptm"), f"{_OOXML}.presentationml.presentation",
           Container.ZIP, "pptx", mime_aliases=("application/vnd.ms-powerpoint.presentation.macroEnabled.12",),
           marker="ppt/presentation.xml"),
    Format("xlsx", "Excel workbook", ("xlsx", "xlsm"), f"{_OOXML}.spreadsheetml.sheet", Container.ZIP,
           "xlsx", mime_aliases=("application/vnd.ms-excel.sheet.macroEnabled.12",),
           marker="xl/workbook.xml"),
    Format("odt", "OpenDocument text", ("odt",), f"{_ODF}.text", Container.ZIP_MIMETYPE, "odt",
           marker=f"{_ODF}.text"),
    Format("odp", "OpenDocument presentation", ("odp",), f"{_ODF}.presentation", Container.ZIP_MIMETYPE,
           "odp", marker=f"{_ODF}.presentation"),
    Format("ods", "OpenDocument spreadsheet", ("ods",), f"{_ODF}.spreadsheet", Container.ZIP_MIMETYPE,
           "ods", marker=f"{_ODF}.spreadsheet"),
    Format("epub", "EPUB e-book", ("epub",), "application/epub+zip", Container.ZIP_MIMETYPE, "epub",
           marker="application/epub+zip"),
    Format("html", "HTML page", ("html", "htm"), "text/html", Container.TEXT, "html",
           mime_aliases=("application/xhtml+xml",), text_pattern=r"<!doctype html|<html"),
    Format("md", "Markdown", ("md", "markdown"), "text/markdown", Container.TEXT, "markdown",
           mime_aliases=("text/x-markdown",)),
    Format("txt", "Plain text", ("txt",), "text/plain", Container.TEXT, "text"),
    Format("csv", "CSV / TSV table", ("csv", "tsv"), "text/csv", Container.TEXT, "csv",
           mime_aliases=("text/tab-separated-values",)),
    Format("json", "JSON / JSON Lines", ("json", "jsonl", "ndjson"), "application/json", Container.TEXT,
           "jsondoc", mime_aliases=("application/x-ndjson", "application/jsonl")),
    Format("xml", "XML", ("xml",), "application/xml", Container.TEXT, "xml",
           mime_aliases=("text/xml",), text_pattern=r"<\?xml"),
    Format("rtf", "Rich Text Format", ("rtf",), "application/rtf", Container.TEXT, "rtf",
           mime_aliases=("text/rtf",), text_pattern=r"\{\\rtf", pattern_required=True),
    Format("eml", "E-mail message", ("eml",), "message/rfc822", Container.TEXT, "eml",
           text_pattern=_RFC822),
    Format("msg", "Outlook message", ("msg",), "application/vnd.ms-outlook", Container.OLE, "msg",
           marker="__substg1.0_", alt_markers=("__properties_version1.0",)),
    Format("image", "Image (OCR)", ("png", "jpg", "jpeg", "tif", "tiff", "webp", "bmp", "heic", "heif"), "image/png",
           Container.IMAGE, "image",
           mime_aliases=("image/jpeg", "image/tiff", "image/webp", "image/bmp", "image/heic", "image/heif"),
           magic=_IMAGE_MAGIC),
    Format("doc", "Word 97-2003 document", ("doc", "dot"), "application/msword", Container.OLE,
           "doc", marker="WordDocument"),
    Format("xls", "Excel 97-2003 workbook", ("xls", "xlt"), "application/vnd.ms-excel", Container.OLE,
           "xls", marker="Workbook", alt_markers=("Book",)),
    Format("ppt", "PowerPoint 97-2003 presentation", ("ppt", "pot", "pps"), "application/vnd.ms-powerpoint",
           Container.OLE, "ppt", marker="PowerPoint Document"),
    Format("rst", "reStructuredText", ("rst", "rest"), "text/x-rst", Container.TEXT, "rst"),
    Format("org", "Org mode", ("org",), "text/org", Container.TEXT, "org"),
    Format("adoc", "AsciiDoc", ("adoc", "asciidoc"), "text/asciidoc", Container.TEXT, "asciidoc"),
    Format("tex", "LaTeX", ("tex", "latex"), "text/x-tex", Container.TEXT, "latex",
           mime_aliases=("application/x-tex",)),
    Format("yaml", "YAML", ("yaml", "yml"), "application/yaml", Container.TEXT, "config",
           mime_aliases=("text/yaml", "application/x-yaml", "text/x-yaml")),
    Format("toml", "TOML", ("toml",), "application/toml", Container.TEXT, "config"),
    Format("ini", "INI / config file", ("ini", "cfg", "conf"), "text/x-ini", Container.TEXT, "config"),
    Format("log", "Log file", ("log",), "text/x-log", Container.TEXT, "log"),
    _code("python", "Python source", ("py", "pyi"), "text/x-python", "text/x-script.python"),
    _code("go", "Go source", ("go",), "text/x-go"),
    _code("javascript", "JavaScript source", ("js", "mjs", "cjs", "jsx"), "text/javascript",
          "application/javascript"),
    _code("typescript", "TypeScript source", ("ts", "tsx", "mts", "cts"), "text/x-typescript",
          "application/typescript"),
    _code("java", "Java source", ("java",), "text/x-java"),
    _code("kotlin", "Kotlin source", ("kt", "kts"), "text/x-kotlin"),
    _code("csharp", "C# source", ("cs",), "text/x-csharp"),
    _code("c", "C source / header", ("c", "h"), "text/x-c", "text/x-csrc", "text/x-chdr"),
    _code("cpp", "C++ source / header", ("cpp", "cc", "cxx", "hpp", "hh", "hxx"), "text/x-c++",
          "text/x-c++src", "text/x-c++hdr"),
    _code("rust", "Rust source", ("rs",), "text/rust", "text/x-rust"),
    _code("ruby", "Ruby source", ("rb",), "text/x-ruby", "application/x-ruby"),
    _code("php", "PHP source", ("php",), "application/x-httpd-php", "text/x-php"),
    _code("shell", "Shell script", ("sh", "bash", "zsh"), "application/x-sh", "text/x-shellscript"),
    _code("sql", "SQL script", ("sql",), "application/sql", "text/x-sql"),
    _code("swift", "Swift source", ("swift",), "text/x-swift"),
    _code("scala", "Scala source", ("scala",), "text/x-scala"),
    _code("lua", "Lua source", ("lua",), "text/x-lua"),
    _code("perl", "Perl source", ("pl", "pm"), "text/x-perl", "application/x-perl"),
    Format("zip", "ZIP archive (one document per member)", ("zip",), "application/zip", Container.ARCHIVE,
           "archive", mime_aliases=("application/x-zip-compressed",)),
    Format("tar", "tar archive, gzip-compressed or not (one document per member)", ("tar", "tgz", "gz"),
           "application/x-tar", Container.ARCHIVE, "archive", mime_aliases=("application/gzip", "application/x-gzip",
                                                                             "application/x-gtar")),
)
ACCEPTED: tuple[Format, ...] = tuple(f for f in FORMATS if f.accepted)
#: Streams of an OLE file that wraps a password-protected OOXML package (MS-OFFCRYPTO §2.3.4).
ENCRYPTED_OLE_STREAMS = ("EncryptionInfo", "EncryptedPackage")
#: What a password-protected Office file gets (``encrypted``), at upload and in the worker.
ENCRYPTED_MESSAGE = ("the file is password-protected (an encrypted Word, Excel or PowerPoint file): open it, remove "
                     "the password (File > Info > Protect > Encrypt with Password, empty) and upload it again")

_BY_KIND = {f.kind: f for f in FORMATS}
_BY_EXTENSION = {ext: f for f in FORMATS for ext in f.extensions}
_BY_MIME = {mime.lower(): f for f in FORMATS for mime in f.mimes}


def by_kind(kind: str) -> Format:
    """The format of ``kind``. Raises KeyError."""
    return _BY_KIND[kind]


def by_extension(ext: str) -> Format | None:
    """The format an extension (lower case, no dot) names, accepted or refused; None if none."""
    return _BY_EXTENSION.get(ext)


def by_mime(content_type: str | None) -> Format | None:
    """The format of a MIME type (parameters such as ``; charset=`` ignored); None if none."""
    return _BY_MIME.get((content_type or "").split(";", 1)[0].strip().lower())


def accepted_extensions() -> tuple[str, ...]:
    """Every extension of an accepted format, in registry order."""
    return tuple(ext for f in ACCEPTED for ext in f.extensions)


def hint() -> str:
    """The accepted types in one line, for 415 answers and page hints."""
    return ", ".join(accepted_extensions())


def extension(name: str) -> str:
    """The lower-case extension of a file name (``PurePosixPath`` suffix after ``\\`` → ``/``),
    without the dot; ``""`` if none. The API and the worker both use this rule."""
    return PurePosixPath(name.replace("\\", "/")).suffix.lower().lstrip(".")


#: A suffix that looks like an extension (``Dr. Smith``, ``v1.2``, ``report.pdf `` have none).
_EXTENSION_LIKE = re.compile(r"[a-z0-9]{0,9}[a-z][a-z0-9]{0,9}")


def is_extension(ext: str) -> bool:
    """Whether ``ext`` (from :func:`extension`) is an extension at all (else: typed by content)."""
    return bool(_EXTENSION_LIKE.fullmatch(ext))


def skip_reason(name: str) -> str | None:
    """Why a file of a folder is not worth sending (its extension is not an accepted format's),
    or None: an accepted extension, or none at all (the API types it by content)."""
    ext = extension(name)
    fmt = by_extension(ext)
    if fmt is None:
        return f".{ext} is not a supported type" if is_extension(ext) else None
    return fmt.refusal


def parser_filename(filename: str, content_type: str | None) -> str:
    """The name to hand the worker's dispatch (which picks the reader by extension): the stored
    name when its extension is the format detected at upload (``content_type``) or, that being
    unknown, an accepted format's; else ``document.<ext>`` for the detected type (a DOCX named
    .doc, a PDF named .txt: read as what the bytes are). Older rows whose content type is not one
    of ours keep their name (→ ``unsupported_type`` when it is not accepted either).
    """
    named = by_extension(extension(filename))
    fmt = by_mime(content_type)
    if named is not None and named.accepted and (fmt is None or fmt.kind == named.kind):
        return filename
    return filename if fmt is None else f"document.{fmt.extensions[0]}"


def _cells(f: Format) -> Iterable[str]:
    yield f.label
    yield ", ".join(f".{e}" for e in f.extensions)
    yield ", ".join(f"`{m}`" for m in f.mimes)
    yield {
        Container.PDF: "`%PDF-` in the first 1 KiB",
        Container.ZIP: f"ZIP with `{f.marker}`",
        Container.ZIP_MIMETYPE: f"ZIP, `mimetype` = `{f.marker}`",
        Container.OLE: "OLE2 with a " + " or ".join(f"`{m}`" for m in f.markers) + " stream",
        Container.TEXT: _text_rule(f),
        Container.IMAGE: "PNG, JPEG, TIFF, WebP, BMP, HEIF magic",
        Container.ARCHIVE: "a ZIP that is no document package" if f.kind == "zip" else
        "`ustar` at offset 257, or a gzip stream",
    }[f.container]
    yield f.refusal or f"`{f.reader}`"


def _text_rule(f: Format) -> str:
    if not f.text_pattern:
        return "text"
    shown = "RFC 5322 headers with `From:`" if f.text_pattern == _RFC822 else f"`{f.text_pattern}`"
    return f"text; {'content must start' if f.pattern_required else 'no extension: content starting'} {shown}"


def markdown_table() -> str:
    """The README's format table (one row per format; the last column is the reader's short name,
    ``task_service.pipeline.readers.FAMILIES``, or the refusal)."""
    rows = ["| Format | Extensions | MIME type | Recognised by | Reader / answer |", "|---|---|---|---|---|"]
    rows += ["| " + " | ".join(cell.replace("|", "\\|") for cell in _cells(f)) + " |" for f in FORMATS]
    return "\n".join(rows)
