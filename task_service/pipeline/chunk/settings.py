"""The chunker's bounds: defaults, minimums and :class:`ChunkSettings` (pure; tokens and characters)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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
