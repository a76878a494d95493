"""CSV / TSV bytes → one block per row with its column names (stdlib ``csv``; pure).

Encoding: ``decode.py``'s rules (BOM, UTF-16/32, legacy code pages), its warnings kept. Delimiter:
our own rule over the first ``SNIFF_LINES`` lines (``csv.Sniffer`` picks letters or spaces on
short samples): among tab, semicolon, comma and pipe, the one that occurs outside quotes on the
most lines with the same non-zero count, ties broken by the total count; none → one column.
Quoting: RFC 4180 double quotes (a quoted field keeps its delimiters and newlines, ``""`` is one
quote). Rows become blocks through ``tables.table_blocks`` (header detected, columns "Column 1"...
without one), ``section`` ``None``.

Bounds, before the csv module builds a row: a physical line longer than ``table_max_row_chars``
(a CSV that is one 50 MB line) → ``ParseLimitError``; the csv module's field size limit is the
same bound; a row with more than ``table_max_columns`` fields or a file of more than
``table_max_cells`` cells → ``ParseLimitError``.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from task_service.pipeline.decode import decode
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers._shared.tables import (
    BODY_SAMPLE_ROWS,
    HEADER_SCAN_ROWS,
    Budget,
    Cell,
    Kind,
    Row,
    number_name,
    table_blocks,
)

SNIFF_LINES = 50
TYPED_ROWS = HEADER_SCAN_ROWS + BODY_SAMPLE_ROWS + 1  # rows whose values are classified (header detection)
DELIMITERS = ("\t", ";", ",", "|")
_QUOTED = re.compile(r'"(?:[^"]|"")*"')
_NUMBER = re.compile(r"[-+(]?[$€£¥]?\s?\d[\d\s,.'’]*(?:[eE][-+]?\d+)?\s?[%‰)]?[$€£¥]?")
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?:[T ][\d:.]+Z?)?|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}")
_BOOL = frozenset({"true", "false"})


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of a CSV/TSV file, one per non-empty row, with the decoder's warnings.

    Raises ``UndecodableTextError`` (no text encoding fits), ``ParseLimitError`` (module docstring),
    ``CorruptDocumentError`` if the csv module refuses a line (any text is a CSV of one column).
    """
    decoded = decode(data)
    text = decoded.text
    _check_lines(text, limits)
    delimiter = sniff_delimiter(text)
    budget = Budget(limits, "CSV")
    rows = list(_rows(text, delimiter, budget))
    return ParsedDocument(tuple(table_blocks(rows, None, number_name)), decoded.warnings)


def sniff_delimiter(text: str) -> str:
    """The delimiter of ``text`` (module docstring); ``","`` when no candidate occurs."""
    lines = [_QUOTED.sub("", line) for line in text[:1_000_000].splitlines()[:SNIFF_LINES] if line.strip()]
    best, best_score = ",", (0, 0)
    for delimiter in DELIMITERS:
        counts = [line.count(delimiter) for line in lines]
        mode, steady = Counter(c for c in counts if c).most_common(1)[0] if any(counts) else (0, 0)
        score = (steady if mode else 0, sum(counts))
        if score > best_score:
            best, best_score = delimiter, score
    return best


def _untyped(fields: list[str], budget: Budget) -> Row:
    row = {col: Cell(value) for col, value in enumerate(fields) if value.strip()}
    budget.take(len(row))
    return row


def classify(value: str) -> Kind:
    """The type a CSV value shows: number, date, bool or text (for the header's type profile)."""
    stripped = value.strip()
    if _DATE.fullmatch(stripped):
        return "date"
    if _NUMBER.fullmatch(stripped):
        return "number"
    return "bool" if stripped.lower() in _BOOL else "text"


def _check_lines(text: str, limits: ParseLimits) -> None:
    """Raise ``ParseLimitError`` for a physical line over ``table_max_row_chars`` (one ``find`` per line)."""
    longest = limits.table_max_row_chars
    if len(text) <= longest:
        return
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if end - start > longest:
            raise ParseLimitError(
                f"CSV has a line of more than {longest:,} characters; the limit is TABLE_MAX_ROW_CHARS"
            )
        start = end + 1


def _rows(text: str, delimiter: str, budget: Budget) -> list[Row]:
    old = csv.field_size_limit(budget.limits.table_max_row_chars)
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quotechar='"', doublequote=True)
        return [_row(fields, budget, typed=n < TYPED_ROWS) for n, fields in enumerate(reader)]
    except csv.Error as exc:
        if "field limit" not in str(exc):
            raise CorruptDocumentError(f"CSV cannot be read: {exc}") from exc
        raise ParseLimitError(  # a quote left open holds the rest of the file in one field
            f"CSV has a field of more than {budget.limits.table_max_row_chars:,} characters ({exc}); "
            "the limit is TABLE_MAX_ROW_CHARS"
        ) from exc
    finally:
        csv.field_size_limit(old)


def _row(fields: list[str], budget: Budget, *, typed: bool) -> Row:
    budget.column(len(fields) - 1)
    budget.row_chars(sum(map(len, fields)))
    if not typed:  # types only matter to header detection, which looks at the first rows
        return _untyped(fields, budget)
    row = {col: Cell(value, classify(value)) for col, value in enumerate(fields) if value.strip()}
    budget.take(len(row))
    return row
