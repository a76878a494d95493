"""ODS (OpenDocument spreadsheet) bytes → one block per row, ``section`` = sheet name (our walker; pure).

Our own streaming walker over ``content.xml`` (lxml ``iterparse``, hardened: no DTD, no entities, no
network, libxml2's default limits). Why not calamine or odfpy: measured on
``tests/fidelity/sheet_corpus.py`` in the same run (``python -m bench.parsers ods``, figures in
``bench/RESULTS.md``): an ODS cell stores the text the sheet displays (``<text:p>``: "25 %",
"14/03/2026", "€1,200.00"), which this walker keeps as is, while calamine gives the raw value
(0.25); odfpy builds the whole DOM in Python.

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

import io
import zipfile
import zlib
from collections.abc import Iterator
from typing import IO

from lxml import etree

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits, check_zip_limits
from task_service.pipeline.readers.tables import Budget, Cell, Kind, Row, letter_name, table_blocks

_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_SECURE: dict[str, bool] = {
    "resolve_entities": False, "no_network": True, "load_dtd": False, "huge_tree": False,
    "remove_comments": True, "remove_pis": True,
}
_KINDS: dict[str, Kind] = {
    "float": "number", "percentage": "number", "currency": "number",
    "date": "date", "time": "date", "boolean": "bool",
}
_MAX_SPACES = 1_000  # ``<text:s text:c="…"/>``: whitespace is collapsed later anyway
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, NotImplementedError,
               ValueError, KeyError)


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of every sheet of an ODS document (module docstring)."""
    check_zip_limits(data, limits, kind="ODS")
    budget = Budget(limits, "ODS")
    blocks: list[Block] = []
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive, archive.open("content.xml") as stream:
            for name, rows in _tables(stream, budget):
                blocks.extend(table_blocks(rows, name, letter_name))
    except etree.XMLSyntaxError as exc:
        if "depth" in str(exc).lower() or "huge" in str(exc).lower():
            raise ParseLimitError(f"ODS content.xml exceeds the XML parser's limits: {exc}") from exc
        raise CorruptDocumentError(f"ODS content.xml is not well-formed XML: {exc}") from exc
    except _ZIP_ERRORS as exc:
        raise CorruptDocumentError(f"ODS cannot be read (no content.xml, or not a ZIP package): {exc}") from exc
    return ParsedDocument(tuple(blocks))


def _tables(stream: IO[bytes], budget: Budget) -> Iterator[tuple[str, list[Row]]]:
    """``(sheet name, rows)`` per ``table:table``, rows parsed one at a time and then dropped."""
    events = etree.iterparse(stream, events=("start", "end"), tag=(_TABLE + "table", _TABLE + "table-row"),
                             **_SECURE)
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
    return "\n".join(_paragraph(p) for p in cell.iter(_TEXT + "p", _TEXT + "h"))


def _paragraph(p: etree._Element) -> str:
    parts = [p.text or ""]
    for child in p:
        if child.tag == _TEXT + "s":
            parts.append(" " * min(int(child.get(_TEXT + "c", "1") or 1), _MAX_SPACES))
        elif child.tag == _TEXT + "tab":
            parts.append("\t")
        elif child.tag == _TEXT + "line-break":
            parts.append("\n")
        elif child.tag not in (_TEXT + "p", _TEXT + "h"):
            parts.append(_paragraph(child))
        parts.append(child.tail or "")
    return "".join(parts)
