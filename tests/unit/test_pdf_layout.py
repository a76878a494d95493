"""Reading order from character boxes (pure: ``readers/pdf/layout.py``), on synthetic boxes."""

from __future__ import annotations

from task_service.pipeline.readers.pdf.layout import HYPHEN, Char, frame, page_lines, page_text, snap

W, H = 5.0, 7.0  # every synthetic glyph: 5 pt wide, 7 pt high


def line(text: str, x: float, y: float, angle: float = 0.0) -> list[Char]:
    """Characters of ``text`` with the baseline starting at ``(x, y)`` running at ``angle`` (0 or 90)."""
    chars = []
    for k, c in enumerate(text):
        if angle == 90:  # runs up the page; glyphs extend to the left of the baseline
            box = (x - H, y + k * W, x, y + (k + 1) * W)
        else:
            box = (x + k * W, y, x + (k + 1) * W, y + H)
        chars.append(Char(c, box if c != " " else (box[0], box[1], box[0], box[1]), angle))
    chars.append(Char("\r", (0, 0, 0, 0), angle))  # PDFium's generated line break: ignored
    chars.append(Char("\n", (0, 0, 0, 0), angle))
    return chars


def test_snap_and_frame() -> None:
    assert snap(0.0) == (0, False) and snap(271.0) == (270, False) and snap(45.0) == (0, True)
    assert frame((10, 20, 15, 27), 0) == (10, -27, 15, -20)
    assert frame((10, 20, 15, 27), 90) == (20, 10, 27, 15)  # u up the page, v to the right


def test_lines_read_top_down_whatever_order_they_were_drawn_in() -> None:
    chars = line("third line", 72, 672) + line("first line", 72, 700) + line("second line", 72, 686)
    assert page_lines(chars) == ["first line", "second line", "third line"]


def test_text_running_up_the_page_reads_its_lines_left_to_right() -> None:
    chars = line("second", 100, 72, 90) + line("first", 86, 72, 90)
    assert page_lines(chars) == ["first", "second"]


def _prose(x: float, words: list[str], rows: int, top: float = 700) -> list[list[Char]]:
    """``rows`` lines of four words each at column ``x``."""
    return [line(" ".join(words[4 * r: 4 * r + 4]), x, top - 12 * r) for r in range(rows)]


def test_two_prose_columns_drawn_row_by_row_read_column_by_column() -> None:
    left = _prose(72, [f"l{k}" for k in range(16)], 4)
    right = _prose(200, [f"r{k}" for k in range(16)], 4)
    interleaved = [c for pair in zip(left, right, strict=True) for row in pair for c in row]
    assert page_lines(interleaved) == ["l0 l1 l2 l3", "l4 l5 l6 l7", "l8 l9 l10 l11", "l12 l13 l14 l15",
                                       "r0 r1 r2 r3", "r4 r5 r6 r7", "r8 r9 r10 r11", "r12 r13 r14 r15"]


def test_a_table_of_short_cells_drawn_row_by_row_reads_row_by_row() -> None:
    cells = [line(text, 72 + 100 * (k % 2), 700 - 12 * (k // 2)) for k, text in enumerate(
        ["Item", "Price", "Bolts", "3.50", "Nuts", "2.10"])]
    assert page_lines([c for cell in cells for c in cell]) == ["Item Price", "Bolts 3.50", "Nuts 2.10"]


def test_a_title_and_a_footer_are_cut_off_before_the_columns() -> None:
    left = _prose(72, [f"l{k}" for k in range(8)], 2)
    right = _prose(200, [f"r{k}" for k in range(8)], 2)
    footer = line("Page 1", 150, 600)  # under the gutter and both columns
    title = line("Title", 72, 740)
    lines = page_lines(title + footer + [c for row in left + right for c in row])
    assert lines == ["Title", "l0 l1 l2 l3", "l4 l5 l6 l7", "r0 r1 r2 r3", "r4 r5 r6 r7", "Page 1"]


def test_a_line_end_hyphen_continues_on_the_next_line() -> None:
    chars = line("long" + HYPHEN, 72, 700) + line("term plan", 72, 686)
    assert page_text(chars) == "long\x02term plan"


def test_a_right_to_left_row_reads_right_to_left() -> None:
    chars = line("שלום", 72, 700) + line(" ", 92, 700) + line("עולם", 100, 700)
    assert page_lines(chars) == ["עולם שלום"]


def test_other_directions_follow_the_main_one() -> None:
    chars = line("stamp", 20, 100, 90) + line("body text here", 72, 700)
    assert page_lines(chars) == ["body text here", "stamp"]
