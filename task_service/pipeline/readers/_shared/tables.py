"""A grid of cells → one block per row, each row carrying its column names (pure).

Shared by the table readers (``xlsx.py``, ``ods.py``, ``csv.py``). A row of a sheet becomes one
:class:`Block` whose text names every value ("Item: Hollowmere gasket unit price | Unit price: 0.42 |
Updated: 2026-03-14"), so a chunk holding it can be found and read on its own; ``section`` is the
sheet name, ``page`` is ``None``. Empty rows and columns are skipped; empty cells are left out of
their row's text.

Header detection (not assumed): among the first ``HEADER_SCAN_ROWS`` non-empty rows, the first one
whose cells are short distinct texts (≤ ``MAX_HEADER_CHARS``) naming at least two columns and
every column used by half of the ``BODY_SAMPLE_ROWS`` rows below, and whose columns do not vote
against it (the first such row) or vote for it (a later one) (``_header_votes``: a column whose
body is mostly numbers, dates or booleans while its header is text votes for; a header that repeats in its own column's
body votes against; a header without digits over a body that mostly has digits or ``@`` votes for)
— the type-profile rule of ``csv.Sniffer.has_header``. Rows above the header (titles, notes) are
kept as plain text; without a header, columns are named by the reader ("Column A" in a
spreadsheet, "Column 1" in a CSV). A row whose only value is a cell merged across several
columns (a note, a sub-title) is plain text too.

Bounds: :class:`Budget` counts cells against ``ParseLimits.table_max_cells`` and checks columns and
row length (``table_max_columns``, ``table_max_row_chars``) as readers add them; every violation is a
``ParseLimitError`` naming the setting.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from shared.domain.errors import ParseLimitError
from task_service.pipeline.document import Block
from task_service.pipeline.limits import ParseLimits

Kind = Literal["text", "number", "date", "bool"]
HEADER_SCAN_ROWS = 10
BODY_SAMPLE_ROWS = 50
MAX_HEADER_CHARS = 80
SEPARATOR = " | "
_DIGIT_OR_AT = re.compile(r"[\d@]")


@dataclass(frozen=True, slots=True)
class Cell:
    """One non-empty cell as the sheet shows it; ``span`` > 1 for a cell merged across columns."""

    text: str
    kind: Kind = "text"
    span: int = 1


Row = dict[int, Cell]  # 0-based column index → cell; empty cells absent


def column_letter(index: int) -> str:
    """0-based column index → spreadsheet letters: 0 → "A", 25 → "Z", 26 → "AA"."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(65 + rest) + letters
    return letters


def letter_name(index: int) -> str:
    """Spreadsheet column name without a header: "Column A"."""
    return f"Column {column_letter(index)}"


def number_name(index: int) -> str:
    """CSV column name without a header: "Column 1" (1-based)."""
    return f"Column {index + 1}"


class Budget:
    """Cells, columns and row length of one document against ``ParseLimits`` (mutable counter)."""

    def __init__(self, limits: ParseLimits, kind: str) -> None:
        self.limits = limits
        self.kind = kind
        self.cells = 0

    def take(self, cells: int) -> None:
        """Count ``cells`` more; raises ``ParseLimitError`` beyond ``table_max_cells``."""
        self.cells += cells
        if self.cells > self.limits.table_max_cells:
            raise ParseLimitError(
                f"{self.kind} has more than {self.limits.table_max_cells:,} cells; the limit is TABLE_MAX_CELLS"
            )

    def column(self, index: int) -> None:
        """Raises ``ParseLimitError`` when 0-based column ``index`` is beyond ``table_max_columns``."""
        if index >= self.limits.table_max_columns:
            raise ParseLimitError(
                f"{self.kind} has more than {self.limits.table_max_columns:,} columns; "
                "the limit is TABLE_MAX_COLUMNS"
            )

    def row_chars(self, chars: int) -> None:
        """Raises ``ParseLimitError`` when one row holds more than ``table_max_row_chars`` characters."""
        if chars > self.limits.table_max_row_chars:
            raise ParseLimitError(
                f"{self.kind} has a row (line) of more than {self.limits.table_max_row_chars:,} characters; "
                "the limit is TABLE_MAX_ROW_CHARS"
            )


def table_blocks(rows: Iterable[Row], section: str | None, name: Callable[[int], str]) -> list[Block]:
    """Blocks of one sheet: plain rows above the detected header, then one "Name: value | ..." block
    per data row (``name(column)`` for columns without a header). Empty rows are skipped."""
    grid = [row for row in rows if any(cell.text.strip() for cell in row.values())]
    header_at = find_header(grid)
    if header_at is None:
        names: dict[int, str] = {}
        body_from = 0
    else:
        names = {col: " ".join(cell.text.split()) for col, cell in grid[header_at].items()}
        body_from = header_at + 1
    blocks = [Block(_plain(row), section) for row in grid[:header_at or 0]]  # titles above the header
    if header_at is not None and body_from == len(grid):  # a header and nothing below: keep its words
        blocks.append(Block(_plain(grid[header_at]), section))
    for row in grid[body_from:]:
        if len(row) == 1 and next(iter(row.values())).span > 1:
            blocks.append(Block(_plain(row), section))
        else:
            blocks.append(Block(_named(row, names, name), section))
    return blocks


def find_header(grid: Sequence[Row]) -> int | None:
    """Index in ``grid`` (non-empty rows) of the header row, or ``None`` (module docstring).

    The first header-like row is the header unless its columns vote against it (a table of text
    columns, "Name | Note", has one, as pandas and most exports assume); a later header-like row
    (below title rows) needs its columns' votes for it."""
    first = True
    for at, row in enumerate(grid[:HEADER_SCAN_ROWS]):
        body = grid[at + 1:at + 1 + BODY_SAMPLE_ROWS]
        if not body or not _header_like(row, body):
            continue
        if _header_votes(row, body) > (-1 if first else 0):
            return at
        first = False
    return None


def _header_like(row: Row, body: Sequence[Row]) -> bool:
    """Short distinct texts naming at least two columns, and every column that at least half of
    the rows below use (a far-off note or a merged sub-title does not count)."""
    texts = [cell.text.strip() for cell in row.values()]
    usage = Counter(col for below in body for col in below)
    common = {col for col, n in usage.items() if 2 * n >= len(body)}
    return (
        len(row) >= 2
        and set(row) >= common
        and all(cell.kind == "text" and 0 < len(cell.text.strip()) <= MAX_HEADER_CHARS for cell in row.values())
        and len(set(texts)) == len(texts)
    )


def _header_votes(header: Row, sample: Sequence[Row]) -> int:
    """Sum of the columns' votes for ``header`` (positive: a header)."""
    votes = 0
    for col, cell in header.items():
        values = [row[col] for row in sample if col in row]
        if not values:
            continue
        title = cell.text.strip()
        typed = sum(1 for v in values if v.kind != "text")
        if 2 * typed > len(values):
            votes += 1
        elif any(v.text.strip() == title for v in values):
            votes -= 1
        elif not _DIGIT_OR_AT.search(title) and 2 * sum(1 for v in values if _DIGIT_OR_AT.search(v.text)) > len(values):
            votes += 1
    return votes


def _plain(row: Row) -> str:
    return SEPARATOR.join(row[col].text for col in sorted(row))


def _named(row: Row, names: dict[int, str], name: Callable[[int], str]) -> str:
    return SEPARATOR.join(f"{names.get(col) or name(col)}: {row[col].text}" for col in sorted(row))
