"""Plain records passed between the use cases, the ports and the SQL adapters (pure)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy.typing as npt

from shared.domain.messages import GENERATION_HEADER

__all__ = [
    "ArchiveCommit", "ArchiveExpanded", "ArchiveMember",
    "CacheNamespace", "Chunk", "ChunkCommit", "ChunkDetails", "Claim", "DocumentSource", "Duplicate", "NewContent",
    "OpsSample", "OutboxRow", "PartClaim", "PartCommit", "PartCommitted", "PartRange", "SkipRecord", "SplitCommit",
    "TermFold",
]


@dataclass(frozen=True)
class OutboxRow:
    """An outbox row; ``released`` False means held for fair dispatch (the relay releases it
    when its user has a free slot; nobody may publish it before). ``task_id`` and ``generation``
    are the body's (the message's properties are set from them: the body, serialised once, is
    never parsed again on its way out)."""

    id: int
    message_id: uuid.UUID
    exchange: str
    routing_key: str
    body: bytes
    task_id: int
    generation: int
    released: bool = True

    @property
    def headers(self) -> dict[str, int]:
        """The message headers of this row: the generation (``x-rag-generation``)."""
        return {GENERATION_HEADER: self.generation}


@dataclass(frozen=True)
class Chunk:
    """One piece of a document, as the chunker makes it and the store writes it: ``index`` counts
    from 0 in document order; ``content`` is NUL-free text; ``token_count`` is the number of model
    tokens in ``content`` without special tokens; ``page`` (1-based, PDF) and ``section`` (heading
    path) are those of the block where the chunk starts."""

    index: int
    content: str
    token_count: int
    page: int | None = None
    section: str | None = None


@dataclass(frozen=True)
class OpsSample:
    """Gauges read in one pass: unpublished outbox rows, pending dead letters, and per active
    status ``(count, seconds since the least recently updated one was touched)``."""

    outbox_backlog: int
    dead_letters_pending: int
    active: dict[str, tuple[int, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class TermFold:
    """One fold of the keyword statistics per KB: ``moved`` deltas folded, ``dropped`` terms that
    no chunk holds any more (removed from ``kb_term``)."""

    moved: int
    dropped: int


@dataclass(frozen=True)
class ChunkDetails:
    """A search hit's chunk as the API shows it: its document, filename, place and text."""

    chunk_id: int
    document_id: int
    filename: str
    chunk_index: int
    content: str
    page: int | None
    section: str | None
    has_copies: bool = False  #: another chunk of the KB holds exactly this text (the hit lists it in ``also_in``)


@dataclass(frozen=True)
class ChunkCopy:
    """Another chunk of the KB holding a search hit's text (in another document, or elsewhere in the
    hit's own): where it is."""

    chunk_id: int
    document_id: int
    filename: str
    chunk_index: int
    page: int | None
    section: str | None


@dataclass(frozen=True)
class SkipRecord:
    """A delivery acked without work (a ``delivery_skip`` row): why, and for which message."""

    reason: str
    task_id: int | None
    document_id: int | None
    generation: int | None


@dataclass(frozen=True)
class NewContent:
    """Replacement content already stored under a new object key."""

    filename: str
    content_type: str | None
    size_bytes: int
    sha256: str
    object_key: str


@dataclass(frozen=True)
class Duplicate:
    """An upload whose bytes equal a document's of the same KB: that document, nothing created."""

    document_id: int
    task_id: int
    status: str
    task_status: str
    generation: int


@dataclass(frozen=True)
class Claim:
    """A worker's claim on a task: its fencing token ``(generation, attempt)`` (see
    :mod:`shared.domain.fencing`). Every write of a run is conditional on it."""

    task_id: int
    generation: int
    attempt: int


@dataclass(frozen=True)
class ChunkCommit:
    """What the one fenced commit writes: ``chunks`` and their ``embeddings``
    (``(len(chunks), dim)`` float32, row i for chunk i) of ``document_id`` in ``kb_id``, the
    run's ``warnings`` (sentences), under ``claim``."""

    claim: Claim
    document_id: int
    kb_id: int
    chunks: Sequence[Chunk]
    embeddings: npt.NDArray[Any]
    warnings: Sequence[str] = ()


@dataclass(frozen=True)
class ArchiveMember:
    """One member of an archive, already stored under ``object_key``: it becomes a document named
    ``path`` (its path in the archive), of ``size_bytes`` bytes with SHA-256 ``sha256`` (hex)."""

    path: str
    object_key: str
    content_type: str
    size_bytes: int
    sha256: str


@dataclass(frozen=True)
class ArchiveCommit:
    """What the archive's one fenced transaction writes (ARCHITECTURE.md "Flow 4"): a document,
    task and outbox row per member (the archive ``document_id`` their origin), and the archive's
    task SUCCESS, its document INDEXED with no chunks and ``warnings`` (skipped members)."""

    claim: Claim
    document_id: int
    kb_id: int
    user_id: int
    members: Sequence[ArchiveMember]
    warnings: Sequence[str] = ()


@dataclass(frozen=True)
class ArchiveExpanded:
    """How the expansion committed: the members' outbox ``rows`` (to publish), the ``warnings``
    written (the plan's and one per member not created: same content as a document of the KB),
    and the ``unused`` object keys (members that existed already, from an earlier generation, or
    duplicates: remove them)."""

    rows: Sequence[OutboxRow]
    warnings: Sequence[str]
    unused: Sequence[str]


@dataclass(frozen=True)
class DocumentSource:
    """The stored version of a document a run indexes (the pending one if there is one, else the
    served one): its ``object_key``, the uploaded ``filename`` and the ``content_type`` the API
    detected from the bytes (older rows: the client's header; None when unknown)."""

    object_key: str
    filename: str
    content_type: str | None


@dataclass(frozen=True)
class CacheNamespace:
    """What, besides the text, a cached vector depends on: the ``model`` (provider/name),
    its ``revision`` (the configured one, else ``dim<dim>``) and the vector length ``dim``.
    Built with :meth:`of`; every embedding-cache statement is scoped to one namespace."""

    model: str
    revision: str
    dim: int

    @classmethod
    def of(cls, model: str, dim: int, revision: str | None = None, variant: str = "") -> CacheNamespace:
        """The namespace of an embedder: ``revision`` if configured, else ``dim<dim>``; a graph
        ``variant`` (the local model's ``int8-dynamic`` graph; "" for fp32, whose vectors equal
        torch's) is appended, ``dim384-int8-dynamic``, so vectors of one graph are never served to
        another. Raises ValueError for an empty ``model`` or a ``dim`` below 1."""
        if not model:
            raise ValueError("model name must not be empty")
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        base = revision or f"dim{dim}"
        return cls(model, f"{base}-{variant}" if variant else base, dim)


# ---------------------------------------------------------------------------------------------
# A big document in parts (ARCHITECTURE.md, "Flow 3").


@dataclass(frozen=True)
class PartRange:
    """One part of a split: part ``part`` (0-based) holds chunks ``first_chunk`` ..
    ``first_chunk + chunk_count - 1`` (``chunk_count`` ≥ 1)."""

    part: int
    first_chunk: int
    chunk_count: int

    @property
    def end_chunk(self) -> int:
        """One past the part's last chunk index."""
        return self.first_chunk + self.chunk_count


@dataclass(frozen=True)
class SplitCommit:
    """What the split writes, under the document run's ``claim``: every chunk of ``document_id``
    (staged, in order, ``chunks[i].index == i``), the ``parts`` covering them (from
    :func:`shared.domain.parts.plan_parts`), and the run's extraction ``warnings`` (written to
    the document by the swap)."""

    claim: Claim
    document_id: int
    kb_id: int
    user_id: int
    chunks: Sequence[Chunk]
    parts: Sequence[PartRange]
    warnings: Sequence[str] = ()


@dataclass(frozen=True)
class PartClaim:
    """A worker's claim on one part: its fencing token is ``(generation, attempt)`` with the
    *part's* attempt (bumped by every claim of the part); the part's range comes with it."""

    task_id: int
    part: int
    generation: int
    attempt: int
    first_chunk: int
    chunk_count: int

    @property
    def end_chunk(self) -> int:
        """One past the part's last chunk index."""
        return self.first_chunk + self.chunk_count


@dataclass(frozen=True)
class PartCommit:
    """What a part's stage commit writes: the ``embeddings`` of its chunks
    (``(claim.chunk_count, dim)`` float32, row i for chunk ``claim.first_chunk + i``) of
    ``document_id`` in ``kb_id``, under ``claim``."""

    claim: PartClaim
    document_id: int
    kb_id: int
    embeddings: npt.NDArray[Any]


class PartCommitted(StrEnum):
    """The outcome of a part's stage commit."""

    FENCED = "fenced"  # stale attempt or generation, or the split is gone: nothing written
    STAGED = "staged"  # the part is DONE, other parts remain
    SWAPPED = "swapped"  # it was the last part: the document's chunks and vectors were swapped, task SUCCESS
