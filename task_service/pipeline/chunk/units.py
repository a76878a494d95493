"""The units the packer works on (tokens, or whole ASCII words, with global offsets, boundary
levels and weights) and the segmentation of a text into tokenizable pieces (pure, numpy)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from tokenizers import Encoding

# Boundary levels: the kind of gap before a token (cutting there starts a chunk with that token).
INSIDE_WORD, WORD, SPACE, SENTENCE, LINE, PARAGRAPH, SECTION = -1, 0, 1, 2, 3, 4, 5
_SEGMENT_CHARS = 65_536  # tokenized per string
_WINDOW_CHARS = 1_048_576  # tokenized per encode_batch call (bounds memory on a 50 MB text)
_SEAM_CHARS = (" ", "\n", "\t", ".", ",", ";", ":", "/", "-", "_", "=", "&", "?", "|", ")", "]", "}")


# ---------------------------------------------------------------------- the linear packer


@dataclass
class Units:
    """The text still to pack as units — tokens, or whole ASCII words — with global character
    offsets, the boundary level before each, and its weight in model tokens."""

    start: np.ndarray
    end: np.ndarray
    word_start: np.ndarray  # False: a token inside a word
    unsafe: np.ndarray  # first unit after a segment cut inside a word: chunks across it are re-counted
    weight: np.ndarray
    level: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))

    @classmethod
    def of(cls, start: np.ndarray, end: np.ndarray, word_start: np.ndarray, safe: bool,
           weight: np.ndarray) -> Units:
        unsafe = np.zeros(len(start), dtype=bool)
        if len(start) and not safe:
            word_start[0] = False
            unsafe[0] = True
        return cls(start, end, word_start, unsafe, weight)

    @classmethod
    def empty(cls) -> Units:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, np.zeros(0, dtype=bool), np.zeros(0, dtype=bool), z, np.zeros(0, dtype=np.int8))

    @classmethod
    def concat(cls, parts: list[Units]) -> Units:
        names = ("start", "end", "word_start", "unsafe", "weight", "level")
        return cls(*(np.concatenate([getattr(p, name) for p in parts]) for name in names))

    def __len__(self) -> int:
        return len(self.start)

    def tail(self, keep_from: int) -> Units:
        return Units(self.start[keep_from:], self.end[keep_from:], self.word_start[keep_from:],
                      self.unsafe[keep_from:], self.weight[keep_from:], self.level[keep_from:])


def segment_tokens(enc: Encoding, lo: int, safe: bool) -> Units:
    """One segment's tokens as units of weight 1, offsets made global."""
    offsets = enc.offsets
    flat = np.fromiter(itertools.chain.from_iterable(offsets), dtype=np.int64, count=2 * len(offsets))
    flat += lo
    words = np.array([-1 if w is None else w for w in enc.word_ids] if None in enc.word_ids else enc.word_ids,
                     dtype=np.int64)
    word_start = np.ones(len(offsets), dtype=bool)
    word_start[1:] = words[1:] != words[:-1]
    return Units.of(flat[0::2], flat[1::2], word_start, safe, np.ones(len(offsets), dtype=np.int64))


def text_segments(text: str) -> Iterator[tuple[int, int, bool]]:
    """``(lo, hi, safe)``: consecutive pieces of ≤ ``_SEGMENT_CHARS`` characters, cut after a
    paragraph break, line break or space (else before punctuation) in their last half; ``safe``
    is False for a piece that starts where a run of 32 K characters had none (a hard cut)."""
    lo, safe = 0, True
    while lo < len(text):
        hi = lo + _SEGMENT_CHARS
        if hi >= len(text):
            yield lo, len(text), safe
            return
        half = lo + _SEGMENT_CHARS // 2
        cut = text.rfind("\n\n", half, hi)
        if cut < 0:
            cut = max(text.rfind("\n", half, hi), text.rfind(" ", half, hi))
        if cut < 0:
            cut = max(text.rfind(c, half, hi) for c in _SEAM_CHARS)
        next_safe = cut >= 0
        cut = cut if cut >= 0 else hi
        yield lo, cut, safe
        lo, safe = cut, next_safe


def segment_windows(segments: Iterator[tuple[int, int, bool]]) -> Iterator[list[tuple[int, int, bool]]]:
    """Groups of consecutive segments of about ``_WINDOW_CHARS`` characters; at least one group."""
    window: list[tuple[int, int, bool]] = []
    size = 0
    for segment in segments:
        window.append(segment)
        size += segment[1] - segment[0]
        if size >= _WINDOW_CHARS:
            yield window
            window, size = [], 0
    if window or size == 0:
        yield window or [(0, 0, True)]
