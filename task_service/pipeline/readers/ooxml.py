"""Office Open XML machinery shared by the DOCX and PPTX readers (pure: bytes in, elements out).

- ``Package``: a ZIP package (OPC, ECMA-376 Part 2) with case-insensitive part names and resolved
  relationships (``_rels/<part>.rels``; external targets dropped);
- ``parse_xml`` / ``xml_errors``: the locked-down lxml parser (no DTD loading, no entity expansion,
  no network, libxml2's default depth and text-node limits, i.e. no ``XML_PARSE_HUGE``); a part
  with a DOCTYPE is refused, as OPC requires of its own XML ("shall treat the presence of DTD
  declarations as an error", ECMA-376 Part 2, rule M1.18);
- ``choose``: one branch of ``mc:AlternateContent`` (ECMA-376 Part 3, §10.2);
- ``drawing_text``: the text of a DrawingML paragraph (``a:p``: runs, fields, breaks, Office math);
- ``SkippedImage`` / ``image_pixels``: pictures a reader did not read, with what an OCR stage needs
  to pick them (part name, bytes, pixel size read from the file header).

Errors: ``CorruptDocumentError`` (not a ZIP, unreadable entry, malformed XML, a DOCTYPE),
``ParseLimitError`` (XML nested deeper, or a text node longer, than libxml2 allows without
``XML_PARSE_HUGE``: 256 levels, 10,000,000 bytes). The ZIP-bomb pre-check
(``limits.check_zip_limits``) is the caller's job.
"""

from __future__ import annotations

import io
import posixpath
import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO

from lxml import etree

from shared.domain.errors import CorruptDocumentError, ParseLimitError

MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
A14 = "{http://schemas.microsoft.com/office/drawing/2010/main}"
PKG_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
MAX_XML_DEPTH = 256  # libxml2's limit without XML_PARSE_HUGE
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError, OSError)
# No DTD, no entity expansion, no network; libxml2's default depth and text-node limits (no XML_PARSE_HUGE).
SECURE_XML: dict[str, bool] = {
    "resolve_entities": False, "no_network": True, "load_dtd": False, "huge_tree": False,
    "remove_comments": True, "remove_pis": True,
}
CFB_MAGIC = b"\xd0\xcf\x11\xe0"  # an OLE compound file: a legacy binary or an encrypted Office file


@dataclass
class Package:
    """A ZIP package; ``kind`` ("DOCX", "PPTX") names the format in error messages."""

    archive: zipfile.ZipFile
    names: dict[str, str]  # lower-case part name → ZIP entry name (OPC part names are case-insensitive)
    kind: str = "DOCX"
    rels: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)  # part → rId → (type, target)

    @classmethod
    def load(cls, data: bytes, kind: str = "DOCX", legacy: str = ".doc") -> Package:
        """Open ``data`` as a ZIP; ``CorruptDocumentError`` when it is not one (``legacy``: the binary
        format's extension named in the hint when ``data`` is an OLE compound file)."""
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.LargeZipFile, ValueError, *ZIP_ERRORS) as exc:
            hint = f" (an encrypted {kind} or a legacy {legacy} file?)" if data[:4] == CFB_MAGIC else ""
            raise CorruptDocumentError(f"{kind} is not a ZIP package{hint}: {exc}") from exc
        return cls(archive, {info.filename.lower(): info.filename for info in archive.infolist()}, kind)

    def read(self, part: str) -> bytes | None:
        name = self.names.get(part.lower())
        if name is None:
            return None
        with xml_errors(name, self.kind):
            return self.archive.read(name)

    def head(self, part: str, size: int) -> bytes:
        """The first ``size`` bytes of an existing part (b"" when absent or unreadable)."""
        name = self.names.get(part.lower())
        if name is None:
            return b""
        try:
            with self.archive.open(name) as stream:
                return stream.read(size)
        except ZIP_ERRORS:
            return b""

    def size(self, part: str) -> int:
        """The declared uncompressed size of a part in bytes (0 when absent)."""
        name = self.names.get(part.lower())
        return 0 if name is None else self.archive.getinfo(name).file_size

    def open(self, part: str) -> IO[bytes]:
        """A stream of an existing part (the caller checked it exists); read errors surface on read."""
        return self.archive.open(self.names[part.lower()])

    def xml(self, part: str | None) -> etree._Element | None:
        data = None if part is None else self.read(part)
        return None if data is None or part is None else parse_xml(data, part, self.kind)

    def relationships(self, part: str) -> dict[str, tuple[str, str]]:
        """rId → (relationship type's last path segment, e.g. "slide", target part name)."""
        if part not in self.rels:
            folder, name = posixpath.split(part)
            root = self.xml(posixpath.join(folder, "_rels", name + ".rels"))
            found: dict[str, tuple[str, str]] = {}
            for rel in () if root is None else root.iter(PKG_RELS):
                if rel.get("TargetMode") != "External":
                    target = rel.get("Target", "")
                    path = target.lstrip("/") if target.startswith("/") else posixpath.join(folder, target)
                    found[rel.get("Id", "")] = (rel.get("Type", "").rsplit("/", 1)[-1], posixpath.normpath(path))
            self.rels[part] = found
        return self.rels[part]

    def target(self, part: str, rid: str) -> str | None:
        return self.relationships(part).get(rid, ("", None))[1]

    def related(self, part: str, kind: str) -> str | None:
        return next((path for typ, path in self.relationships(part).values() if typ == kind), None)


def parse_xml(data: bytes, part: str, kind: str) -> etree._Element:
    """Parse one part with the locked-down parser; errors as ``xml_errors`` says."""
    with xml_errors(part, kind):
        root = etree.fromstring(data, etree.XMLParser(**SECURE_XML))
    check_doctype(root, part, kind)
    return root


def check_doctype(root: etree._Element, part: str, kind: str) -> None:
    if root.getroottree().docinfo.doctype:
        raise CorruptDocumentError(f"{kind} part {part!r} has a DOCTYPE, which Office packages may not contain")


@contextmanager
def xml_errors(part: str, kind: str) -> Iterator[None]:
    """Parser and ZIP errors → ``ParseLimitError`` (libxml2 limits) or ``CorruptDocumentError``."""
    try:
        yield
    except etree.XMLSyntaxError as exc:
        message = str(exc)
        if "depth" in message.lower() or "huge" in message.lower():
            raise ParseLimitError(
                f"{kind} part {part!r} exceeds the XML parser's limits ({MAX_XML_DEPTH} levels of nesting, "
                f"10,000,000 bytes per text node): {message}"
            ) from exc
        raise CorruptDocumentError(f"{kind} part {part!r} is not well-formed XML: {message}") from exc
    except ZIP_ERRORS as exc:
        raise CorruptDocumentError(f"{kind} part {part!r} cannot be read: {exc}") from exc


def choose(alternate: etree._Element, understood: frozenset[str]) -> etree._Element | tuple[()]:
    """The first ``mc:Choice`` whose required namespaces are all ``understood``, else ``mc:Fallback``,
    else nothing (an empty tuple, so callers can iterate the result either way)."""
    for branch in alternate:
        if branch.tag == MC + "Choice":
            prefixes = branch.get("Requires", "").split()
            if all(branch.nsmap.get(prefix) in understood for prefix in prefixes):
                return branch
        elif branch.tag == MC + "Fallback":
            return branch
    return ()


# ---------------------------------------------------------------- DrawingML text

_A_BREAKS = {A + "br": "\n", A + "tab": "\t"}


def drawing_text(paragraph: etree._Element, understood: frozenset[str] = frozenset()) -> str:
    """The text of a DrawingML paragraph ``a:p``: runs and fields (``a:r``, ``a:fld``: their ``a:t``),
    ``a:br`` → newline, Office math (``a14:m``: its ``m:t``); ``mc:AlternateContent`` through
    ``choose(understood)``. Properties (``a:pPr``, ``a:rPr``, ``a:endParaRPr``) carry no text."""
    parts: list[str] = []
    _drawing_inline(paragraph, parts, understood)
    return "".join(parts)


def _drawing_inline(container: etree._Element | tuple[()], parts: list[str], understood: frozenset[str]) -> None:
    for child in container:
        tag = child.tag
        if tag in (A + "r", A + "fld"):
            parts.extend(t.text or "" for t in child.iterchildren(A + "t"))
        elif tag in _A_BREAKS:
            parts.append(_A_BREAKS[tag])
        elif tag == A14 + "m":
            parts.extend(t.text or "" for t in child.iter(M + "t"))
        elif tag == MC + "AlternateContent":
            _drawing_inline(choose(child, understood), parts, understood)


# ---------------------------------------------------------------- pictures not read


@dataclass(frozen=True)
class SkippedImage:
    """A picture a reader counted but did not read: where it is and how big, for an OCR stage.

    ``part``: ZIP part name ("ppt/media/image3.png"); ``size``: its bytes (uncompressed);
    ``pixels``: (width, height) from the file header (PNG, GIF, BMP, JPEG), None when unknown;
    ``page``: the slide (or page) it sits on, 1-based, None when not meaningful.
    """

    part: str
    size: int
    pixels: tuple[int, int] | None = None
    page: int | None = None


IMAGE_HEAD_BYTES = 64 * 1024  # enough for a JPEG frame header after the usual EXIF/ICC segments


def image_pixels(head: bytes) -> tuple[int, int] | None:
    """(width, height) from the first bytes of a PNG, GIF, BMP or JPEG file; None otherwise."""
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return width, height
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return width, height
    if head[:2] == b"BM" and len(head) >= 26:
        width, height = struct.unpack("<ii", head[18:26])
        return abs(width), abs(height)
    if head[:2] == b"\xff\xd8":
        return _jpeg_pixels(head)
    return None


_JPEG_FRAMES = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def _jpeg_pixels(head: bytes) -> tuple[int, int] | None:
    """Walk JPEG marker segments up to the first start-of-frame (ITU T.81 §B.2.2)."""
    at = 2
    while at + 9 <= len(head):
        if head[at] != 0xFF:
            return None
        marker = head[at + 1]
        if marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", head[at + 5: at + 9])
            return width, height
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        (length,) = struct.unpack(">H", head[at + 2: at + 4])
        at += 2 + length
    return None
