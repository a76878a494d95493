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

import itertools
import statistics
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: ``(left, bottom, right, top)`` in PDF points, page space (y grows upwards), before ``/Rotate``.
Box = tuple[float, float, float, float]

WORD_GAP = 1.0  # a gap wider than this × the characters' height starts a new word
LOOSE_TOLERANCE = 0.25  # loose boxes whose edges differ by more than this × height: not one word
GUTTER = 1.0  # a column gap is at least this × the median word height
MIN_ROW_WORDS = 3  # prose rows have at least this many words (median); table cells fewer
FILLED = 0.6  # a prose row spans at least this share of its side's width ...
FILLED_ROWS = 0.5  # ... in at least this share of the side's rows
MAX_SWITCHES = 3  # sides drawn "one after the other": at most this many switches in stream order
TIE = 0.9  # horizontal gaps at least this share of the widest are cut together
MAX_COLUMN_CANDIDATES = 8  # column gaps tried per region, widest first
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


@dataclass(slots=True)
class _Word:
    text: str
    u0: float
    v0: float
    u1: float
    v1: float
    order: int  # index of the first character in PDFium's order
    direction: int

    @property
    def vc(self) -> float:
        return (self.v0 + self.v1) / 2


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
    for group in _by_direction(words):
        height = statistics.median(w.v1 - w.v0 for w in group) or 1.0
        leaves = _xy_cut(group, height) if len(group) <= MAX_LAYOUT_WORDS else [group]
        for leaf in leaves:
            lines.extend(_row_text(row) for row in _rows(leaf))
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


def _words(chars: Sequence[Char]) -> list[_Word]:
    words: list[_Word] = []
    current: _Word | None = None
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
            current = _Word(char.text, *box, order=index, direction=direction)
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


def _touches(word: _Word, reach: tuple[float, float], box: tuple[float, float, float, float]) -> bool:
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


def _by_direction(words: list[_Word]) -> list[list[_Word]]:
    """Words per direction: the direction with most characters first, then by first appearance."""
    groups: dict[int, list[_Word]] = {}
    for word in words:
        groups.setdefault(word.direction, []).append(word)
    weight = {d: sum(len(w.text) for w in ws) for d, ws in groups.items()}
    main = max(weight, key=lambda d: weight[d]) if weight else 0
    return sorted(groups.values(), key=lambda ws: (ws[0].direction != main, ws[0].order))


def _xy_cut(words: list[_Word], height: float) -> list[list[_Word]]:
    """The leaves of the recursive XY-cut of ``words``, in reading order (explicit stack)."""
    leaves: list[list[_Word]] = []
    stack = [words]
    while stack:
        region = stack.pop()
        parts = _split(region, height) if len(region) > 1 else None
        if parts is None:
            leaves.append(region)
        else:
            stack.extend(reversed(parts))
    return leaves


def _split(region: list[_Word], height: float) -> list[list[_Word]] | None:
    """The region's parts at its widest whitespace gap (the widest horizontal gaps, all within
    ``TIE`` of it at once, or the widest gutter that separates columns); ``None`` for a leaf."""
    gaps = _gaps((w.v0, w.v1) for w in region)
    widest = max((end - start for start, end in gaps), default=0.0)
    columns = _column_cut(region, height, widest)
    if columns is not None:
        return columns
    if not gaps:
        return None
    cuts = [end for start, end in gaps if end - start >= TIE * widest]
    return _bands(region, cuts)


def _column_cut(region: list[_Word], height: float, across: float) -> list[list[_Word]] | None:
    """The region's two sides at its widest gutter (at least ``GUTTER`` × ``height`` and wider
    than the widest horizontal gap ``across``) whose sides read as columns."""
    gaps = [g for g in _gaps((w.u0, w.u1) for w in region) if g[1] - g[0] >= max(GUTTER * height, across)]
    gaps.sort(key=lambda g: g[0] - g[1])
    for start, end in gaps[:MAX_COLUMN_CANDIDATES]:
        left = [w for w in region if w.u1 <= start]
        right = [w for w in region if w.u0 >= end]
        if _columns(left, right):
            return [left, right]
    return None


def _bands(region: list[_Word], cuts: list[float]) -> list[list[_Word]]:
    """``region`` split at the ``cuts`` positions (sorted) of ``v0``."""
    bands: list[list[_Word]] = [[] for _ in range(len(cuts) + 1)]
    for word in region:
        index = 0
        while index < len(cuts) and word.v0 >= cuts[index]:
            index += 1
        bands[index].append(word)
    return [band for band in bands if band]


def _gaps(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The uncovered stretches ``(start, end)`` between the intervals' union, narrowest > 0.1 pt."""
    gaps: list[tuple[float, float]] = []
    reach: float | None = None
    for start, end in sorted(intervals):
        if reach is not None and start - reach > 0.1:
            gaps.append((reach, start))
        reach = end if reach is None else max(reach, end)
    return gaps


def _columns(left: list[_Word], right: list[_Word]) -> bool:
    """Whether ``left`` and ``right`` are read one after the other: each has two rows or more,
    and both are prose or the content stream drew them apart."""
    left_rows, right_rows = _rows(left), _rows(right)
    if len(left_rows) < 2 or len(right_rows) < 2:
        return False
    if _drawn_apart(left, right, min(len(left_rows), len(right_rows))):
        return True
    return _prose(left, left_rows) and _prose(right, right_rows)


def _drawn_apart(left: list[_Word], right: list[_Word], rows: int) -> bool:
    """Whether the content stream drew one side after the other: it switched between them fewer
    times than the shorter side has ``rows`` (and at most ``MAX_SWITCHES``); row by row it would
    switch twice per row."""
    sides = sorted([(w.order, 0) for w in left] + [(w.order, 1) for w in right])
    switches = sum(1 for a, b in itertools.pairwise(sides) if a[1] != b[1])
    return switches <= min(MAX_SWITCHES, rows - 1)


def _prose(side: list[_Word], rows: list[list[_Word]]) -> bool:
    """Whether ``side`` (grouped into ``rows``) reads as a column of running text (not table
    cells or labels)."""
    width = max(w.u1 for w in side) - min(w.u0 for w in side)
    filled = sum(1 for row in rows if max(w.u1 for w in row) - min(w.u0 for w in row) >= FILLED * width)
    return filled >= FILLED_ROWS * len(rows) and statistics.median(len(row) for row in rows) >= MIN_ROW_WORDS


def _rows(words: list[_Word]) -> list[list[_Word]]:
    """``words`` grouped into rows, top to bottom, each read along ``u``: a word joins the row
    when its centre lies in the row's span or the row's centre in the word's."""
    rows: list[list[_Word]] = []
    span = (0.0, 0.0)
    for word in sorted(words, key=lambda w: w.vc):
        centre = (span[0] + span[1]) / 2
        if rows and (span[0] <= word.vc <= span[1] or word.v0 <= centre <= word.v1):
            rows[-1].append(word)
            span = (min(span[0], word.v0), max(span[1], word.v1))
        else:
            rows.append([word])
            span = (word.v0, word.v1)
    return [sorted(row, key=lambda w: (w.u0, w.order)) for row in rows]


def _row_text(row: list[_Word]) -> str:
    if _right_to_left(row):
        row = row[::-1]
    return " ".join(w.text for w in row)


def _right_to_left(row: list[_Word]) -> bool:
    """Whether most strong letters of ``row`` are right-to-left (Hebrew, Arabic, ...)."""
    rtl = ltr = 0
    for word in row:
        for char in word.text:
            kind = unicodedata.bidirectional(char)
            if kind in ("R", "AL"):
                rtl += 1
            elif kind == "L":
                ltr += 1
    return rtl > ltr
