"""The reading order of a page's words (pure; the rules are ``layout.py``'s module docstring):
grouped by text direction, cut into regions and columns (a recursive XY-cut on the widest
gaps, a column only where both sides read as prose), then rows within a region."""

from __future__ import annotations

import itertools
import statistics
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

GUTTER = 1.0  # a column gap is at least this × the median word height
MIN_ROW_WORDS = 3  # prose rows have at least this many words (median); table cells fewer
FILLED = 0.6  # a prose row spans at least this share of its side's width ...
FILLED_ROWS = 0.5  # ... in at least this share of the side's rows
MAX_SWITCHES = 3  # sides drawn "one after the other": at most this many switches in stream order
TIE = 0.9  # horizontal gaps at least this share of the widest are cut together
MAX_COLUMN_CANDIDATES = 8  # column gaps tried per region, widest first


@dataclass(slots=True)
class Word:
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


def by_direction(words: list[Word]) -> list[list[Word]]:
    """Words per direction: the direction with most characters first, then by first appearance."""
    groups: dict[int, list[Word]] = {}
    for word in words:
        groups.setdefault(word.direction, []).append(word)
    weight = {d: sum(len(w.text) for w in ws) for d, ws in groups.items()}
    main = max(weight, key=lambda d: weight[d]) if weight else 0
    return sorted(groups.values(), key=lambda ws: (ws[0].direction != main, ws[0].order))


def xy_cut(words: list[Word], height: float) -> list[list[Word]]:
    """The leaves of the recursive XY-cut of ``words``, in reading order (explicit stack)."""
    leaves: list[list[Word]] = []
    stack = [words]
    while stack:
        region = stack.pop()
        parts = _split(region, height) if len(region) > 1 else None
        if parts is None:
            leaves.append(region)
        else:
            stack.extend(reversed(parts))
    return leaves


def _split(region: list[Word], height: float) -> list[list[Word]] | None:
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


def _column_cut(region: list[Word], height: float, across: float) -> list[list[Word]] | None:
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


def _bands(region: list[Word], cuts: list[float]) -> list[list[Word]]:
    """``region`` split at the ``cuts`` positions (sorted) of ``v0``."""
    bands: list[list[Word]] = [[] for _ in range(len(cuts) + 1)]
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


def _columns(left: list[Word], right: list[Word]) -> bool:
    """Whether ``left`` and ``right`` are read one after the other: each has two rows or more,
    and both are prose or the content stream drew them apart."""
    left_rows, right_rows = rows(left), rows(right)
    if len(left_rows) < 2 or len(right_rows) < 2:
        return False
    if _drawn_apart(left, right, min(len(left_rows), len(right_rows))):
        return True
    return _prose(left, left_rows) and _prose(right, right_rows)


def _drawn_apart(left: list[Word], right: list[Word], rows: int) -> bool:
    """Whether the content stream drew one side after the other: it switched between them fewer
    times than the shorter side has ``rows`` (and at most ``MAX_SWITCHES``); row by row it would
    switch twice per row."""
    sides = sorted([(w.order, 0) for w in left] + [(w.order, 1) for w in right])
    switches = sum(1 for a, b in itertools.pairwise(sides) if a[1] != b[1])
    return switches <= min(MAX_SWITCHES, rows - 1)


def _prose(side: list[Word], rows: list[list[Word]]) -> bool:
    """Whether ``side`` (grouped into ``rows``) reads as a column of running text (not table
    cells or labels)."""
    width = max(w.u1 for w in side) - min(w.u0 for w in side)
    filled = sum(1 for row in rows if max(w.u1 for w in row) - min(w.u0 for w in row) >= FILLED * width)
    return filled >= FILLED_ROWS * len(rows) and statistics.median(len(row) for row in rows) >= MIN_ROW_WORDS


def rows(words: list[Word]) -> list[list[Word]]:
    """``words`` grouped into rows, top to bottom, each read along ``u``: a word joins the row
    when its centre lies in the row's span or the row's centre in the word's."""
    rows: list[list[Word]] = []
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


def row_text(row: list[Word]) -> str:
    if _right_to_left(row):
        row = row[::-1]
    return " ".join(w.text for w in row)


def _right_to_left(row: list[Word]) -> bool:
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
