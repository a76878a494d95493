"""PresentationML shapes → texts (pure, lxml): a slide's shape tree, shapes through
``mc:AlternateContent``, placeholders' positions, text bodies, tables and alt text; the PPTX
reader (``pptx.py``) orders them on the slide."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from lxml import etree

from task_service.pipeline.readers.office.ooxml import MC, R, choose, drawing_text
from task_service.pipeline.readers.office.ooxml import A as _A

Position = tuple[int, int]  # (y, x) in EMU
P_NS = "http://schemas.openxmlformats.org/presentationml/2006/main"
P = "{" + P_NS + "}"
UNDERSTOOD = frozenset({
    P_NS,
    "http://schemas.openxmlformats.org/drawingml/2006/main",
    "http://schemas.microsoft.com/office/powerpoint/2010/main",  # p14
    "http://schemas.microsoft.com/office/powerpoint/2012/main",  # p15
    "http://schemas.microsoft.com/office/drawing/2010/main",  # a14 (Office math, a14:m)
    "http://schemas.openxmlformats.org/officeDocument/2006/math",
})
SHAPES = frozenset(P + t for t in ("sp", "grpSp", "graphicFrame", "pic", "cxnSp"))


# ---------------------------------------------------------------- shapes → positioned texts


@dataclass
class Placeholders:
    """A layout's or master's placeholders: offsets by idx and by type, types by idx."""

    by_idx: dict[str, tuple[str | None, Position | None]] = field(default_factory=dict)
    by_type: dict[str, Position | None] = field(default_factory=dict)


def shape_tree(root: etree._Element | None) -> etree._Element | tuple[()]:
    found = None if root is None else root.find(f"{P}cSld/{P}spTree")
    return () if found is None else found


def shapes(container: Iterable[etree._Element]) -> Iterable[etree._Element]:
    """Shape elements among ``container``'s children, through ``mc:AlternateContent``."""
    for child in container:
        if child.tag in SHAPES:
            yield child
        elif child.tag == MC + "AlternateContent":
            yield from shapes(choose(child, UNDERSTOOD))


def placeholders(root: etree._Element | None) -> Placeholders:
    found = Placeholders()
    for shape in shape_tree(root):
        ph = shape.find(f"./*/{P}nvPr/{P}ph")
        if ph is None:
            continue
        offset = shape_offset(shape.find(f"{P}spPr/{_A}xfrm"))
        kind = ph.get("type")
        if ph.get("idx") is not None:
            found.by_idx[ph.get("idx", "")] = (kind, offset)
        found.by_type.setdefault(kind or "body", offset)
    return found


def shape_offset(xfrm: etree._Element | None) -> Position | None:
    off = None if xfrm is None else xfrm.find(_A + "off")
    if off is None:
        return None
    try:
        return int(off.get("y", "0")), int(off.get("x", "0"))
    except ValueError:
        return None


def paragraphs(body: etree._Element | None) -> list[str]:
    """Non-blank paragraph texts of a text body (``p:txBody``, ``c:rich``, ``dgm:t``)."""
    if body is None:
        return []
    texts = (drawing_text(p, UNDERSTOOD) for p in body.iterchildren(_A + "p"))
    return [text for text in texts if text.strip()]


def table_rows(table: etree._Element) -> list[str]:
    """One text per row: non-blank cells joined by " | ", a cell's paragraphs by a space."""
    rows = []
    for row in table.iterchildren(_A + "tr"):
        cells = (cell_text(cell) for cell in row.iterchildren(_A + "tc"))
        text = " | ".join(cell for cell in cells if cell)
        if text:
            rows.append(text)
    return rows


def cell_text(cell: etree._Element) -> str:
    return " ".join(text.strip() for text in paragraphs(cell.find(_A + "txBody")))


def alt_text(shape: etree._Element) -> list[str]:
    """A shape's alt text (``descr``, else ``title`` of its ``p:cNvPr``) as a one-item list, or []."""
    props = shape.find(f"./*/{P}cNvPr")
    alt = "" if props is None else (props.get("descr") or props.get("title") or "").strip()
    return [alt] if alt else []


def slide_ids(presentation: etree._Element) -> list[str]:
    """The relationship ids of ``p:sldIdLst``, in order (a slide may be named more than once)."""
    found = presentation.find(P + "sldIdLst")
    return [] if found is None else [s.get(R + "id", "") for s in found.iterchildren(P + "sldId")]
