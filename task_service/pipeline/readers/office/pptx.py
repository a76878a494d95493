"""PPTX (and PPTM, PPSX, POTX: the same PresentationML package) → blocks: our own walker over the
slide parts (zipfile + lxml, ``readers.ooxml``), no python-pptx. Macros (``vbaProject.bin``) are
never read, let alone run.

Why our own walker: measured with ``python -m bench.parsers pptx`` (markers of
``tests/fidelity/pptx_corpus.py``; MB/s of slide + notes XML of a 300-slide deck, median of 5;
figures in ``bench/RESULTS.md``, section ``parsers-msg-eml-pptx-xlsx-ods-odp``): a python-pptx
walker (every shape recursively, tables, chart titles, alt text, notes) misses
``mc:AlternateContent`` shapes, Office math, SmartArt, chart series names and layout text, and is
slower; markitdown misses title-only alt text, ``mc:AlternateContent``, math, SmartArt and layout
text, and is slower still; unstructured's ``partition_pptx`` is not measured (its ``pptx`` extra
is not installed; it reads through python-pptx as well).

What is read (ECMA-376 Part 1, §19 PresentationML, §20 DrawingML), slide by slide in the order of
``p:sldIdLst`` (hidden slides included, their section marked "(hidden slide)", no warning; a slide
named again is read once, with a warning):

- every shape of the slide's tree: text of shapes and placeholders (one block per paragraph;
  ``a:br`` → newline, fields, Office math), group shapes (recursively), tables (a row is one
  block, its cells joined by ``" | "``; merged-away empty cells dropped), SmartArt (the text of
  its data model's nodes), charts (titles and series names; the data is counted in a warning),
  the alt text of any shape (``p:cNvPr/@descr``, else ``@title``) as a block after its text;
- reading order: the title placeholder first, then shapes top to bottom, left to right by their
  offsets (``a:off``; a placeholder without its own offset takes the one of the layout's
  placeholder with the same ``idx``, else the same type, else the master's); inside a group, its
  children by their own (child-space) offsets; ties keep document order. Of ``mc:AlternateContent``
  only the first branch we understand;
- speaker notes: one block "Speaker notes: …" after the slide's shapes (slide image, number,
  header, footer and date placeholders of the notes page skipped);
- ``page`` = slide number (1-based, hidden slides counted), ``section`` = the title's text, or
  "Slide N" when there is none;
- the text of non-placeholder shapes on the layouts and masters the slides use (a logo caption, a
  "Confidential" banner): once each, after the last slide, without page or section (as DOCX
  headers and footers). Placeholder prompt text of layouts ("Click to add title") is not text;
- pictures big enough for text (``ocr.MIN_EMBEDDED_SIZE``) OCRed in their place, before their alt text;
  counted in warnings, not read: smaller pictures (``read_with_images``), charts' data, OLE objects, comments.

Errors: ``CorruptDocumentError`` (not a ZIP, no presentation part, unreadable entry, malformed XML),
``UnsupportedTypeError`` (Strict Open XML), ``ParseLimitError`` (the ZIP-bomb pre-check
``limits.check_zip_limits``, run first; XML nested deeper than 256 levels or a text node over 10 MB).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from lxml import etree

from shared.domain.errors import CorruptDocumentError, UnsupportedTypeError
from task_service.pipeline import ocr
from task_service.pipeline.document import Block, ParsedDocument, count_warnings
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers._shared.pictures import SkippedImage, skipped_image
from task_service.pipeline.readers._shared.slides import SLIDE_WARNINGS, slide_blocks
from task_service.pipeline.readers._shared.slides import Item as _Item
from task_service.pipeline.readers.office.drawing import (
    P,
    Placeholders,
    Position,
    alt_text,
    paragraphs,
    placeholders,
    shape_offset,
    shape_tree,
    shapes,
    slide_ids,
    table_rows,
)
from task_service.pipeline.readers.office.ooxml import A as _A
from task_service.pipeline.readers.office.ooxml import Package, R

_C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
_DGM = "{http://schemas.openxmlformats.org/drawingml/2006/diagram}"
_STRICT_PRESENTATION = "{http://purl.oclc.org/ooxml/presentationml/main}presentation"
_TITLES = frozenset({"title", "ctrTitle"})
_MASTER_TYPES = {"ctrTitle": "title", "subTitle": "body", "obj": "body"}
_NOTES_SKIPPED = frozenset({"sldImg", "sldNum", "hdr", "ftr", "dt"})



def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of a PPTX/PPTM package in reading order (text not yet normalized) and warnings.

    Raises ``ParseLimitError`` (ZIP bomb, XML limits), ``CorruptDocumentError``,
    ``UnsupportedTypeError`` (Strict Open XML) as the module docstring says.
    """
    return read_with_images(data, limits)[0]


def read_with_images(data: bytes, limits: ParseLimits) -> tuple[ParsedDocument, tuple[SkippedImage, ...]]:
    """``read``, plus the pictures counted in the "images not read" warning (too small for OCR)."""
    package = Package.open(data, limits, "PPTX", ".ppt")
    main = package.related("", "officeDocument") or "ppt/presentation.xml"
    presentation = package.xml(main)
    if presentation is None:
        raise CorruptDocumentError(
            "PPTX package has no presentation part (ppt/presentation.xml): not a PowerPoint file"
        )
    if presentation.tag == _STRICT_PRESENTATION:
        raise UnsupportedTypeError(
            "PPTX is saved as Strict Open XML (ISO/IEC 29500 Strict), which is not supported; "
            "save it as a PowerPoint Presentation (.pptx) and upload it again"
        )
    if presentation.tag != P + "presentation":
        raise CorruptDocumentError(f"PPTX main part {main!r} is not a PresentationML presentation")
    deck = _Deck(package, ocr.EmbeddedOcr(limits))
    read_once: set[str] = set()
    for number, rid in enumerate(slide_ids(presentation), 1):
        part = package.target(main, rid)
        if part is not None and part.lower() in read_once:
            deck.counts["repeated"] += 1  # slide ids naming one slide again and again: read once
            continue
        read_once.add("" if part is None else part.lower())
        deck.slide(number, part)
    deck.furniture()
    return ParsedDocument(tuple(deck.blocks), deck.warnings()), tuple(deck.images)


class _Deck:
    """Walks slides into ``blocks``; ``counts`` of what was not read, ``images`` for OCR."""

    def __init__(self, package: Package, pictures: ocr.EmbeddedOcr) -> None:
        self.package = package
        self.pictures = pictures
        self.blocks: list[Block] = []
        self.counts: Counter[str] = Counter()
        self.images: list[SkippedImage] = []
        self.layouts: list[str] = []  # layouts and masters in first-use order (their text comes last)
        self.placeholders: dict[str, Placeholders] = {}
        self.part = ""  # the part being walked (relationships resolve against it)
        self.page: int | None = None
        self.chain: tuple[Placeholders, ...] = ()
        self._handlers: dict[str, Callable[[etree._Element], _Item | None]] = {
            P + "sp": self._shape, P + "cxnSp": self._shape, P + "pic": self._picture,
            P + "grpSp": self._group, P + "graphicFrame": self._frame,
        }

    # slides

    def slide(self, number: int, part: str | None) -> None:
        root = self.package.xml(part)
        if root is None or part is None:
            self.counts["missing"] += 1
            return
        if root.tag != P + "sld":
            raise CorruptDocumentError(f"PPTX slide part {part!r} is not a PresentationML slide")
        self.chain = self._chain(part)
        self.part, self.page = part, number
        items = self._items(shape_tree(root))
        notes = self._notes(part)
        self.blocks.extend(slide_blocks(number, items, notes, hidden=root.get("show") in ("0", "false")))
        self._count_comments(part)

    def _chain(self, slide: str) -> tuple[Placeholders, ...]:
        """The slide's layout and master placeholders (remembering both for ``furniture``)."""
        layout = self.package.related(slide, "slideLayout")
        master = None if layout is None else self.package.related(layout, "slideMaster")
        chain = []
        for part in (layout, master):
            if part is not None:
                if part not in self.placeholders:
                    self.layouts.append(part)
                    self.placeholders[part] = placeholders(self.package.xml(part))
                chain.append(self.placeholders[part])
        return tuple(chain)

    def _notes(self, slide: str) -> list[str]:
        part = self.package.related(slide, "notesSlide")
        root = self.package.xml(part)
        if root is None or part is None:
            return []
        self.part, self.chain = part, ()
        texts = []
        tree = shape_tree(root)
        for shape in () if isinstance(tree, tuple) else tree.iter(P + "sp"):
            ph = shape.find(f"{P}nvSpPr/{P}nvPr/{P}ph")
            if ph is None or ph.get("type") not in _NOTES_SKIPPED:
                texts.extend(paragraphs(shape.find(P + "txBody")))
        return texts

    def _count_comments(self, slide: str) -> None:
        for kind, target in self.package.relationships(slide).values():
            root = self.package.xml(target) if kind == "comments" else None
            if root is not None:
                self.counts["comment"] += sum(1 for el in root.iter() if etree.QName(el).localname == "cm")

    def furniture(self) -> None:
        """Text of non-placeholder shapes of the layouts and masters used, once each, last."""
        seen: set[str] = set()
        self.page, self.chain = None, ()
        for part in self.layouts:
            root = self.package.xml(part)
            self.part = part
            for item in self._items(shape_tree(root), skip_placeholders=True):
                for text in item.texts:
                    if text not in seen:
                        seen.add(text)
                        self.blocks.append(Block(text))

    # shapes

    def _items(self, tree: Iterable[etree._Element], skip_placeholders: bool = False) -> list[_Item]:
        items = []
        for element in shapes(tree):
            if skip_placeholders and element.find(f"./*/{P}nvPr/{P}ph") is not None:
                continue
            item = self._handlers[element.tag](element)
            if item is not None and item.texts:
                items.append(item)
        return items

    def _shape(self, shape: etree._Element) -> _Item:
        texts = paragraphs(shape.find(P + "txBody"))
        ph = shape.find(f"{P}nvSpPr/{P}nvPr/{P}ph")
        position = shape_offset(shape.find(f"{P}spPr/{_A}xfrm"))
        title = False
        if ph is not None:
            kind, inherited = self._inherit(ph)
            title = kind in _TITLES
            position = position or inherited
        pictured = [text for blip in shape.iterfind(f"{P}spPr/{_A}blipFill/{_A}blip") for text in self._image(blip)]
        return _Item(position or (0, 0), texts + pictured + alt_text(shape), title)

    def _inherit(self, ph: etree._Element) -> tuple[str | None, Position | None]:
        """A placeholder's type and offset, from the layout (same idx, else type) or the master."""
        kind, idx = ph.get("type"), ph.get("idx")
        for level in self.chain:
            found_kind, offset = level.by_idx.get(idx or "", (None, None))
            kind = kind or found_kind
            offset = offset or level.by_type.get(_MASTER_TYPES.get(kind or "body", kind or "body"))
            offset = offset or level.by_type.get(kind or "body")
            if offset is not None:
                return kind, offset
        return kind, None

    def _picture(self, pic: etree._Element) -> _Item:
        texts = [text for blip in pic.iterfind(f"{P}blipFill/{_A}blip") for text in self._image(blip)]
        return _Item(shape_offset(pic.find(f"{P}spPr/{_A}xfrm")) or (0, 0), texts + alt_text(pic))

    def _image(self, blip: etree._Element) -> tuple[str, ...]:
        """The picture's OCR paragraphs if big enough for text (or of unknown size); else counted, listed."""
        image = skipped_image(self.package, self.package.target(self.part, blip.get(R + "embed", "")), self.page)
        if image is not None and (image.pixels is None or ocr.big_enough(*image.pixels)):
            return self.pictures.read(self.package.read(image.part) or b"")
        self.counts["image"] += 1
        self.images.extend(() if image is None else (image,))
        return ()

    def _group(self, group: etree._Element) -> _Item:
        items = self._items(group)
        items.sort(key=lambda item: item.position)
        texts = [text for item in items for text in item.texts]
        return _Item(shape_offset(group.find(f"{P}grpSpPr/{_A}xfrm")) or (0, 0), texts + alt_text(group))

    def _frame(self, frame: etree._Element) -> _Item:
        data = frame.find(f"{_A}graphic/{_A}graphicData")
        uri = "" if data is None else data.get("uri", "")
        texts: list[str] = []
        if data is not None and uri.endswith("/table"):
            texts = [row for table in data.iterchildren(_A + "tbl") for row in table_rows(table)]
        elif data is not None and uri.endswith("/chart"):
            texts = self._chart(data)
        elif data is not None and uri.endswith("/diagram"):
            texts = self._diagram(data)
        else:
            self.counts["object"] += 1
        return _Item(shape_offset(frame.find(f"{P}xfrm")) or (0, 0), texts + alt_text(frame))

    def _chart(self, data: etree._Element) -> list[str]:
        self.counts["chart"] += 1
        ref = data.find(_C + "chart")
        root = None if ref is None else self.package.xml(self.package.target(self.part, ref.get(R + "id", "")))
        if root is None:
            return []
        texts = []
        for title in root.iter(_C + "title"):
            texts.extend(paragraphs(title.find(f"{_C}tx/{_C}rich")))
        for series in root.iter(_C + "ser"):
            texts.extend(v.text or "" for v in series.iterfind(f"{_C}tx//{_C}v"))
        return [text for text in texts if text.strip()]

    def _diagram(self, data: etree._Element) -> list[str]:
        ref = data.find(_DGM + "relIds")
        root = None if ref is None else self.package.xml(self.package.target(self.part, ref.get(R + "dm", "")))
        texts: list[str] = []
        for point in () if root is None else root.iter(_DGM + "pt"):
            if point.get("type", "node") in ("node", "asst"):
                texts.extend(paragraphs(point.find(_DGM + "t")))
        return texts

    def warnings(self) -> tuple[str, ...]:
        return count_warnings(self.counts, _WARNINGS) + tuple(self.pictures.warnings())


_WARNINGS = SLIDE_WARNINGS | {
    "missing": ("slide missing from the package", "slides missing from the package"),
    "repeated": ("slide id naming a slide already read (read once)",
                 "slide ids naming a slide already read (each read once)"),
}
