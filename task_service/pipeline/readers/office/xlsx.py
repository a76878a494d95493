"""XLSX / XLSM bytes → one block per row, ``section`` = sheet name (python-calamine; pure).

Why python-calamine (Rust ``calamine``): measured against openpyxl read-only on
``tests/fidelity/sheet_corpus.py`` in the same run (``python -m bench.parsers xlsx``, figures in
``bench/RESULTS.md``, section ``parsers-msg-eml-pptx-xlsx-ods-odp``): same marker recall, several
times the throughput. It reads the cached result of a formula (``<v>``), never the formula, and runs
nothing: a macro-enabled workbook (XLSM) is read as data, its VBA project ignored.

What comes out: every worksheet in workbook order, hidden and very hidden ones too (chart sheets
hold no cells); each value as the sheet shows it as far as calamine tells: numbers without a
spurious ``.0`` (4417, 0.42), dates ISO 8601 (2026-03-14; calamine applies the cell's number
format to tell a date from a number), date-times "2026-03-14 10:30:00", durations "1:30:00",
booleans TRUE/FALSE as Excel shows them. Not rendered: other number formats (a percentage comes out
as its value, 0.25 for 25 %; currency symbols and thousands separators are lost) — calamine does not
expose the format string. A merged cell's value comes once (calamine leaves the covered cells
empty). Rows become blocks through ``tables.table_blocks``. Pictures placed on a sheet
(``xlsx_pictures``) that are big enough to hold text are OCRed (``ocr.EmbeddedOcr``, as DOCX
images): their paragraphs follow the sheet's rows, ``section`` = the sheet name.

Bounds: ``check_zip_limits`` (ZIP bomb) first; a sheet of ``xl/workbook.xml`` naming a worksheet part
an earlier sheet names is read once (a warning); then, because calamine allocates the used range of a
sheet densely (one cell at A1 and one at XFD1048576 is 17 billion cells: measured, the process
aborts in Rust's allocator), each worksheet's XML is scanned for its cell references
(``_used_area``) and a sheet whose bounding box exceeds ``table_max_cells`` → ``ParseLimitError``
before calamine reads it. Cells written without an ``r`` attribute are not seen by this scan.
Corrupt package or XML → ``CorruptDocumentError``; password-protected workbooks are OLE files,
not ZIPs → ``CorruptDocumentError`` naming that.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from shared.domain.ole import OLE_MAGIC
from task_service.pipeline import ocr
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits, check_zip_limits
from task_service.pipeline.readers._shared.tables import Budget, Cell, Row, letter_name, table_blocks
from task_service.pipeline.readers._shared.xmlzip import ZIP_ERRORS, read_entry
from task_service.pipeline.readers.office.ooxml import Package, R
from task_service.pipeline.readers.office.xlsx_pictures import sheet_pictures

# A cell with content: ``<c r="B7" ...>`` (self-closing ``<c .../>`` cells are styled but empty).
_CELL_REF = re.compile(rb'<(?:\w+:)?c\s[^>]*?\br="([A-Z]{1,3})([0-9]{1,7})"[^>]*(?<!/)>')
_SHEET_PART = re.compile(r"xl/(?:worksheets|macrosheets|dialogsheets)/[^/]+\.xml", re.I)


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of every worksheet of an XLSX/XLSM workbook (module docstring).

    Raises ``ParseLimitError`` (ZIP bomb, a sheet's used range or a row over the table limits),
    ``CorruptDocumentError`` (not a readable workbook).
    """
    if data.startswith(OLE_MAGIC):
        raise CorruptDocumentError(
            "workbook is an OLE container, not an OOXML package: password-protected (encrypted) or a legacy .xls"
        )
    check_zip_limits(data, limits, kind="XLSX")
    _check_used_areas(data, limits)
    repeated = _repeated_sheets(data)
    import python_calamine

    budget = Budget(limits, "XLSX")
    pictures, read_part = _pictures(data)
    reader = ocr.EmbeddedOcr(limits)
    blocks: list[Block] = []
    try:
        workbook = python_calamine.CalamineWorkbook.from_filelike(io.BytesIO(data))
        for meta in workbook.sheets_metadata:
            if "chart" in str(meta.typ).lower() or meta.name in repeated:
                continue
            sheet = workbook.get_sheet_by_name(meta.name)
            blocks.extend(table_blocks(sheet_rows(sheet, budget), meta.name, letter_name))
            for part in pictures.get(meta.name, ()):
                blocks.extend(Block(text, meta.name) for text in reader.read(read_part(part)))
    except python_calamine.CalamineError as exc:
        raise CorruptDocumentError(f"XLSX cannot be read: {exc}") from exc
    plural = "s" if len(repeated) != 1 else ""
    once = f"{len(repeated):,} sheet{plural} naming a worksheet already read (each read once)"
    return ParsedDocument(tuple(blocks), ((once,) if repeated else ()) + tuple(reader.warnings()))


def _pictures(data: bytes) -> tuple[dict[str, list[str]], Callable[[str], bytes]]:
    """Sheet name → its pictures' parts (``xlsx_pictures``), and a reader of a part's bytes (b"" when
    absent); the package is opened again for each part read (only sheets with pictures read any)."""
    with Package.load(data, "XLSX") as package:
        pictures = sheet_pictures(package)

    def read_part(part: str) -> bytes:
        with Package.load(data, "XLSX") as again:
            return again.read(part) or b""

    return pictures, read_part


def _repeated_sheets(data: bytes) -> set[str]:
    """Names of the sheets whose worksheet part an earlier sheet of ``xl/workbook.xml`` names
    already (2,000 sheets naming one part held the parser 63 s): they are read once."""
    with Package.load(data, "XLSX") as package:
        main = package.related("", "officeDocument") or "xl/workbook.xml"
        workbook = package.xml(main)
        seen: set[str] = set()
        repeated: set[str] = set()
        for sheet in () if workbook is None else workbook.iter("{*}sheet"):
            part = package.target(main, sheet.get(R + "id", ""))
            if part is None:
                continue
            if part.lower() in seen:
                repeated.add(sheet.get("name", ""))
            seen.add(part.lower())
    return repeated


def sheet_rows(sheet: Any, budget: Budget) -> Iterator[Row]:
    """Rows of a calamine sheet as sparse ``Row`` dicts with absolute column indexes."""
    top, left = sheet.start or (0, 0)
    spans = {(r1, c1): c2 - c1 + 1 for (r1, c1), (_, c2) in (sheet.merged_cell_ranges or ()) if c2 > c1}
    budget.column(left + sheet.width - 1)
    for r, values in enumerate(sheet.iter_rows(), start=top):
        row: Row = {}
        chars = 0
        for c, value in enumerate(values, start=left):
            if value == "" or value is None:
                continue
            cell = _cell(value, spans.get((r, c), 1))
            chars += len(cell.text)
            row[c] = cell
        budget.row_chars(chars)
        budget.take(len(row))
        yield row


def _cell(value: object, span: int) -> Cell:
    """A calamine value as the sheet shows it (module docstring)."""
    if isinstance(value, bool):
        return Cell("TRUE" if value else "FALSE", "bool", span)
    if isinstance(value, float):
        return Cell(str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.15g}", "number", span)
    if isinstance(value, int):
        return Cell(str(value), "number", span)
    if isinstance(value, dt.datetime):
        return Cell(value.replace(microsecond=0).isoformat(sep=" "), "date", span)
    if isinstance(value, dt.date | dt.time):
        return Cell(value.isoformat(), "date", span)
    if isinstance(value, dt.timedelta):
        return Cell(str(value), "date", span)
    return Cell(str(value), "text", span)


def _check_used_areas(data: bytes, limits: ParseLimits) -> None:
    """Raise ``ParseLimitError`` when a worksheet's cells span more than ``table_max_cells``."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for name in archive.namelist():
                if _SHEET_PART.fullmatch(name):
                    area = _used_area(read_entry(archive, name, "XLSX"))
                    if area > limits.table_max_cells:
                        raise ParseLimitError(
                            f"XLSX sheet {name!r} spans {area:,} cells (its used range); "
                            f"the limit is {limits.table_max_cells:,} (TABLE_MAX_CELLS)"
                        )
    except ZIP_ERRORS as exc:
        raise CorruptDocumentError(f"XLSX is not a readable ZIP package: {exc}") from exc


def _used_area(xml: bytes) -> int:
    """Cells in the bounding box of the cells with content in one worksheet's XML."""
    refs = _CELL_REF.findall(xml)
    if not refs:
        return 0
    rows = [int(row) for _, row in refs]
    columns = [_column_index(letters) for letters in {letters for letters, _ in refs}]
    return (max(rows) - min(rows) + 1) * (max(columns) - min(columns) + 1)


def _column_index(letters: bytes) -> int:
    index = 0
    for byte in letters:
        index = index * 26 + byte - 64
    return index - 1
