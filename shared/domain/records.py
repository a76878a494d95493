"""Plain records passed between the use cases, the ports and the SQL adapters (pure)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy.typing as npt

from shared.domain.messages import GENERATION_HEADER

__all__ = ["Chunk", "ChunkCommit", "Claim", "Duplicate", "NewContent", "OutboxRow", "SkipRecord"]


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
