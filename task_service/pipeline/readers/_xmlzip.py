"""Shared by the ZIP/XML readers (EPUB, ODT, XML): a ZIP opener and a locked-down lxml parser.

The parser loads no DTD, fetches nothing from the network and keeps libxml2's default depth
(256 levels) and text-node (10,000,000 bytes) limits (no ``XML_PARSE_HUGE``), as ``docx.py``'s
does. ``internal_entities=True`` expands entities *declared in the document's own internal
subset* (never external ones: no file, no URL); libxml2 (≥ 2.11) refuses an entity whose
expansion amplifies the input more than tenfold past 1 MB ("billion laughs"), which surfaces as
``ParseLimitError`` here. Errors: ``CorruptDocumentError`` (not a ZIP, unreadable entry, malformed
XML), ``ParseLimitError`` (depth, text node or entity amplification limits).
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from lxml import etree

from shared.domain.errors import CorruptDocumentError, ParseLimitError

ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError,
              OSError, ValueError)
_LIMIT_WORDS = ("depth", "huge", "amplification", "entity reference loop", "too large", "exceeds")


def open_zip(data: bytes, kind: str) -> zipfile.ZipFile:
    """``data`` as a ZIP archive; ``CorruptDocumentError`` naming ``kind`` when it is not one."""
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except ZIP_ERRORS as exc:
        raise CorruptDocumentError(f"{kind} is not a ZIP package: {exc}") from exc


def read_member(archive: zipfile.ZipFile, name: str, kind: str) -> bytes | None:
    """The bytes of entry ``name`` (``None`` when absent); ``CorruptDocumentError`` when unreadable."""
    try:
        archive.getinfo(name)
    except KeyError:
        return None
    with xml_errors(kind, name):
        return archive.read(name)


def parser(*, internal_entities: bool = False) -> etree.XMLParser:
    """A fresh hardened parser (lxml parsers are not thread-safe to share)."""
    return etree.XMLParser(
        resolve_entities="internal" if internal_entities else False,
        no_network=True, load_dtd=False, huge_tree=False, remove_comments=True, remove_pis=True,
    )


def parse_xml(data: bytes, kind: str, part: str, *, internal_entities: bool = False) -> etree._Element:
    """The root element of ``data``; errors as the module docstring says."""
    with xml_errors(kind, part):
        root = etree.fromstring(data, parser(internal_entities=internal_entities))
    if root is None:
        raise CorruptDocumentError(f"{kind} part {part!r} holds no XML element")
    return root


@contextmanager
def xml_errors(kind: str, part: str) -> Iterator[None]:
    """Parser and ZIP errors → ``ParseLimitError`` (libxml2's limits) or ``CorruptDocumentError``."""
    try:
        yield
    except etree.XMLSyntaxError as exc:
        message = str(exc)
        if any(word in message.lower() for word in _LIMIT_WORDS):
            raise ParseLimitError(
                f"{kind} part {part!r} exceeds the XML parser's limits (256 levels of nesting, 10,000,000 bytes "
                f"per text node, entity expansion): {message}"
            ) from exc
        raise CorruptDocumentError(f"{kind} part {part!r} is not well-formed XML: {message}") from exc
    except ZIP_ERRORS as exc:
        raise CorruptDocumentError(f"{kind} part {part!r} cannot be read: {exc}") from exc


def local(tag: object) -> str:
    """An element's tag without its namespace (``""`` for comments, entities, PIs)."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""
