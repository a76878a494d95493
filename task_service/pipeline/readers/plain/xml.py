"""XML → blocks: the text content of the elements in document order (lxml, hardened parser).

Parsing: ``_shared/xmlzip.parse_xml`` (no DTD loading, no network, entities of the internal subset
expanded under libxml2's amplification guard, so a "billion laughs" file is refused with
``ParseLimitError`` in microseconds; 256 levels of nesting and 10 MB text nodes at most). Bytes
lxml cannot decode (no declaration, legacy code page) go through ``decode.py`` first.

Walking (the path of element names is the ``section``, at most ``_SECTION_PARTS`` names):

- a *leaf* (no child element) with a short one-line value is a field ``name: value``;
  consecutive fields of one parent are merged into one block (one line each, at most
  ``_GROUP_CHARS`` characters a block), so a record ``<book><title>…</title><year>…</year></book>``
  is one meaningful block, not two fragments;
- a leaf with a long or multi-line value, and an element with *mixed content* (its own text
  beside child elements: ``<para>Some <em>words</em></para>``), is a block of its own: all of
  its text, the pieces of different elements separated by a space (XML says nothing about
  rendering, and glued words are lost to search while a split inline word is rare);
- attributes whose value reads as text (``title``, ``alt``, ``label``... or several words) are
  fields ``name: value`` of their element; identifiers, numbers and URLs are not text;
- comments and processing instructions are dropped; CDATA is text.

Limits: nesting deeper than ``ParseLimits.structured_max_depth`` or more text values than
``structured_max_values`` → ``ParseLimitError``. Errors: ``CorruptDocumentError`` (malformed).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lxml import etree

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from task_service.pipeline.decode import decode
from task_service.pipeline.document import Block, ParsedDocument, section_path
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers._shared.xmlzip import local, parse_xml

_SHORT = 120  # a leaf value up to this long (one line) is a field of its parent's block
_GROUP_CHARS = 1_000
_SECTION_PARTS = 5
_TEXT_ATTRS = frozenset("title alt label caption summary description desc name text note comment subject".split())
_WORDY = re.compile(r"[^\W\d_]{2,}\s+\S")  # two or more words: a sentence-like attribute value
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of an XML document in document order (text not yet normalized) and warnings.

    Raises ``CorruptDocumentError`` (not well-formed) and ``ParseLimitError`` (nesting, value
    count, text node size, entity amplification beyond the limits).
    """
    root, warnings = _parse(data)
    walker = _Walker(limits)
    group = _Group()
    walker.element(root, (), group)
    walker.flush(group, ())
    if walker.entities:
        warnings.append(f"{walker.entities:,} external entity reference(s) not expanded")
    return ParsedDocument(tuple(walker.blocks), tuple(warnings))


def _parse(data: bytes) -> tuple[etree._Element, list[str]]:
    try:
        return _parse_entities(data), []
    except CorruptDocumentError as exc:
        if "encoding" not in str(exc).lower() and "utf-8" not in str(exc).lower():
            raise
    decoded = decode(data)  # undeclared legacy bytes: decode, then parse the text as UTF-8
    text = _XML_DECL.sub("", decoded.text, count=1)
    return _parse_entities(text.encode("utf-8")), list(decoded.warnings)


def _parse_entities(data: bytes) -> etree._Element:
    """Internal entities expanded; an external entity (never fetched) makes libxml2 call it undefined:
    then the document is parsed again with no entity expanded (references counted in a warning)."""
    try:
        return parse_xml(data, "XML", "document", internal_entities=True)
    except CorruptDocumentError as exc:
        if "not defined" not in str(exc):
            raise
    return parse_xml(data, "XML", "document")


@dataclass
class _Group:
    """Pending ``name: value`` lines of one element, flushed as one block."""

    lines: list[str] = field(default_factory=list)
    size: int = 0


@dataclass
class _Walker:
    limits: ParseLimits
    blocks: list[Block] = field(default_factory=list)
    values: int = 0
    entities: int = 0

    def element(self, el: etree._Element, path: tuple[str, ...], group: _Group) -> None:
        name = local(el.tag)
        here = (*path, name)
        if len(here) > self.limits.structured_max_depth:
            raise ParseLimitError(
                f"XML elements nested more than {self.limits.structured_max_depth} levels deep (STRUCTURED_MAX_DEPTH)"
            )
        kids = [child for child in el if isinstance(child.tag, str)]
        self.entities += sum(1 for child in el if child.tag is etree.Entity)
        attrs = _text_attributes(el)
        if not kids:
            tails = "".join(" " + (child.tail or "") for child in el if child.tag is etree.Entity)
            self._leaf(name, (el.text or "") + tails, attrs, path, group)
        elif _has_own_text(el):
            self.flush(group, path)
            self._count()
            text = " ".join(piece for piece in el.itertext() if piece.strip())
            self.blocks.append(Block("\n".join((*attrs, text)), _section(here)))
        else:
            own = _Group()
            for line in attrs:
                self.add(own, here, line)
            for child in kids:
                self.element(child, here, own)
            self.flush(own, here)

    def _leaf(self, name: str, value: str, attrs: list[str], path: tuple[str, ...], group: _Group) -> None:
        for line in attrs:
            self.add(group, path, line)
        if not value.strip():
            return
        self._count()
        if len(value) <= _SHORT and "\n" not in value.strip():
            self.add(group, path, f"{name}: {value.strip()}")
            return
        self.flush(group, path)
        self.blocks.append(Block(value, _section((*path, name))))

    def add(self, group: _Group, path: tuple[str, ...], line: str) -> None:
        if group.size + len(line) > _GROUP_CHARS:
            self.flush(group, path)
        group.lines.append(line)
        group.size += len(line) + 1

    def flush(self, group: _Group, path: tuple[str, ...]) -> None:
        if group.lines:
            self.blocks.append(Block("\n".join(group.lines), _section(path)))
            group.lines, group.size = [], 0

    def _count(self) -> None:
        self.values += 1
        if self.values > self.limits.structured_max_values:
            raise ParseLimitError(
                f"XML holds more than {self.limits.structured_max_values:,} text values (STRUCTURED_MAX_VALUES)"
            )


def _has_own_text(el: etree._Element) -> bool:
    if el.text and el.text.strip():
        return True
    return any(child.tail and child.tail.strip() for child in el)


def _text_attributes(el: etree._Element) -> list[str]:
    found = []
    for key, value in el.attrib.items():
        name = local(key)
        if "://" in value or not value.strip():
            continue
        if name.lower() in _TEXT_ATTRS or _WORDY.search(value):
            found.append(f"{name}: {value.strip()}")
    return found


def _section(path: tuple[str, ...]) -> str | None:
    shown = list(path[-_SECTION_PARTS:])
    if len(path) > _SECTION_PARTS:
        shown.insert(0, "…")
    return section_path(shown)
