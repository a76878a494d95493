"""The pictures placed on an XLSX workbook's sheets, for OCR (pure: ZIP + XML, no image decoding).

SpreadsheetML puts pictures in a drawing part (ECMA-376 Part 1, §20.5 SpreadsheetML Drawing): the
worksheet relates to ``xl/drawings/drawingN.xml`` (relationship type ``drawing``), whose anchors
(``xdr:twoCellAnchor``, ``xdr:oneCellAnchor``, ``xdr:absoluteAnchor``) hold ``xdr:pic`` shapes that
name their image part through ``a:blip/@r:embed``. ``sheet_pictures`` lists, per sheet name, the
image parts in reading order: by the anchor's top-left cell (row, then column), ties in document
order.
"""

from __future__ import annotations

from lxml import etree

from task_service.pipeline.readers.office.ooxml import A, Package, R

_S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_XDR = "{http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing}"
_ANCHORS = frozenset(_XDR + a for a in ("twoCellAnchor", "oneCellAnchor", "absoluteAnchor"))


def sheet_pictures(package: Package) -> dict[str, list[str]]:
    """Sheet name → image part names of the pictures on it, in reading order (sheets without any are
    absent). Raises ``CorruptDocumentError`` for malformed XML (as ``Package.xml``)."""
    workbook = package.related("", "officeDocument") or "xl/workbook.xml"
    root = package.xml(workbook)
    if root is None:
        return {}
    found: dict[str, list[str]] = {}
    for sheet in root.iter(_S + "sheet"):
        part = package.target(workbook, sheet.get(R + "id", ""))
        drawing = None if part is None else package.related(part, "drawing")
        if drawing is not None and (parts := _drawing_pictures(package, drawing)):
            found[sheet.get("name", "")] = parts
    return found


def _drawing_pictures(package: Package, drawing: str) -> list[str]:
    root = package.xml(drawing)
    if root is None:
        return []
    placed: list[tuple[tuple[int, int], str]] = []
    for anchor in root:
        if anchor.tag not in _ANCHORS:
            continue
        where = _cell(anchor.find(_XDR + "from"))
        for blip in anchor.iter(A + "blip"):
            part = package.target(drawing, blip.get(R + "embed", ""))
            if part is not None:
                placed.append((where, part))
    placed.sort(key=lambda item: item[0])
    return [part for _, part in placed]


def _cell(origin: etree._Element | None) -> tuple[int, int]:
    """(row, column) of an anchor's ``xdr:from`` (0-based); (0, 0) when absent or not a number."""
    if origin is None:
        return (0, 0)

    def number(tag: str) -> int:
        text = origin.findtext(_XDR + tag) or "0"
        return int(text) if text.strip().isdigit() else 0

    return (number("row"), number("col"))
