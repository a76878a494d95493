"""Document bytes → chunks with provenance and the parser's warnings: parse, then chunk (pure CPU).

This is the unit of work the parse sandbox runs in its child process (``sandbox.py``), so the
child's CPU, memory and wall-clock limits cover parsing AND chunking, and a limit hit kills the
child: no thread of the worker outlives its task.
"""

from __future__ import annotations

import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from shared.domain.errors import NoTextError, ParseLimitError
from shared.domain.records import Chunk
from task_service.pipeline import ocr
from task_service.pipeline.chunk import Chunker
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.parse import parse_document


@dataclass(frozen=True)
class Extraction:
    """Chunks (indexes 0..n-1, n >= 1), warnings (sentences for the document API) and how long
    parsing and chunking took (seconds, for the stage metrics)."""

    chunks: tuple[Chunk, ...]
    warnings: tuple[str, ...] = field(default=())
    parse_s: float = field(default=0.0, compare=False)  # timings: not part of the result
    chunk_s: float = field(default=0.0, compare=False)

    def pack(self) -> Packed:
        """A form that unpickles in a few large C calls (one string, flat lists) rather than one
        object per chunk: ``pickle.loads`` holds the GIL for the whole call, and unpickling 90,000
        chunk objects in the worker stalled its event loop past the AMQP heartbeat. See ``unpack``."""
        contents = [c.content for c in self.chunks]
        return ("".join(contents), [len(t) for t in contents], [c.token_count for c in self.chunks],
                [c.page for c in self.chunks], [c.section for c in self.chunks], self.warnings,
                (self.parse_s, self.chunk_s))

    @classmethod
    def unpack(cls, packed: Packed) -> Extraction:
        """The inverse of ``pack``; builds the chunks in Python (the GIL changes hands meanwhile)."""
        text, lengths, counts, pages, sections, warnings, (parse_s, chunk_s) = packed
        chunks = []
        at = 0
        for index, (length, count, page, section) in enumerate(zip(lengths, counts, pages, sections, strict=True)):
            chunks.append(Chunk(index, text[at:at + length], count, page, section))
            at += length
        return cls(tuple(chunks), tuple(warnings), parse_s, chunk_s)


Packed = tuple[
    str, list[int], list[int], list[int | None], list[str | None], tuple[str, ...], tuple[float, float]
]


#: Told the name of the stage extraction enters: ``on_stage("CHUNKING")`` once parsing is done, and
#: ``on_stage("OCR", share)`` as scanned pages are OCRed (``share`` = pages done / pages to OCR, 0..1).
StageCallback = Callable[..., None]


def extract(
    data: bytes, filename: str, parse_limits: ParseLimits, chunker: Chunker, on_stage: StageCallback | None = None
) -> Extraction:
    """``parse_document`` then ``chunker.chunk``; ``on_stage("CHUNKING")`` between the two.

    Raises what ``parse_document`` raises (``ParseLimitError``, ``CorruptDocumentError``,
    ``NoTextError``...), ``NoTextError`` when the text has no model token at all, and
    ``ParseLimitError`` as soon as it gives more than ``chunker.max_chunks`` chunks (chunking
    stops there).
    """
    started = time.perf_counter()
    with ocr.progress_to(_ocr_reporter(on_stage)):
        parsed = parse_document(data, filename, parse_limits)
    parsed_at = time.perf_counter()
    if on_stage is not None:
        on_stage("CHUNKING")
    chunks = chunker.chunk(parsed, limit=chunker.max_chunks)  # stops once past the limit
    if not chunks:
        raise NoTextError()
    if len(chunks) > chunker.max_chunks:
        raise ParseLimitError(
            f"document gives more than {chunker.max_chunks:,} chunks (chunking stopped there, "
            f"{len(parsed.text):,} characters of text); the limit is {chunker.max_chunks:,} (CHUNK_MAX_PER_DOCUMENT)"
        )
    warnings = parsed.warnings
    if chunker.warn_unreadable and (unreadable := unreadable_warning(chunks, chunker)) is not None:
        warnings = (*warnings, unreadable)
    return Extraction(tuple(chunks), warnings, parsed_at - started, time.perf_counter() - parsed_at)


#: A chunk is unreadable by the embedding model when at least this share of its characters is ``[UNK]``.
UNREADABLE_SHARE = 0.5
#: Chunks checked per document (evenly spaced; a larger document's count is extrapolated).
UNREADABLE_SAMPLE = 256


def unreadable_warning(chunks: Sequence[Chunk], chunker: Chunker) -> str | None:
    """A warning when chunks are mostly ``[UNK]`` for the embedding model (``Chunker.unknown_share``
    ≥ ``UNREADABLE_SHARE``): vector search cannot find their text, keyword search can. Checks the
    non-ASCII chunks only (ASCII always has tokens), at most ``UNREADABLE_SAMPLE`` of them."""
    foreign = [c.content for c in chunks if not c.content.isascii()]
    if not foreign:
        return None
    step = max(1, len(foreign) // UNREADABLE_SAMPLE)
    sample = foreign[::step][:UNREADABLE_SAMPLE]
    bad = [t for t, share in zip(sample, chunker.unknown_share(sample), strict=True) if share >= UNREADABLE_SHARE]
    if not bad:
        return None
    n = round(len(bad) * len(foreign) / len(sample))
    about = "about " if len(sample) < len(foreign) else ""
    return (f"{about}{n} of {len(chunks)} chunks are mostly unknown characters for the embedding model "
            f"({_scripts(bad)}): vector search will not find their text, keyword search does "
            "(README: a multilingual model through EMBEDDING_PROVIDER=openai)")


def _scripts(texts: list[str]) -> str:
    """The most frequent scripts of the letters in ``texts`` ("Thai, Khmer"), from Unicode names."""
    count: Counter[str] = Counter()
    for text in texts:
        count.update(unicodedata.name(ch, "?").split()[0] for ch in text if ch.isalpha() and not ch.isascii())
    return ", ".join(name if len(name) <= 3 else name.title() for name, _ in count.most_common(3))



def _ocr_reporter(on_stage: StageCallback | None) -> ocr.ProgressCallback | None:
    if on_stage is None:
        return None

    def report(done: int, total: int) -> None:
        on_stage("OCR", done / total if total > 0 else 0.0)

    return report
