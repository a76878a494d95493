"""ZIP packages and their XML, for every ZIP/XML reader (DOCX, PPTX, ODT, ODP, EPUB; XML documents).

- ``ZipPackage``: a ZIP package opened safely (``ZipPackage.open`` runs the ZIP-bomb pre-check
  ``limits.check_zip_limits`` first), its entries looked up by exact name, else case-insensitively
  (OPC part names are case-insensitive; a differently cased href of an EPUB still finds its file),
  read errors translated; a part is read with :func:`read_entry`, which never inflates more
  than the part's declared size + 1 byte (``ZipFile.read`` lets zlib inflate up to 1 GiB per call
  before the size or CRC check fails on a part that lies about its size);
- ``parse_xml`` / ``xml_errors`` / ``SECURE_XML``: the locked-down lxml parser. It loads no DTD,
  fetches nothing from the network and keeps libxml2's default depth (256 levels) and text-node
  (10,000,000 bytes) limits (no ``XML_PARSE_HUGE``). ``internal_entities=True`` expands entities
  *declared in the document's own internal subset* (never external ones: no file, no URL);
  libxml2 (≥ 2.11) refuses an entity whose expansion amplifies the input more than tenfold past
  1 MB ("billion laughs"), which surfaces as ``ParseLimitError`` here. ``doctype=False`` refuses a
  part with a DOCTYPE (Office packages: "shall treat the presence of DTD declarations as an error",
  ECMA-376 Part 2, rule M1.18);
- ``local``: an element's tag without its namespace.

Errors: ``CorruptDocumentError`` (not a ZIP, unreadable entry, malformed XML, a refused DOCTYPE),
``ParseLimitError`` (the ZIP-bomb pre-check; XML depth, text node or entity amplification limits).
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Self

from lxml import etree

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from shared.domain.ole import OLE_MAGIC  # an OLE compound file: a legacy binary or an encrypted Office file
from task_service.pipeline.limits import ParseLimits, check_zip_limits

ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError,
              OSError, ValueError)
MAX_XML_DEPTH = 256  # libxml2's limit without XML_PARSE_HUGE
# No DTD, no entity expansion, no network; libxml2's default depth and text-node limits (no XML_PARSE_HUGE).
SECURE_XML: dict[str, bool] = {
    "resolve_entities": False, "no_network": True, "load_dtd": False, "huge_tree": False,
    "remove_comments": True, "remove_pis": True,
}
_LIMIT_WORDS = ("depth", "huge", "amplification", "entity reference loop", "too large", "exceeds")


@dataclass
class ZipPackage:
    """A ZIP package; ``kind`` ("DOCX", "EPUB", "ODT"...) names the format in error messages."""

    archive: zipfile.ZipFile
    names: dict[str, str]  # lower-case entry name → ZIP entry name
    kind: str

    @classmethod
    def open(cls, data: bytes, limits: ParseLimits, kind: str, legacy: str | None = None) -> Self:
        """``check_zip_limits`` (``ParseLimitError``), then ``load``."""
        check_zip_limits(data, limits, kind=kind)
        return cls.load(data, kind, legacy)

    @classmethod
    def load(cls, data: bytes, kind: str, legacy: str | None = None) -> Self:
        """Open ``data`` as a ZIP; ``CorruptDocumentError`` when it is not one (``legacy``: the binary
        format's extension named in the hint when ``data`` is an OLE compound file)."""
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
        except ZIP_ERRORS as exc:
            hint = f" (an encrypted {kind} or a legacy {legacy} file?)" if legacy and data[:4] == OLE_MAGIC[:4] else ""
            raise CorruptDocumentError(f"{kind} is not a ZIP package{hint}: {exc}") from exc
        return cls(archive, {info.filename.lower(): info.filename for info in archive.infolist()}, kind)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.archive.close()

    def entry(self, part: str) -> str | None:
        """The ZIP entry name of ``part`` (exact, else case-insensitive), None when absent."""
        return part if part in self.archive.NameToInfo else self.names.get(part.lower())

    def read(self, part: str) -> bytes | None:
        """The bytes of ``part`` (None when absent); ``CorruptDocumentError`` when unreadable."""
        name = self.entry(part)
        if name is None:
            return None
        return read_entry(self.archive, name, self.kind)

    def head(self, part: str, size: int) -> bytes:
        """The first ``size`` bytes of an existing part (b"" when absent or unreadable)."""
        name = self.entry(part)
        if name is None:
            return b""
        try:
            with self.archive.open(name) as stream:
                return stream.read(size)
        except ZIP_ERRORS:
            return b""

    def size(self, part: str) -> int:
        """The declared uncompressed size of a part in bytes (0 when absent)."""
        name = self.entry(part)
        return 0 if name is None else self.archive.getinfo(name).file_size

    def stream(self, part: str) -> IO[bytes]:
        """A stream of an existing part (the caller checked it exists); read errors surface on read."""
        return self.archive.open(self.entry(part) or part)

    def xml(self, part: str | None, *, doctype: bool = True) -> etree._Element | None:
        """The root element of ``part`` (None when ``part`` is None or absent); errors as ``parse_xml``."""
        data = None if part is None else self.read(part)
        return None if data is None or part is None else parse_xml(data, self.kind, part, doctype=doctype)


def read_entry(archive: zipfile.ZipFile, name: str, kind: str) -> bytes:
    """The bytes of ZIP entry ``name``, inflating at most its declared size + 1 byte.

    Raises ``CorruptDocumentError`` when the entry is unreadable, fails its CRC, or inflates to
    more than it declares (the bound stops zlib there, the size check refuses it)."""
    with xml_errors(kind, name):
        info = archive.getinfo(name)
        with archive.open(info) as stream:
            data = stream.read(info.file_size + 1)
    if len(data) > info.file_size:
        raise CorruptDocumentError(f"{kind} part {name!r} inflates to more than its declared {info.file_size:,} bytes")
    return data


def parser(*, internal_entities: bool = False) -> etree.XMLParser:
    """A fresh hardened parser (lxml parsers are not thread-safe to share)."""
    return etree.XMLParser(**(SECURE_XML | {"resolve_entities": "internal" if internal_entities else False}))


def parse_xml(
    data: bytes, kind: str, part: str, *, internal_entities: bool = False, doctype: bool = True
) -> etree._Element:
    """The root element of ``data``; errors as the module docstring says (``doctype=False``: a
    DOCTYPE is refused with ``CorruptDocumentError``)."""
    with xml_errors(kind, part):
        root = etree.fromstring(data, parser(internal_entities=internal_entities))
    if root is None:
        raise CorruptDocumentError(f"{kind} part {part!r} holds no XML element")
    if not doctype:
        check_doctype(root, kind, part)
    return root


def check_doctype(root: etree._Element, kind: str, part: str) -> None:
    """``CorruptDocumentError`` when the document of ``root`` has a DOCTYPE (refused in Office packages)."""
    if root.getroottree().docinfo.doctype:
        raise CorruptDocumentError(f"{kind} part {part!r} has a DOCTYPE, which Office packages may not contain")


@contextmanager
def xml_errors(kind: str, part: str) -> Iterator[None]:
    """Parser and ZIP errors → ``ParseLimitError`` (libxml2's limits) or ``CorruptDocumentError``."""
    try:
        yield
    except etree.XMLSyntaxError as exc:
        message = str(exc)
        if any(word in message.lower() for word in _LIMIT_WORDS):
            raise ParseLimitError(
                f"{kind} part {part!r} exceeds the XML parser's limits ({MAX_XML_DEPTH} levels of nesting, "
                f"10,000,000 bytes per text node, entity expansion): {message}"
            ) from exc
        raise CorruptDocumentError(f"{kind} part {part!r} is not well-formed XML: {message}") from exc
    except ZIP_ERRORS as exc:
        raise CorruptDocumentError(f"{kind} part {part!r} cannot be read: {exc}") from exc


def local(tag: object) -> str:
    """An element's tag without its namespace (``""`` for comments, entities, PIs)."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""
