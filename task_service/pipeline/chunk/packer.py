"""The linear packer of one ``Chunker.chunk`` call: tokenizes window by window and packs chunks
within both bounds as it goes (steps 2-4 of the algorithm in ``chunk/__init__.py``)."""

from __future__ import annotations

import sys
from typing import Protocol

import numpy as np
from tokenizers import Encoding

from shared.domain.records import Chunk
from task_service.pipeline.chunk.units import (
    INSIDE_WORD,
    LINE,
    PARAGRAPH,
    SECTION,
    SENTENCE,
    SPACE,
    WORD,
    Units,
    segment_tokens,
    segment_windows,
    text_segments,
)
from task_service.pipeline.document import SECTION_SEPARATOR, Block


class Tokens(Protocol):
    """What the packer asks of its ``Chunker``: the bounds (tokens, characters) and its three
    ways of counting (the word-level ASCII path, ``encode_batch``, the re-counting slow path)."""

    max_tokens: int
    max_chars: int
    overlap_tokens: int
    overlap_chars: int

    def ascii_ok(self, text: str) -> bool: ...

    def encode(self, texts: list[str]) -> list[Encoding]: ...

    def ascii_units(self, text: str, lo: int, hi: int, safe: bool) -> Units: ...

    def hard_spans(self, text: str, lo: int, hi: int) -> list[tuple[int, int, int]]: ...


_FILL = 0.5  # a cut below PARAGRAPH level is taken from the window's second half
_TERMINATORS = np.array([ord(c) for c in ".!?。！？…"], dtype=np.uint32)


class Packer:
    """One ``Chunker.chunk`` call: tokenizes window by window and packs chunks as it goes."""

    def __init__(self, chunker: Tokens, blocks: tuple[Block, ...], limit: int | None = None) -> None:
        self.c = chunker
        self.limit = sys.maxsize if limit is None else limit  # stop once more chunks than this are packed
        self.blocks = blocks
        self.text = "\n\n".join(b.text for b in blocks)
        lengths = np.fromiter((len(b.text) + 2 for b in blocks), dtype=np.int64, count=len(blocks))
        self.block_start = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(blocks) else lengths
        headings = np.fromiter((is_heading(b) for b in blocks), dtype=bool, count=len(blocks))
        self.content_before = np.concatenate([[0], np.cumsum(~headings)])  # non-heading blocks before b
        changed = [i for i in range(1, len(blocks)) if blocks[i].section != blocks[i - 1].section]
        self.section_starts = self.block_start[changed] if changed else np.zeros(0, dtype=np.int64)
        self.tokens = Units.empty()
        self.cum = np.zeros(1, dtype=np.int64)  # cum[i]: model tokens in units [0, i)
        self.pos = 0  # index in self.tokens of the next chunk's first token
        self.floor = -1  # index of the previous chunk's end: the next one must end after it
        self.prev = (0, 0)  # (start, end) of the last token tokenized so far
        self.spans: list[tuple[int, int, int]] = []  # (start, end, token_count)

    def run(self) -> list[Chunk]:
        windows = list(segment_windows(text_segments(self.text)))
        for i, window in enumerate(windows):
            self.tokens = Units.concat([self.tokens.tail(self.pos), self._tokenize(window)])
            self.cum = np.concatenate([[0], np.cumsum(self.tokens.weight)])
            self.floor -= self.pos
            self.pos = 0
            self._pack(final=i == len(windows) - 1)
            if self._passed_limit():
                del self.spans[self.limit + 1:]
                break
        return [self._chunk(i, a, b, n) for i, (a, b, n) in enumerate(self.spans)]

    def _passed_limit(self) -> bool:
        return len(self.spans) > self.limit

    def _chunk(self, index: int, a: int, b: int, count: int) -> Chunk:
        """Chunk of ``text[a:b]``: ``page`` of the block holding its first character, ``section`` of
        its first body (non-heading) block, so "# Guide / ## Install / ### Linux / body" in one
        chunk is "Guide > Install > Linux"; a chunk of headings only takes its first block's."""
        first, last = np.searchsorted(self.block_start, [a, b - 1], side="right") - 1
        # content_before[j + 1] > content_before[first] ⇔ a body block lies in [first, j]
        body = int(np.searchsorted(self.content_before, self.content_before[first] + 1, side="left")) - 1
        block = self.blocks[first]
        section = self.blocks[body].section if body <= last else block.section
        return Chunk(index, self.text[a:b], count, block.page, section)

    # ------------------------------------------------------------------ tokens and levels

    def _tokenize(self, window: list[tuple[int, int, bool]]) -> Units:
        """Units of a window's segments: ASCII ones word by word, the others token by token."""
        fast = [self.c.ascii_ok(self.text[lo:hi]) for lo, hi, _ in window]
        slow = [segment for segment, ok in zip(window, fast, strict=True) if not ok]
        encodings = iter(self.c.encode([self.text[lo:hi] for lo, hi, _ in slow]))
        units = Units.concat([
            self.c.ascii_units(self.text, lo, hi, safe) if ok else segment_tokens(next(encodings), lo, safe)
            for (lo, hi, safe), ok in zip(window, fast, strict=True)
        ])
        if not len(units):
            return Units.empty()
        units.level = self._levels(units.start, units.end, units.word_start, window[0][0], window[-1][1])
        self.prev = (int(units.start[-1]), int(units.end[-1]))
        return units

    def _levels(self, start: np.ndarray, end: np.ndarray, word_start: np.ndarray, lo: int, hi: int) -> np.ndarray:
        prev_start = np.concatenate([[self.prev[0]], start[:-1]])
        prev_end = np.concatenate([[self.prev[1]], end[:-1]])
        base = min(int(prev_start[0]), lo)
        codes = np.frombuffer(self.text[base:hi].encode("utf-32-le"), dtype=np.uint32)
        newlines = np.concatenate([[0], np.cumsum(codes == 10)])
        breaks = newlines[start - base] - newlines[np.minimum(prev_end, start) - base]
        gap = start > prev_end
        last_char = codes[np.maximum(prev_end - 1 - base, 0)]
        terminated = (prev_end - prev_start == 1) & np.isin(last_char, _TERMINATORS) & (gap | (last_char >= 0x3000))
        level = np.select(
            [~word_start, breaks >= 2, breaks == 1, terminated, gap],
            [INSIDE_WORD, PARAGRAPH, LINE, SENTENCE, SPACE], default=WORD,
        ).astype(np.int8)
        marks = self.section_starts[(self.section_starts > self.prev[0]) & (self.section_starts <= start[-1])]
        level[np.searchsorted(start, marks, side="left")] = SECTION
        return level

    # ------------------------------------------------------------------ packing

    def _pack(self, *, final: bool) -> None:
        t = self.tokens
        n = len(t)
        while self.pos < n and not self._passed_limit():
            s = self.pos
            e_max = self._reach(s)
            if e_max >= n and not final:
                return  # the window may continue further: wait for more tokens
            if e_max <= s:  # unit s alone breaks a bound (an over-long word)
                self.spans.extend(self.c.hard_spans(self.text, int(t.start[s]), int(t.end[s])))
                self.pos = self._after(s + 1)
                continue
            if e_max >= n:  # the rest fits: only a section start cuts it
                end = self._section_cut(s, n - 1) or n
                self._emit(s, end)
                self.pos = end
                continue
            cut = self._cut(s, e_max)
            if cut is None:  # no word boundary within the bounds: one word too long
                word_end = self._word_end(s)
                if word_end >= n and not final:
                    return
                self.spans.extend(self.c.hard_spans(self.text, int(t.start[s]), int(t.end[word_end - 1])))
                self.pos = self._after(word_end)
                continue
            self._emit(s, cut)
            self.floor = cut
            self.pos = self._next_start(s, cut)

    def _reach(self, s: int) -> int:
        """The largest ``e`` such that units ``[s, e)`` fit both bounds (``s`` if none does)."""
        t = self.tokens
        by_chars = int(np.searchsorted(t.end, t.start[s] + self.c.max_chars, side="right"))
        by_tokens = int(np.searchsorted(self.cum, self.cum[s] + self.c.max_tokens, side="right")) - 1
        return min(by_chars, by_tokens)

    def _after(self, i: int) -> int:
        """First token from ``i`` that starts at or after the end of token ``i - 1``."""
        t = self.tokens
        while i < len(t) and t.start[i] < t.end[i - 1]:
            i += 1
        return i

    def _word_end(self, s: int) -> int:
        """Index of the first word start after token ``s`` (``len`` if none is loaded)."""
        level, step, lo = self.tokens.level, 4 * self.c.max_tokens, s + 1
        while lo < len(level):
            following = np.flatnonzero(level[lo:lo + step] >= WORD)
            if len(following):
                return lo + int(following[0])
            lo, step = lo + step, 2 * step
        return len(level)

    def _cut(self, s: int, e_max: int) -> int | None:
        """Where the chunk starting at token ``s`` ends (exclusive); ``None`` if no word boundary."""
        section = self._section_cut(s, e_max)
        if section is not None:
            return section
        level = self.tokens.level
        first = max(s, self.floor) + 1  # an overlapped chunk must reach past the previous one
        lo = max(first, s + 1 + int((e_max - s) * _FILL))
        window = np.minimum(level[lo:e_max + 1], PARAGRAPH)  # section starts left: only headings before
        best = int(window.max()) if len(window) else INSIDE_WORD
        if best < WORD:
            lo, window = first, np.minimum(level[first:e_max + 1], PARAGRAPH)
            best = int(window.max()) if len(window) else INSIDE_WORD
            if best < WORD:
                return None
        cut = lo + len(window) - 1 - int(np.argmax(window[::-1] == best))
        return cut if best >= PARAGRAPH else self._whole_paragraph(first, cut, e_max)

    def _whole_paragraph(self, first: int, cut: int, e_max: int) -> int:
        """``cut`` (inside a paragraph), or the start of that paragraph when the paragraph fits in
        one chunk from there: a block that fits (a table row with its headers) is never split."""
        starts = np.flatnonzero(self.tokens.level[first:cut] >= PARAGRAPH)
        if not len(starts):
            return cut
        q = first + int(starts[-1])
        reach = self._reach(q)
        following = np.flatnonzero(self.tokens.level[e_max + 1:reach + 1] >= PARAGRAPH)
        return q if len(following) or reach >= len(self.tokens) else cut

    def _section_cut(self, s: int, last: int) -> int | None:
        """The first section start in tokens ``(s, last]`` with text (not only headings) before it."""
        if not len(self.section_starts):
            return None
        for p in np.flatnonzero(self.tokens.level[s + 1:last + 1] == SECTION) + s + 1:
            if self._has_content(s, int(p)):
                return int(p)
        return None

    def _has_content(self, s: int, p: int) -> bool:
        """True if tokens ``[s, p)`` reach into a block that is not a heading."""
        first, last = np.searchsorted(self.block_start, [self.tokens.start[s], self.tokens.start[p]], side="right") - 1
        return bool(self.content_before[last] - self.content_before[first] > 0)

    def _emit(self, s: int, p: int) -> None:
        t = self.tokens
        a, b = int(t.start[s]), int(t.end[p - 1])
        exact = t.level[s] >= WORD and (p >= len(t) or t.level[p] >= WORD) and not t.unsafe[s + 1:p].any()
        if exact:
            self.spans.append((a, b, int(self.cum[p] - self.cum[s])))
        else:  # a chunk across a segment cut inside a word: its true count may differ
            self.spans.extend(self.c.hard_spans(self.text, a, b))

    def _next_start(self, s: int, p: int) -> int:
        """First token of the chunk after ``[s, p)``: ``p``, or earlier to overlap."""
        t = self.tokens
        if p >= len(t) or t.level[p] >= PARAGRAPH or self.c.overlap_tokens == 0:
            return p
        lo = max(s + 1, int(np.searchsorted(self.cum, self.cum[p] - self.c.overlap_tokens, side="left")),
                 int(np.searchsorted(t.start, t.end[p - 1] - self.c.overlap_chars, side="left")))
        if lo >= p:
            return p
        paragraph = np.flatnonzero(t.level[lo:p] >= PARAGRAPH)
        if len(paragraph):
            lo += int(paragraph[-1])
        lines = np.flatnonzero(t.level[lo:p] >= LINE)  # whole lines (table rows, log lines) if any
        spaced = lines if len(lines) else np.flatnonzero(t.level[lo:p] >= SPACE)
        if not len(spaced):
            return p
        q = lo + int(spaced[0])
        return q if self._reach(q) > p else p  # the next chunk must be able to end after this one


def is_heading(block: Block) -> bool:
    """A heading block carries the section path that ends with its own text (``document.py``)."""
    if block.section is None:
        return False
    title = " ".join(block.text.split())
    return block.section == title or block.section.endswith(SECTION_SEPARATOR + title)
