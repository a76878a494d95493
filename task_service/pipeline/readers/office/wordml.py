"""The WordprocessingML walker of the DOCX reader (``docx.py`` has the rules it follows): its
namespaces, the styles' heading levels, and :class:`Walker`, which turns stories (body, notes,
headers, footers) into blocks and counts what it does not read."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from lxml import etree

from task_service.pipeline.document import Block, HeadingStack
from task_service.pipeline.readers.office.equations import GAP, math_text, resolve_gaps
from task_service.pipeline.readers.office.numbering import ListNumbering
from task_service.pipeline.readers.office.ooxml import choose

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
W = "{" + W_NS + "}"
M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
V = "{urn:schemas-microsoft-com:vml}"
_O = "{urn:schemas-microsoft-com:office:office}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
DGM = "{http://schemas.openxmlformats.org/drawingml/2006/diagram}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
DOC_PR = "{http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing}docPr"
REL_TYPES = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"

# Namespaces whose mc:Choice content this walker reads (else it takes mc:Fallback).
_UNDERSTOOD = frozenset({
    W_NS,
    "http://schemas.microsoft.com/office/word/2010/wordprocessingShape",  # wps
    "http://schemas.microsoft.com/office/word/2010/wordprocessingGroup",  # wpg
    "http://schemas.microsoft.com/office/word/2010/wordprocessingCanvas",  # wpc
    "http://schemas.microsoft.com/office/word/2010/wordprocessingDrawing",  # wp14
    "http://schemas.microsoft.com/office/word/2010/wordml",  # w14
    "http://schemas.microsoft.com/office/word/2012/wordml",  # w15
    "http://schemas.microsoft.com/office/drawing/2010/main",  # a14
})
# Containers that are transparent: their content is read as if it stood in their place.
WRAPPERS = frozenset(W + t for t in (
    "sdt", "sdtContent", "customXml", "smartTag", "ins", "moveTo", "hyperlink", "fldSimple", "dir", "bdo",
    "rubyBase",
))
_RUN_CHARS = {W + "tab": "\t", W + "ptab": "\t", W + "br": "\n", W + "cr": "\n", W + "noBreakHyphen": "-"}
_SKIPPED_NOTES = frozenset({"separator", "continuationSeparator", "continuationNotice"})
# Symbol font (code − 0xF000 when in the private-use area) → Unicode, for the glyphs that carry meaning.
_SYMBOL = dict(zip(
    map(ord, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"),
    "ΑΒΧΔΕΦΓΗΙϑΚΛΜΝΟΠΘΡΣΤΥςΩΞΨΖαβχδεφγηιϕκλμνοπθρστυϖωξψζ",
    strict=True,
)) | {0xA3: "≤", 0xA5: "∞", 0xAE: "→", 0xB0: "°", 0xB1: "±", 0xB3: "≥", 0xB4: "×", 0xB7: "•",
      0xB8: "÷", 0xB9: "≠", 0xBB: "≈", 0xD6: "√", 0xE5: "∑", 0xF2: "∫", 0xA2: "′", 0xB2: "″"}


def outline_level(ppr: etree._Element | None) -> int | None:
    """``w:outlineLvl`` 0..8 → heading level 1..9; 9 (body text), absent or bad → None."""
    node = None if ppr is None else ppr.find(W + "outlineLvl")
    value = None if node is None else node.get(W + "val", "")
    return int(value) + 1 if value is not None and value.isdecimal() and int(value) < 9 else None


# ---------------------------------------------------------------- the walker


class Walker:
    """Walks WordprocessingML stories into ``blocks``; ``counts`` of things not read (warnings)."""

    def __init__(self, heading_levels: dict[str, int], numbering: ListNumbering) -> None:
        self.levels = heading_levels
        self.numbering = numbering
        self.blocks: list[Block] = []
        self.counts: Counter[str] = Counter()
        self.out = self.blocks  # where finished blocks go (a row's trailing list inside a table)
        self.cell: list[str] | None = None  # paragraph texts of the table cell being read
        self.flow = False  # headings count (body, outside tables and text boxes)
        self.section: str | None = None
        self.headings = HeadingStack()
        self.note_sections: dict[tuple[str, str], str | None] = {}
        self.seen_furniture: set[str] = set()
        self._block_handlers: dict[str, Callable[[etree._Element], None]] = {
            W + "p": self._paragraph, W + "tbl": self._table,
            MC + "AlternateContent": lambda el: self._blocks(_choose(el)),
            W + "altChunk": lambda el: self._count("altchunk"),
            M + "oMathPara": self._math_block, M + "oMath": self._math_block,
        }

    # stories

    def block(self, element: etree._Element) -> None:
        """One block-level element (paragraph, table, content control...) of the current story."""
        tag = element.tag
        handler = self._block_handlers.get(tag) if isinstance(tag, str) else None
        if handler is not None:
            handler(element)
        elif tag in WRAPPERS:
            self._blocks(element)

    def walk_notes(self, kind: str, root: etree._Element | None) -> None:
        tag = W + kind[:-1]  # footnotes → w:footnote
        for note in () if root is None else root.iterchildren(tag):
            if note.get(W + "type") not in _SKIPPED_NOTES:
                self.section = self.note_sections.get((kind, note.get(W + "id", "")))
                self._blocks(note)
        self.section = None

    def walk_furniture(self, root: etree._Element | None) -> None:
        """A header or footer part; paragraphs already seen in another one are skipped."""
        if root is None:
            return
        start = len(self.blocks)
        self._blocks(root)
        kept = []
        for block in self.blocks[start:]:
            if block.text not in self.seen_furniture:
                self.seen_furniture.add(block.text)
                kept.append(block)
        self.blocks[start:] = kept

    # block level

    def _blocks(self, container: etree._Element) -> None:
        for child in container:
            self.block(child)

    def _paragraph(self, p: etree._Element) -> None:
        parts: list[str] = []
        outer, self.out = self.out, []
        boxes = self.out
        label = self.numbering.label(p.find(W + "pPr"))  # counted before its text boxes' paragraphs
        self._inline(p, parts)
        self.out = outer
        text = resolve_gaps("".join(parts))
        if label and text.strip():
            text = f"{label} {text.lstrip()}"
        self._emit(text, p)
        self.out.extend(boxes)

    def _emit(self, text: str, p: etree._Element | None) -> None:
        """A paragraph's text: into the table cell being read, or a block (a heading when ``p`` is one)."""
        if self.cell is not None:
            self.cell.append(text)
        elif text.strip():
            if self.flow and p is not None:
                self._heading(p, text)
            self.out.append(Block(text, self.section))

    def _math_block(self, element: etree._Element) -> None:
        """An equation standing as a paragraph of its own (``m:oMathPara``/``m:oMath`` at block level)."""
        self._emit(math_text(element), None)

    def _heading(self, p: etree._Element, text: str) -> None:
        ppr = p.find(W + "pPr")
        if ppr is None:
            return
        style = ppr.find(W + "pStyle")
        if ppr.find(W + "outlineLvl") is not None:  # direct formatting wins, "9" (body text) included
            level = outline_level(ppr)
        else:
            level = None if style is None else self.levels.get(style.get(W + "val", ""))
        if level is None:
            return
        self.section = self.headings.enter(level, text)

    def _table(self, tbl: etree._Element) -> None:
        outer_out, outer_cell, outer_flow = self.out, self.cell, self.flow
        self.flow = False
        for row in _children(tbl, W + "tr"):
            trailing: list[Block] = []
            self.out = trailing
            cells = []
            for tc in _children(row, W + "tc"):
                self.cell = []
                self._blocks(tc)
                cells.append(" ".join(t.strip() for t in self.cell if t.strip()))
            text = " | ".join(c for c in cells if c)
            if text:
                outer_out.append(Block(text, self.section))
            outer_out.extend(trailing)
        self.out, self.cell, self.flow = outer_out, outer_cell, outer_flow

    # inline level

    def _inline(self, container: etree._Element, parts: list[str]) -> None:
        for child in container:
            tag = child.tag
            if tag == W + "r":
                self._run(child, parts)
            elif tag in WRAPPERS:
                self._inline(child, parts)
            elif tag == MC + "AlternateContent":
                self._inline(_choose(child), parts)
            elif isinstance(tag, str) and tag.startswith(M):
                parts.append(f"{GAP}{math_text(child)}{GAP}")

    def _run(self, run: etree._Element, parts: list[str]) -> None:
        for child in run:
            tag = child.tag
            if tag == W + "t":
                parts.append(child.text or "")
            elif tag in _RUN_CHARS:
                parts.append(_RUN_CHARS[tag])
            elif tag == W + "sym":
                parts.append(_symbol(child))
            elif tag in (W + "drawing", W + "pict", W + "object"):
                self._objects(child)
            elif tag == MC + "AlternateContent":
                self._run(_choose(child), parts)
            elif tag in (W + "footnoteReference", W + "endnoteReference"):
                kind = "footnotes" if tag == W + "footnoteReference" else "endnotes"
                self.note_sections[(kind, child.get(W + "id", ""))] = self.section
            elif tag == W + "ruby":
                self._inline(child, parts)

    def _objects(self, element: etree._Element) -> None:
        """Text boxes and alt texts inside a drawing/picture become blocks; images, charts, diagrams, OLE
        objects are counted (their pixels are not read)."""
        if element.tag == W + "object":
            self._count("object")
            return
        for node in _find_objects(element):
            tag = node.tag
            if tag == DOC_PR:  # a drawing's alt text (descr) or, failing that, its title
                alt = (node.get("descr") or node.get("title") or "").strip()
                if alt:
                    self.out.append(Block(alt, self.section))
            elif tag == W + "txbxContent":
                outer = self.cell, self.flow
                self.cell, self.flow = None, False
                self._blocks(node)
                self.cell, self.flow = outer
            else:
                self._count(_OBJECT_KINDS[tag])

    def _count(self, kind: str) -> None:
        self.counts[kind] += 1


_OBJECT_KINDS = {
    A + "blip": "image", V + "imagedata": "image", C + "chart": "chart", DGM + "relIds": "diagram",
    _O + "OLEObject": "object",
}


def _find_objects(element: etree._Element) -> Iterator[etree._Element]:
    """Text box contents and counted objects below ``element``, not descending into a text box
    (its own drawings are found when it is walked) and taking one branch of mc:AlternateContent."""
    for child in element:
        tag = child.tag
        if tag == W + "txbxContent" or tag in _OBJECT_KINDS or tag == DOC_PR:
            yield child
        elif tag == MC + "AlternateContent":
            yield from _find_objects(_choose(child))
        elif isinstance(tag, str):
            yield from _find_objects(child)


def _children(element: etree._Element, tag: str) -> Iterator[etree._Element]:
    """Children with ``tag``, looking through content controls and custom XML (rows, cells)."""
    for child in element:
        if child.tag == tag:
            yield child
        elif child.tag in WRAPPERS:
            yield from _children(child, tag)
        elif child.tag == MC + "AlternateContent":
            yield from _children(_choose(child), tag)


def _choose(alternate: etree._Element) -> etree._Element | tuple[()]:
    return choose(alternate, _UNDERSTOOD)


def _symbol(sym: etree._Element) -> str:
    try:
        code = int(sym.get(W + "char", ""), 16)
    except ValueError:
        return ""
    private = 0xF000 <= code <= 0xF0FF
    if private:
        code -= 0xF000
    if sym.get(W + "font", "").strip().lower() == "symbol" and code in _SYMBOL:
        return _SYMBOL[code]
    if private and not 0x20 <= code < 0x7F:
        return ""  # a dingbat of a decorative font: no meaning as text
    return chr(code) if 0x20 <= code < 0xD800 or 0xE000 <= code <= 0x10FFFF else ""
