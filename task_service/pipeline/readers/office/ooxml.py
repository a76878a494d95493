"""Office Open XML machinery shared by the DOCX and PPTX readers (pure: bytes in, elements out).

- ``Package``: a ``_shared/xmlzip.ZipPackage`` (OPC, ECMA-376 Part 2: case-insensitive part names) with
  resolved relationships (``_rels/<part>.rels``; external targets dropped) whose ``xml`` refuses
  a part with a DOCTYPE, as OPC requires of its own XML ("shall treat the presence of DTD
  declarations as an error", ECMA-376 Part 2, rule M1.18); parsing, limits and error translation
  are ``_shared/xmlzip``'s;
- ``choose``: one branch of ``mc:AlternateContent`` (ECMA-376 Part 3, §10.2);
- ``drawing_text``: the text of a DrawingML paragraph (``a:p``: runs, fields, breaks, Office math).

Errors: ``CorruptDocumentError`` (not a ZIP, unreadable entry, malformed XML, a DOCTYPE),
``ParseLimitError`` (XML nested deeper, or a text node longer, than libxml2 allows without
``XML_PARSE_HUGE``: 256 levels, 10,000,000 bytes). The ZIP-bomb pre-check runs in
``Package.open`` (``Package.load`` skips it: DOCX's caller, ``parse.py``, has run it).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from lxml import etree

from task_service.pipeline.readers._shared.xmlzip import ZipPackage

MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
A14 = "{http://schemas.microsoft.com/office/drawing/2010/main}"
PKG_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"


@dataclass
class Package(ZipPackage):
    """An OPC package: a ZIP package whose parts have relationships; DOCTYPEs refused."""

    rels: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)  # part → rId → (type, target)

    def xml(self, part: str | None, *, doctype: bool = False) -> etree._Element | None:
        """The root element of ``part`` (None when absent); a DOCTYPE is refused (``CorruptDocumentError``)."""
        return super().xml(part, doctype=doctype)

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
