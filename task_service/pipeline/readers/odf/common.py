"""What the OpenDocument readers (ODT, ODP) share: namespaces and the text walker of ``content.xml``.

OASIS OpenDocument 1.3, Part 3: inside a paragraph (§6), ``text:s`` is ``text:c`` spaces (at
least 1, at most 1,000 here), ``text:tab`` a tab and ``text:line-break`` a newline, so words never
glue; spans, links, fields and other inline elements are walked for their text and tails. A table
(§9.1) gives one text per row (also rows inside header-row and row-group wrappers), its non-blank
cells joined by ``" | "``. What a reader does with notes, annotations, frames and other elements
it knows is its own (the ``other`` hook of ``inline_text``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from lxml import etree

from shared.domain.errors import EncryptedDocumentError

MANIFEST = "{urn:oasis:names:tc:opendocument:xmlns:manifest:1.0}"
OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
SVG = "{urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0}"
PARAGRAPHS = (TEXT + "p", TEXT + "h")
_INLINE_CHARS = {TEXT + "tab": "\t", TEXT + "line-break": "\n"}
_ROW_WRAPPERS = frozenset(TABLE + t for t in ("table-header-rows", "table-rows", "table-row-group"))
_MAX_SPACES = 1_000

InlineHook = Callable[[etree._Element, list[str]], bool]
"""``other(child, parts)``: handle an inline element (``True``), or let it be walked for its text (``False``)."""


def inline_text(element: etree._Element, parts: list[str], other: InlineHook) -> None:
    """Append the text of ``element`` (a paragraph, heading, span...) to ``parts``: its own text, then
    each child's (``text:s``/``text:tab``/``text:line-break`` as characters, comments and PIs skipped,
    the rest through ``other`` or walked the same way) followed by the child's tail."""
    if element.text:
        parts.append(element.text)
    for child in element:
        tag = child.tag
        if tag == TEXT + "s":
            parts.append(" " * spaces(child.get(TEXT + "c")))
        elif tag in _INLINE_CHARS:
            parts.append(_INLINE_CHARS[tag])
        elif isinstance(tag, str) and not other(child, parts):
            inline_text(child, parts, other)
        if child.tail:
            parts.append(child.tail)


def spaces(count: str | None) -> int:
    """The number of spaces a ``text:s`` stands for (``text:c``, default 1, clamped to 1..1,000)."""
    try:
        return max(1, min(int(count or "1"), _MAX_SPACES))
    except ValueError:
        return 1


def table_rows(table: etree._Element, cell_texts: Callable[[etree._Element], list[str]]) -> list[str]:
    """One text per row of ``table``: each cell's non-blank texts (``cell_texts(cell)``) joined by a
    space, the non-blank cells by ``" | "``; rows left blank are dropped (covered cells never count)."""
    texts = []
    for row in rows(table):
        cells = (" ".join(t.strip() for t in cell_texts(cell) if t.strip())
                 for cell in row.iterchildren(TABLE + "table-cell"))
        text = " | ".join(cell for cell in cells if cell)
        if text:
            texts.append(text)
    return texts


def rows(container: etree._Element) -> Iterator[etree._Element]:
    """The ``table:table-row`` elements of a table, through header-row, rows and row-group wrappers."""
    for child in container:
        if child.tag == TABLE + "table-row":
            yield child
        elif child.tag in _ROW_WRAPPERS:
            yield from rows(child)


def raise_if_encrypted(manifest: etree._Element | None, kind: str) -> None:
    """Raise ``EncryptedDocumentError`` when ``META-INF/manifest.xml`` declares ``content.xml``
    encrypted (a password-protected OpenDocument file: ODF 1.2 part 3, section 4.8)."""
    if manifest is None:
        return
    for entry in manifest.iter(MANIFEST + "file-entry"):
        if entry.get(MANIFEST + "full-path") == "content.xml" and entry.find(MANIFEST + "encryption-data") is not None:
            raise EncryptedDocumentError(f"the {kind} file is password-protected; save it without a password")
