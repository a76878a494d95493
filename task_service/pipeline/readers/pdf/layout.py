"""PDF reading order from character boxes (pure): rotated text, columns, rows.

In: a page's characters in PDFium's order (``Char``: the character, its box in the page's own,
unrotated space, its baseline direction). Out: the page's lines in reading order (``page_lines``)
or its text (``page_text``). PDFium's own text order (``get_text_bounded``) is taken from the
content stream and its line detection: a ``/Rotate 90`` page comes out with its lines reversed,
rotated text matrices glue lines together, and two columns drawn row by row interleave.

1. **Direction.** Each character's baseline direction (from its text matrix, CTM included) is
   snapped to 0, 90, 180 or 270°; every direction is laid out in its own frame, ``u`` along the
   baseline and ``v`` down the lines, so a page's ``/Rotate`` does not matter, only how its
   text runs. The direction holding most characters is read first, then the others (a margin
   stamp, a rotated table) in the order they were drawn.
2. **Words**: consecutive non-space characters in PDFium's order that touch (same direction,
   same line, a gap under ``WORD_GAP`` × their height; overlapping glyphs, as the two letters
   of a ligature, touch; a superscript or subscript is a word of its own, unless it is letters
   after a number: "29th"). PDFium's generated ``\r\n`` are ignored (it puts one between a link
   and the "." after it); spaces, generated or not, separate words.
3. **Recursive XY-cut** on the word boxes (Nagy & Seth 1984, "Hierarchical representation of
   optically scanned documents", ICPR; the bounding-box variant: Ha, Haralick & Phillips 1995,
   "Recursive X-Y cut using bounding boxes of connected components", ICDAR), each region at its
   widest whitespace gap. Across ``u`` (a gutter, at least ``GUTTER`` × the median word height
   wide) only when both sides read as columns: both are prose (``_prose``: several rows, most
   of them filling the side, ``MIN_ROW_WORDS`` words or more), or the content stream drew one
   side after the other (a table of contents drawn column by column stays so; a table drawn
   row by row stays rows). Across ``v`` at its widest gaps (all gaps within ``TIE`` of the
   widest at once): a title or a footer further from the text than the gutter is wide is cut
   off first. A region without a cut is a leaf: its words are grouped into rows (by ``v``; a
   superscript joins its row) and each row is read along ``u`` (right to left when most of
   its letters are of a right-to-left script).
4. **Lines**: a row per line; a row ending with PDFium's line-end hyphen marker ``\\x02``
   continues on the next line without a break (``hyphens.py`` then decides join or hyphen).

Work is O(n log n) per cut over a page's ``n`` words; pages past ``MAX_LAYOUT_WORDS`` words skip
the XY-cut and are read in rows only.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from task_service.pipeline.readers.pdf.columns import Word, by_direction, row_text, rows, xy_cut

#: ``(left, bottom, right, top)`` in PDF points, page space (y grows upwards), before ``/Rotate``.
Box = tuple[float, float, float, float]

WORD_GAP = 1.0  # a gap wider than this × the characters' height starts a new word
LOOSE_TOLERANCE = 0.25  # loose boxes whose edges differ by more than this × height: not one word
MAX_LAYOUT_WORDS = 20_000  # past this, rows only (the XY-cut is quadratic in the worst case)
HYPHEN = "\x02"  # PDFium's marker for a hyphen at a line end
_LINE_BREAKS = frozenset("\r\n")


@dataclass(frozen=True, slots=True)
class Char:
    """One character of a page: ``text`` (one character; whitespace, generated or not, separates
    words), ``box`` (its glyph box; zero-sized for spaces), ``angle``, the baseline direction
    in degrees counter-clockwise from the page's x axis (0 for upright text), and ``loose``, the
    box of the font's ascent to descent (``FPDFText_GetLooseCharBox``): equal for the letters
    of a line in one font and size, so a superscript or subscript is a word of its own."""

    text: str
    box: Box
    angle: float = 0.0
    loose: Box | None = None


def page_text(chars: Sequence[Char]) -> str:
    """The page's text in reading order: ``page_lines`` joined by newlines, a line ending with
    ``HYPHEN`` joined to the next one directly."""
    out: list[str] = []
    for line in page_lines(chars):
        out.append(line)
        if not line.endswith(HYPHEN):
            out.append("\n")
    return "".join(out).rstrip("\n")


def page_lines(chars: Sequence[Char]) -> list[str]:
    """The page's lines in reading order (see the module docstring); words in a line are
    separated by one space."""
    words = _words(chars)
    lines: list[str] = []
    for group in by_direction(words):
        height = statistics.median(w.v1 - w.v0 for w in group) or 1.0
        leaves = xy_cut(group, height) if len(group) <= MAX_LAYOUT_WORDS else [group]
        for leaf in leaves:
            lines.extend(row_text(row) for row in rows(leaf))
    return lines


def snap(angle: float) -> tuple[int, bool]:
    """``angle`` (degrees) snapped to 0/90/180/270, and whether it was more than 5° off (skewed)."""
    turned = angle % 360.0
    direction = round(turned / 90.0) % 4 * 90
    off = abs((turned - direction + 180.0) % 360.0 - 180.0)
    return direction, off > 5.0


def frame(box: Box, direction: int) -> tuple[float, float, float, float]:
    """``box`` in the frame of text running in ``direction``: ``(u0, v0, u1, v1)``, ``u`` along
    the baseline, ``v`` from one line to the next."""
    left, bottom, right, top = box
    if direction == 90:
        return bottom, left, top, right
    if direction == 180:
        return -right, bottom, -left, top
    if direction == 270:
        return -top, -right, -bottom, -left
    return left, -top, right, -bottom


def _words(chars: Sequence[Char]) -> list[Word]:
    words: list[Word] = []
    current: Word | None = None
    reach = (0.0, 0.0)  # u0, u1 of the current word's last character with a glyph box
    line: tuple[float, float] | None = None  # v extent of its loose box
    for index, char in enumerate(chars):
        if not char.text or char.text in _LINE_BREAKS:
            continue  # PDFium's generated line breaks are not reliable (one before a link's "."): geometry decides
        if char.text.isspace():
            current = None
            continue
        direction, skewed = snap(char.angle)
        box = frame(char.box, direction)
        loose = _extent(char.loose, direction)
        if current is not None and current.direction == direction and (
            skewed or ((_same_line(line, loose) or _ordinal(current.text, char.text)) and _touches(current, reach, box))
        ):
            current.text += char.text
            current.u0, current.v0 = min(current.u0, box[0]), min(current.v0, box[1])
            current.u1, current.v1 = max(current.u1, box[2]), max(current.v1, box[3])
        else:
            current = Word(char.text, *box, order=index, direction=direction)
            words.append(current)
        if box[2] > box[0] or box[3] > box[1]:
            reach, line = (box[0], box[2]), loose
    return words


def _ordinal(word: str, char: str) -> bool:
    """A raised letter after a number continues it ("29th", "1er"); a raised digit after a word
    is a footnote mark and does not ("Shen 1")."""
    return char.isalpha() and word[-1].isdigit()


def _extent(loose: Box | None, direction: int) -> tuple[float, float] | None:
    if loose is None:
        return None
    _, v0, _, v1 = frame(loose, direction)
    return (v0, v1) if v1 > v0 else None


def _same_line(last: tuple[float, float] | None, new: tuple[float, float] | None) -> bool:
    """Whether two loose extents are of one line, font size and baseline (each edge within a
    quarter of the height; a superscript's bottom is ≈0.4 heights higher)."""
    if last is None or new is None:
        return True
    tolerance = LOOSE_TOLERANCE * max(last[1] - last[0], new[1] - new[0])
    return abs(last[0] - new[0]) <= tolerance and abs(last[1] - new[1]) <= tolerance


def _touches(word: Word, reach: tuple[float, float], box: tuple[float, float, float, float]) -> bool:
    """Whether a character ``box`` continues ``word``, whose last glyph spans ``reach`` along the
    line: its centre within the word's line (± half a height), starting at or after that glyph's
    start (the "f" and "i" of a ligature share one box), its gap under ``WORD_GAP`` heights."""
    if box[2] <= box[0] and box[3] <= box[1]:
        return True  # no glyph box (a combining mark, an empty glyph): stays with its word
    height = max(word.v1 - word.v0, box[3] - box[1], 1.0)
    centre = (box[1] + box[3]) / 2
    if not word.v0 - height / 2 <= centre <= word.v1 + height / 2:
        return False
    return reach[0] - 0.1 <= box[0] <= reach[1] + WORD_GAP * height
