"""Excel 97-2003 ``.xls`` / ``.xlt`` bytes → one block per row, ``section`` = sheet name (python-calamine).

The XLSX reader's library reads BIFF8 (and BIFF5) workbooks too, with the same cell rendering
(cached formula values, dates ISO 8601, numbers without a spurious ``.0``): rows go through the
same ``xlsx.sheet_rows`` and ``tables.table_blocks``. Chosen by measurement against xlrd,
``xls2csv`` (catdoc) and LibreOffice headless (``python -m bench.legacy_readers``).

Bounds: calamine allocates a sheet's range densely, sized by its ``DIMENSIONS`` record ([MS-XLS]
2.4.90): a 6 KB real workbook with 4 cells whose formatting spans 65,536 × 256 cells takes 1 GB
(measured, Apache POI's ``51535.xls``). So each sheet's ``DIMENSIONS`` is read first, from the
``Workbook`` stream (``BoundSheet8`` → the sheet's substream, [MS-XLS] 2.4.28), and a sheet whose
range exceeds ``table_max_cells`` → ``ParseLimitError`` before calamine allocates anything; the
range calamine reports is checked again. A malformed workbook can still make calamine ask for an
absurd allocation (24 GB, measured on a byte-mutated file): Rust aborts the process, which the
sandbox reports as ``parse_limit`` (memory limit or crashed) and replaces, as for XLSX. The Word and
PowerPoint readers raise only our errors on the same mutation run (650 mutated files).

Errors: ``EncryptedDocumentError`` (FILEPASS: password-protected), ``UnsupportedTypeError`` (another
OLE kind), ``CorruptDocumentError`` (calamine cannot read it, or panics on it: a Rust panic surfaces
as pyo3's ``PanicException``, measured on fuzzed files), ``ParseLimitError``.
"""

from __future__ import annotations

import io
import struct

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers._shared.tables import Budget, letter_name, table_blocks
from task_service.pipeline.readers.legacy._ole import check_kind, open_compound, read_stream
from task_service.pipeline.readers.office.xlsx import sheet_rows

__all__ = ["read"]


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of every worksheet of an Excel 97-2003 workbook (module docstring)."""
    check_kind(data, "xls")
    _check_dimensions(data, limits)
    import python_calamine

    budget = Budget(limits, "XLS")
    blocks: list[Block] = []
    try:
        workbook = python_calamine.CalamineWorkbook.from_filelike(io.BytesIO(data))
        for meta in workbook.sheets_metadata:
            if "chart" in str(meta.typ).lower():
                continue
            sheet = workbook.get_sheet_by_name(meta.name)
            if sheet.height * sheet.width > limits.table_max_cells:
                raise ParseLimitError(f"XLS sheet {meta.name!r} spans {sheet.height * sheet.width:,} cells (its used "
                                      f"range); the limit is {limits.table_max_cells:,} (TABLE_MAX_CELLS)")
            blocks.extend(table_blocks(sheet_rows(sheet, budget), meta.name, letter_name))
    except python_calamine.CalamineError as exc:
        raise CorruptDocumentError(f"XLS cannot be read: {exc}") from exc
    except BaseException as exc:  # pyo3's PanicException (a Rust panic) derives from BaseException
        if type(exc).__name__ != "PanicException":
            raise
        raise CorruptDocumentError(f"XLS cannot be read (calamine: {exc})") from None
    return ParsedDocument(tuple(blocks))


_BOUNDSHEET, _DIMENSIONS, _EOF = 0x0085, 0x0200, 0x000A
_MAX_RECORDS = 100_000  # records scanned per substream for its DIMENSIONS at most


def _check_dimensions(data: bytes, limits: ParseLimits) -> None:
    """Raise ``ParseLimitError`` when a sheet's DIMENSIONS span more than ``table_max_cells``."""
    with open_compound(data, "xls") as ole:
        stream = read_stream(ole, "Workbook") or read_stream(ole, "Book")
    biff8 = _is_biff8(stream)
    for offset in _sheet_offsets(stream):
        area = _dimensions_area(stream, offset, biff8)
        if area > limits.table_max_cells:
            raise ParseLimitError(f"XLS sheet spans {area:,} cells (its DIMENSIONS); the limit is "
                                  f"{limits.table_max_cells:,} (TABLE_MAX_CELLS)")


def _is_biff8(stream: bytes) -> bool:
    """True for a BIFF8 globals substream (BOF version 0x0600), whose DIMENSIONS hold 32-bit rows."""
    return len(stream) >= 6 and struct.unpack_from("<H", stream, 4)[0] == 0x0600


def _records(stream: bytes, pos: int) -> list[tuple[int, int, int]]:
    """(type, body offset, length) of the records from ``pos`` to the substream's EOF."""
    out: list[tuple[int, int, int]] = []
    while pos + 4 <= len(stream) and len(out) < _MAX_RECORDS:
        rtype, length = struct.unpack_from("<HH", stream, pos)
        out.append((rtype, pos + 4, length))
        if rtype == _EOF:
            break
        pos += 4 + length
    return out


def _sheet_offsets(stream: bytes) -> list[int]:
    return [int(struct.unpack_from("<I", stream, body)[0]) for rtype, body, length in _records(stream, 0)
            if rtype == _BOUNDSHEET and length >= 4]


def _dimensions_area(stream: bytes, offset: int, biff8: bool) -> int:
    for rtype, body, length in _records(stream, offset):
        if rtype != _DIMENSIONS:
            continue
        if biff8 and length >= 12:
            first_row, last_row, first_col, last_col = struct.unpack_from("<IIHH", stream, body)
        elif length >= 8:
            first_row, last_row, first_col, last_col = struct.unpack_from("<HHHH", stream, body)
        else:
            return 0
        return int(max(last_row - first_row, 0) * max(last_col - first_col, 0))
    return 0
