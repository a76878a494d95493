"""ODP (OpenDocument presentation, and its template .otp) → blocks: our own walker over
``content.xml`` (``_shared/xmlzip``: the ZIP package and the locked-down parser; ``common``: the text walker).

Why our own walker: ``python -m bench.parsers odp`` (markers of ``tests/fidelity/odp_corpus.py``,
MB/s of ``content.xml`` of a 300-page deck; figures in ``bench/RESULTS.md``, section
``parsers-msg-eml-pptx-xlsx-ods-odp``): odfpy (every ``text:p``/``text:h``, no slide model) misses
alt text and chart titles, at a fraction of our speed.

What is read (OASIS OpenDocument 1.3, Part 3, §9 drawing shapes, §10 presentation), page by page in
document order (hidden pages included, their section marked "(hidden slide)", no warning):

- every shape of a ``draw:page``: frames with text boxes, custom shapes and other drawing shapes
  with text, group shapes (``draw:g``, recursively), tables (a row is one block, its cells joined
  by ``" | "``; covered cells dropped), chart titles (``draw:object`` whose content is a chart),
  alt text (a shape's ``svg:desc``, else ``svg:title``) as a block after its text;
  one block per paragraph (``text:p``/``text:h``, lists flattened; ``text:s`` → spaces,
  ``text:tab`` → tab, ``text:line-break`` → newline);
- reading order: the title frame (``presentation:class="title"``) first, then shapes top to
  bottom, left to right by ``svg:y``/``svg:x`` (a group by its first child), ties in document order;
- speaker notes (``presentation:notes``): one block "Speaker notes: …" after the page's shapes;
- ``page`` = slide number, ``section`` = the title's text, or "Slide N";
- counted in warnings, not read: pictures (``read_with_images`` lists them for OCR), chart data,
  embedded objects, comments (``officeooo:annotation``).

Errors: ``ParseLimitError`` (the ZIP-bomb pre-check, XML limits), ``CorruptDocumentError`` (not a
ZIP, another OpenDocument type, no ``content.xml``, malformed XML, an encrypted package).
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable

from lxml import etree

from shared.domain.errors import CorruptDocumentError
from task_service.pipeline.document import Block, ParsedDocument, count_warnings
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers._shared.pictures import SkippedImage, skipped_image
from task_service.pipeline.readers._shared.slides import SLIDE_WARNINGS, slide_blocks
from task_service.pipeline.readers._shared.slides import Item as _Item
from task_service.pipeline.readers._shared.xmlzip import ZipPackage
from task_service.pipeline.readers.odf.common import DRAW as _DRAW
from task_service.pipeline.readers.odf.common import OFFICE as _OFFICE
from task_service.pipeline.readers.odf.common import PARAGRAPHS as _PARAGRAPHS
from task_service.pipeline.readers.odf.common import STYLE as _STYLE
from task_service.pipeline.readers.odf.common import SVG as _SVG
from task_service.pipeline.readers.odf.common import TABLE as _TABLE
from task_service.pipeline.readers.odf.common import TEXT as _TEXT
from task_service.pipeline.readers.odf.common import inline_text, raise_if_encrypted, table_rows

ODP_MIME = "application/vnd.oasis.opendocument.presentation"
_PRES = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
_CHART = "{urn:oasis:names:tc:opendocument:xmlns:chart:1.0}"
_XLINK = "{http://www.w3.org/1999/xlink}"
_CONTAINERS = frozenset({_TEXT + "list", _TEXT + "list-item", _TEXT + "list-header", _TEXT + "section",
                         _DRAW + "text-box"})
_SKIPPED_TEXT = frozenset({_OFFICE + "annotation", _OFFICE + "annotation-end", _TEXT + "note-citation",
                           _SVG + "title", _SVG + "desc"})
_OBJECTS = frozenset({_DRAW + "object-ole", _DRAW + "plugin", _DRAW + "applet", _DRAW + "floating-frame"})
_UNITS_CM = {"cm": 1.0, "mm": 0.1, "in": 2.54, "pt": 2.54 / 72, "pc": 2.54 / 6, "px": 2.54 / 96}
_LENGTH = re.compile(r"\s*(-?[0-9.]+)\s*([a-z]*)")

Position = tuple[float, float]  # (y, x) in cm


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of an ODP package in reading order (text not yet normalized) and warnings.

    Raises ``ParseLimitError`` and ``CorruptDocumentError`` as the module docstring says.
    """
    return read_with_images(data, limits)[0]


def read_with_images(data: bytes, limits: ParseLimits) -> tuple[ParsedDocument, tuple[SkippedImage, ...]]:
    """``read``, plus the pictures counted in the "images not read" warning (for an OCR stage)."""
    package = ZipPackage.open(data, limits, "ODP", ".ppt")
    _check_package(package)
    content = package.xml("content.xml", doctype=False)
    presentation = None if content is None else content.find(f"{_OFFICE}body/{_OFFICE}presentation")
    if content is None or presentation is None:
        raise CorruptDocumentError("ODP package has no presentation in content.xml: not an OpenDocument presentation")
    deck = _Deck(package, _hidden_styles(content))
    for number, page in enumerate(presentation.iterchildren(_DRAW + "page"), 1):
        deck.page(number, page)
    return ParsedDocument(tuple(deck.blocks), deck.warnings()), tuple(deck.images)


def _check_package(package: ZipPackage) -> None:
    mimetype = (package.read("mimetype") or b"").decode("ascii", "replace").strip()
    if mimetype and not mimetype.startswith(ODP_MIME):
        raise CorruptDocumentError(f"ODP package is of another type ({mimetype!r}): not an OpenDocument presentation")
    raise_if_encrypted(package.xml("META-INF/manifest.xml"), "OpenDocument presentation")


def _hidden_styles(content: etree._Element) -> frozenset[str]:
    """Names of drawing-page styles that hide a slide (``presentation:visibility="hidden"``)."""
    return frozenset(
        style.get(_STYLE + "name", "")
        for style in content.iterfind(f"{_OFFICE}automatic-styles/{_STYLE}style")
        if any(props.get(_PRES + "visibility") == "hidden" for props in style)
    )


class _Deck:
    """Walks pages into ``blocks``; ``counts`` of what was not read, ``images`` for OCR."""

    def __init__(self, package: ZipPackage, hidden: frozenset[str]) -> None:
        self.package = package
        self.hidden = hidden
        self.blocks: list[Block] = []
        self.counts: Counter[str] = Counter()
        self.images: list[SkippedImage] = []
        self.number = 0
        self._handlers: dict[str, Callable[[etree._Element], _Item]] = {
            _DRAW + "frame": self._frame, _DRAW + "g": self._group,
        }

    def page(self, number: int, page: etree._Element) -> None:
        self.number = number
        items = self._items(page)
        notes = [text for item in self._items(page.find(_PRES + "notes")) for text in item.texts]
        self.blocks.extend(slide_blocks(number, items, notes, hidden=page.get(_DRAW + "style-name") in self.hidden))

    def _items(self, container: Iterable[etree._Element] | None) -> list[_Item]:
        items = []
        for child in () if container is None else container:
            tag = child.tag
            if not isinstance(tag, str) or not tag.startswith(_DRAW) or tag == _DRAW + "page-thumbnail":
                continue
            self.counts["comment"] += sum(1 for _ in child.iter(_OFFICE + "annotation"))
            item = self._handlers.get(tag, self._shape)(child)
            if item.texts:
                items.append(item)
        return items

    def _shape(self, shape: etree._Element) -> _Item:
        """A drawing shape (rect, custom-shape, ellipse...): its own paragraphs, then its alt text."""
        return _Item(_position(shape), self._text(shape) + _alt_text(shape))

    def _frame(self, frame: etree._Element) -> _Item:
        texts: list[str] = []
        for child in frame:
            if child.tag == _DRAW + "text-box":
                texts.extend(self._text(child))
            elif child.tag == _TABLE + "table":
                texts.extend(table_rows(child, self._text))
            elif child.tag == _DRAW + "image":
                self._image(child)
                texts.extend(self._text(child))
            elif child.tag == _DRAW + "object":
                texts.extend(self._object(child))
            elif child.tag in _OBJECTS:
                self.counts["object"] += 1
        title = frame.get(_PRES + "class") == "title"
        return _Item(_position(frame), texts + _alt_text(frame), title)

    def _group(self, group: etree._Element) -> _Item:
        items = self._items(group)
        items.sort(key=lambda item: item.position)
        texts = [text for item in items for text in item.texts]
        return _Item(items[0].position if items else (0.0, 0.0), texts + _alt_text(group))

    def _image(self, image: etree._Element) -> None:
        self.counts["image"] += 1
        part = posixpath.normpath(image.get(_XLINK + "href", "").removeprefix("./"))
        skipped = skipped_image(self.package, part, self.number)
        if skipped is not None:
            self.images.append(skipped)

    def _object(self, element: etree._Element) -> list[str]:
        """An embedded object: a chart's titles, or counted when it is anything else."""
        href = posixpath.normpath(element.get(_XLINK + "href", "").removeprefix("./"))
        root = self.package.xml(posixpath.join(href, "content.xml"), doctype=False)
        chart = None if root is None else root.find(f"{_OFFICE}body/{_OFFICE}chart")
        if chart is None:
            self.counts["object"] += 1
            return []
        self.counts["chart"] += 1
        titles = (_CHART + "title", _CHART + "subtitle")
        return [text for title in chart.iter(*titles) for text in self._text(title)]

    def _text(self, container: etree._Element) -> list[str]:
        """Non-blank paragraph texts below ``container`` (lists and sections flattened)."""
        texts = []
        for child in container:
            if child.tag in _PARAGRAPHS:
                text = _paragraph(child)
                if text.strip():
                    texts.append(text)
            elif child.tag in _CONTAINERS:
                texts.extend(self._text(child))
        return texts

    def warnings(self) -> tuple[str, ...]:
        return count_warnings(self.counts, SLIDE_WARNINGS)




def _paragraph(paragraph: etree._Element) -> str:
    """A paragraph's text: spans, links, fields, ``text:s``/``tab``/``line-break``; annotations and alt text dropped."""
    parts: list[str] = []
    inline_text(paragraph, parts, lambda child, _: child.tag in _SKIPPED_TEXT)
    return "".join(parts)


def _position(shape: etree._Element) -> Position:
    """(y, x) in cm from ``svg:y``/``svg:x``, else a ``translate`` of ``draw:transform``, else (0, 0)."""
    x, y = shape.get(_SVG + "x"), shape.get(_SVG + "y")
    if x is None or y is None:
        found = re.search(r"translate\s*\(\s*([^\s,)]+)[\s,]+([^\s,)]+)", shape.get(_DRAW + "transform", ""))
        x, y = (found.group(1), found.group(2)) if found else ("0", "0")
    return _length(y), _length(x)


def _length(value: str) -> float:
    found = _LENGTH.match(value)
    if found is None:
        return 0.0
    try:
        return float(found.group(1)) * _UNITS_CM.get(found.group(2), 1.0)
    except ValueError:
        return 0.0


def _alt_text(shape: etree._Element) -> list[str]:
    """``svg:desc``, else ``svg:title``, of a shape, as a one-item list, or []."""
    for tag in (_SVG + "desc", _SVG + "title"):
        node = shape.find(tag)
        text = "" if node is None else "".join(node.itertext()).strip()
        if text:
            return [text]
    return []
