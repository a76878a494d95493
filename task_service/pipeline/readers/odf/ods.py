"""ODS (OpenDocument spreadsheet) bytes → one block per row, ``section`` = sheet name (our walker; pure).

Our own streaming walker over ``content.xml`` (lxml ``iterparse``, hardened: no DTD, no entities, no
network, libxml2's default limits). Why not calamine or odfpy: measured on
``tests/fidelity/sheet_corpus.py`` in the same run (``python -m bench.parsers ods``, figures in
``bench/RESULTS.md``, section ``parsers-msg-eml-pptx-xlsx-ods-odp``): an ODS cell stores the text
the sheet displays (``<text:p>``: "25 %", "14/03/2026", "€1,200.00"), which this walker keeps as is,
while calamine gives the raw value (0.25); odfpy builds the whole DOM in Python.

What comes out: every ``table:table`` (hidden ones too; hiding is a style) in document order;
each cell's paragraphs joined by a newline (``text:s`` spaces, tabs and line breaks kept, cell
annotations included); a covered cell (the rest of a merged range) gives nothing, so a merged value
comes once; ``number-columns-repeated`` / ``number-rows-repeated`` repeat non-empty cells and rows
(counted against ``table_max_cells``) and only advance over empty ones (a sheet ends with
"1,048,576 empty rows"). The cell's ``office:value-type`` gives its type for header detection.

Raises ``ParseLimitError`` (ZIP bomb, table limits, XML deeper than libxml2 allows),
``CorruptDocumentError`` (no ``content.xml``, XML not well-formed, not a ZIP).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from lxml import etree

from shared.domain.errors import CorruptDocumentError
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers._shared.tables import Budget, Cell, Kind, Row, letter_name, table_blocks
from task_service.pipeline.readers._shared.xmlzip import SECURE_XML, ZipPackage, xml_errors
from task_service.pipeline.readers.odf.common import OFFICE as _OFFICE
from task_service.pipeline.readers.odf.common import PARAGRAPHS as _PARAGRAPHS
from task_service.pipeline.readers.odf.common import TABLE as _TABLE
from task_service.pipeline.readers.odf.common import inline_text, raise_if_encrypted

_KINDS: dict[str, Kind] = {
    "float": "number", "percentage": "number", "currency": "number",
    "date": "date", "time": "date", "boolean": "bool",
}


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of every sheet of an ODS document (module docstring)."""
    budget = Budget(limits, "ODS")
    blocks: list[Block] = []
    with ZipPackage.open(data, limits, "ODS") as package:
        raise_if_encrypted(package.xml("META-INF/manifest.xml"), "OpenDocument spreadsheet")
        if package.entry("content.xml") is None:
            raise CorruptDocumentError("ODS package has no content.xml: not an OpenDocument file")
        with xml_errors("ODS", "content.xml"), package.stream("content.xml") as stream:
            for name, rows in _tables(stream, budget):
                blocks.extend(table_blocks(rows, name, letter_name))
    return ParsedDocument(tuple(blocks))


def _tables(stream: IO[bytes], budget: Budget) -> Iterator[tuple[str, list[Row]]]:
    """``(sheet name, rows)`` per ``table:table``, rows parsed one at a time and then dropped."""
    events = etree.iterparse(stream, events=("start", "end"), tag=(_TABLE + "table", _TABLE + "table-row"),
                             **SECURE_XML)
    name: str = ""
    rows: list[Row] = []
    for event, element in events:
        if element.tag == _TABLE + "table":
            if event == "start":
                name, rows = element.get(_TABLE + "name", ""), []
            else:
                yield name, rows
                element.clear()
            continue
        if event == "end":
            row, repeat = _row(element, budget)
            if row:
                budget.take(len(row) * (repeat - 1))
                rows.extend(dict(row) for _ in range(repeat))
            element.clear()


def _row(element: etree._Element, budget: Budget) -> tuple[Row, int]:
    """One ``table:table-row``: its non-empty cells by column, and how many times it repeats."""
    row: Row = {}
    col = chars = 0
    for cell in element.iterchildren(_TABLE + "table-cell", _TABLE + "covered-table-cell"):
        repeat = int(cell.get(_TABLE + "number-columns-repeated", "1") or 1)
        text = _cell_text(cell) if cell.tag == _TABLE + "table-cell" else ""
        if text.strip():
            budget.column(col + repeat - 1)
            kind = _KINDS.get(cell.get(_OFFICE + "value-type", ""), "text")
            span = int(cell.get(_TABLE + "number-columns-spanned", "1") or 1)
            for c in range(col, col + repeat):
                row[c] = Cell(text, kind, span)
            chars += len(text) * repeat
            budget.row_chars(chars)
        col += repeat
    budget.take(len(row))
    return row, max(1, int(element.get(_TABLE + "number-rows-repeated", "1") or 1))


def _cell_text(cell: etree._Element) -> str:
    return "\n".join(_paragraph(p) for p in cell.iter(*_PARAGRAPHS))


def _paragraph(p: etree._Element) -> str:
    """A paragraph's text (``odf.inline_text``); nested paragraphs (an annotation's) come on their own."""
    parts: list[str] = []
    inline_text(p, parts, lambda child, _: child.tag in _PARAGRAPHS)
    return "".join(parts)
