"""Excel 97-2003 ``.xls`` / ``.xlt`` bytes → one block per row, ``section`` = sheet name (python-calamine).

The XLSX reader's library reads BIFF8 (and BIFF5) workbooks too, with the same cell rendering
(cached formula values, dates ISO 8601, numbers without a spurious ``.0``): rows go through the
same ``xlsx.sheet_rows`` and ``tables.table_blocks``. Chosen by measurement against xlrd,
``xls2csv`` (catdoc) and LibreOffice headless (``python -m bench.legacy_readers``).

Bounds: a BIFF8 sheet has at most 65,536 × 256 cells (16.8 M), which calamine allocates densely
(≈0.5 GiB, within the sandbox's memory limit); a sheet whose used range exceeds
``table_max_cells`` → ``ParseLimitError`` before its rows are turned into blocks.

Errors: ``EncryptedDocumentError`` (FILEPASS: password-protected), ``UnsupportedTypeError`` (another
OLE kind), ``CorruptDocumentError`` (calamine cannot read it, or panics on it: a Rust panic surfaces
as pyo3's ``PanicException``, measured on fuzzed files), ``ParseLimitError``.
"""

from __future__ import annotations

import io

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.legacy._ole import check_kind
from task_service.pipeline.readers.tables import Budget, letter_name, table_blocks
from task_service.pipeline.readers.xlsx import _sheet_rows

__all__ = ["read"]


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of every worksheet of an Excel 97-2003 workbook (module docstring)."""
    check_kind(data, "xls")
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
            blocks.extend(table_blocks(_sheet_rows(sheet, budget), meta.name, letter_name))
    except python_calamine.CalamineError as exc:
        raise CorruptDocumentError(f"XLS cannot be read: {exc}") from exc
    except BaseException as exc:  # pyo3's PanicException (a Rust panic) derives from BaseException
        if type(exc).__name__ != "PanicException":
            raise
        raise CorruptDocumentError(f"XLS cannot be read (calamine: {exc})") from None
    return ParsedDocument(tuple(blocks))
