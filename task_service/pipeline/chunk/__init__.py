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

from task_service.pipeline.chunk.chunker import Chunker, load_minilm_tokenizer
from task_service.pipeline.chunk.settings import (
    DEFAULT_CHUNKING,
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_CHUNKS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_OVERLAP_TOKENS,
    MIN_MAX_CHARS,
    MIN_MAX_TOKENS,
    ChunkSettings,
)

__all__ = [
    "DEFAULT_CHUNKING",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_CHUNKS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_OVERLAP_TOKENS",
    "MIN_MAX_CHARS",
    "MIN_MAX_TOKENS",
    "ChunkSettings",
    "Chunker",
    "load_minilm_tokenizer",
]
