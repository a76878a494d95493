"""Ports: what the use cases and the worker's handler need from the outside world (pure).

``typing.Protocol`` only, so the core imports no I/O library. Adapters: :class:`shared.adapters.postgres.pg_store.
PgTaskStore` (PostgreSQL), ``shared.adapters.rabbitmq.Publisher`` (RabbitMQ), ``shared.adapters.s3.ObjectStore``
(S3), ``shared.adapters.redis_lock.DocumentLock`` (Redis), ``shared.adapters.embedding`` (the model). In-memory fakes of
each live in ``tests/fakes.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from shared.domain.fencing import EnqueueDecision, TaskSnapshot
from shared.domain.messages import IndexMessage
from shared.domain.records import ChunkCommit, Claim, Duplicate, NewContent, OutboxRow, SkipRecord
from shared.domain.states import TaskStatus

__all__ = [
    "DeadLetter",
    "DocumentLock",
    "Embedder",
    "IssueRefused",
    "ObjectReader",
    "ObjectRemover",
    "ObjectStream",
    "ObjectWriter",
    "Publisher",
    "ReleasedObjects",
    "TaskStore",
    "WorkerStore",
]


class IssueRefused(StrEnum):
    """Why :meth:`TaskStore.issue_generation` issued nothing."""

    LOST_RACE = "lost_race"  # the task moved since the snapshot: re-read and decide again
    OVER_CAP = "over_cap"  # the user's in-flight cap is reached


class DeadLetter(Protocol):
    @property
    def task_id(self) -> int | None: ...


class TaskStore(Protocol):
    """The document/task aggregate and its outbox. Every method is one commit point; a refusal
    is a return value, never a half-written change. Raises ``DatabaseUnavailableError``."""

    async def load_task_snapshot(self, task_id: int) -> TaskSnapshot | None:
        """The task with its document's generation; None if it is gone."""
        ...

    async def count_in_flight(self, user_id: int) -> int:
        """The user's tasks in WAITING / RETRYING / RUNNING."""
        ...

    async def create_document(
        self, *, user_id: int, kb_id: int, content: NewContent, in_flight_limit: int, dedup: bool = False,
    ) -> tuple[IndexMessage, OutboxRow] | Duplicate | None:
        """Document + task (generation 1) + outbox row in one transaction, if one more task fits
        under ``in_flight_limit`` (serialized per user); None (nothing written) otherwise.
        ``dedup``: a document of the KB with the same ``content.sha256`` is returned as
        :class:`Duplicate` instead (nothing written); concurrent identical uploads are decided by
        the database (one KB content slot per hash). Raises ``EnqueueContention`` if that race
        keeps being lost."""
        ...

    async def issue_generation(
        self, snap: TaskSnapshot, decision: EnqueueDecision, content: NewContent | None,
        *, in_flight_limit: int | None,
    ) -> tuple[IndexMessage, OutboxRow] | IssueRefused:
        """Apply an ISSUE decision in one transaction (new generation, task re-armed, outbox row),
        conditional on ``snap``'s status and generation; with ``in_flight_limit`` the re-armed
        task must also fit under the user's cap."""
        ...

    async def mark_published(self, outbox_id: int) -> None: ...

    async def delete_document(self, document_id: int) -> bool:
        """Delete the document, its task, chunks and vectors, queueing its objects for removal;
        False if it was already gone."""
        ...

    async def drop_pending(self, document_id: int) -> bool:
        """Drop the document's pending version (new generation: its run is fenced out; its
        object queued for removal); False if there is none."""
        ...

    async def pending_dead_letter(self, dead_letter_id: int) -> DeadLetter | None:
        """A dead letter not yet replayed (``task_id`` None: the message was not valid)."""
        ...

    async def mark_dead_letter_replayed(self, dead_letter_id: int) -> bool: ...

    async def create_knowledge_base(self, user_id: int, name: str, model: str, dim: int) -> dict[str, Any]:
        """A new knowledge base of ``user_id`` for vectors of ``model`` (``dim`` floats):
        ``{"kb_id", "name", "embedding_model", "embedding_dim", "create_time"}``."""
        ...

    async def rename_knowledge_base(self, user_id: int, kb_id: int, name: str) -> dict[str, Any] | None:
        """The renamed knowledge base (as :meth:`create_knowledge_base`); None if ``user_id`` has none of that id."""
        ...

    async def delete_knowledge_base(self, user_id: int, kb_id: int) -> int | None:
        """Delete ``user_id``'s knowledge base and everything in it in one transaction (documents
        fenced as by :meth:`delete_document`, objects queued for removal, the owner's unused
        embedding-cache entries released); the documents deleted, None if there was none."""
        ...


class Publisher(Protocol):
    """Confirmed publish (``shared.adapters.rabbitmq.Publisher``); raises ``BrokerUnavailableError``."""

    async def publish(
        self, body: bytes, *, exchange: str = ..., routing_key: str = ..., message_id: str | None = None,
        correlation_id: str | None = None, headers: Mapping[str, Any] | None = None,
    ) -> None: ...


class ObjectRemover(Protocol):
    """The part of the object store the use cases need; raises ``StorageUnavailableError``."""

    async def remove(self, key: str) -> None: ...


class ObjectStream(Protocol):
    """An object being stored from a stream (:meth:`ObjectWriter.put_stream`)."""

    async def write(self, data: bytes) -> None:
        """Queue ``data`` (waits, without blocking the loop, while the queue is full). Raises
        the upload's error (``StorageUnavailableError``) once it has failed."""
        ...

    async def close(self) -> None:
        """End of data; returns once the object is stored. Raises ``StorageUnavailableError``."""
        ...

    async def abort(self) -> None:
        """Abandon the upload: nothing of it is kept (never raises)."""
        ...


#: Called with every piece of an object as the writer stores it (in the writer's thread, off the
#: event loop): e.g. ``hashlib.sha256().update``.
Tap = Callable[[bytes], None]


class ObjectWriter(Protocol):
    """What the upload path needs from the object store (``shared.adapters.s3.ObjectStore``);
    raises ``StorageUnavailableError`` / ``ObjectMissingError``."""

    def put_stream(self, key: str, *, content_type: str, part_size: int, tap: Tap) -> ObjectStream:
        """Start storing an object of unknown length, ``part_size`` bytes per part; at most
        about one part and a bounded queue in memory."""
        ...

    async def put_bytes(self, key: str, data: bytes, *, content_type: str, tap: Tap) -> None:
        """Store a small object with one request."""
        ...

    async def get_range(self, key: str, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset`` (fewer at the end)."""
        ...

    async def remove(self, key: str) -> None: ...


class Embedder(Protocol):
    """Texts → L2-normalized float32 matrix (one row per text), as ``shared.adapters.embedding.Embedder``.
    Raises ``EmbeddingUnavailableError`` / ``EmbeddingTimeoutError`` / a ``PermanentError``.
    ``model_name`` and ``dim`` name the embedding cache's namespace."""

    model_name: str
    dim: int

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


class DocumentLock(Protocol):
    """The per-document lock (``shared.adapters.redis_lock.DocumentLock``)."""

    async def acquire(self) -> bool:
        """Try once; False if held. Raises ``LockUnavailableError``."""
        ...

    async def renew(self) -> None:
        """Reset the TTL. Raises ``LockLostError``."""
        ...

    async def release(self) -> None: ...


class ReleasedObjects(Protocol):
    """Removes, after a commit, the objects committed transactions released (``object_removal``);
    best effort: what fails stays queued for the sweep (``task_service.cleanup``). Never raises."""

    async def remove_released(self, *, at_most: int = 100) -> None:
        """Remove up to about ``at_most`` queued objects now (the rest: the next call or the sweep)."""
        ...


class ObjectReader(Protocol):
    """Reads a stored document; raises ``ObjectMissingError`` / ``StorageUnavailableError``."""

    async def get(self, key: str) -> bytes: ...


class WorkerStore(Protocol):
    """The worker's side of the task/document aggregate (``shared.adapters.postgres.pg_store.PgWorkerStore``).
    Every write is fenced on ``(generation, attempt)`` in the database; False / None means
    "fenced out / not claimable". Raises ``DatabaseUnavailableError``."""

    async def load_task_snapshot(self, task_id: int) -> TaskSnapshot | None: ...

    async def claim_task(self, task_id: int, generation: int) -> Claim | None:
        """RUNNING, attempt + 1; the claim (its new attempt), or None if not claimable."""
        ...

    async def heartbeat(self, claim: Claim) -> bool: ...

    async def report_progress(self, claim: Claim, stage: str, progress: float) -> bool:
        """The run's stage (``task_service.progress.Stage`` value) and progress (0..1); also a heartbeat."""
        ...

    async def document_source(self, document_id: int) -> tuple[str, str, str | None] | None:
        """``(object_key, filename, content_type)``; None if the document was deleted."""
        ...

    async def claim_is_current(self, claim: Claim) -> bool: ...

    async def record_embedding_run(
        self, claim: Claim, document_id: int, chunk_count: int, worker: str,
        *, cache_hits: int = 0, cache_misses: int | None = None,
    ) -> None:
        """One row per embedding step: ``cache_hits`` chunks from the cache, ``cache_misses``
        (default: the rest) sent to the model."""
        ...

    async def cache_lookup(
        self, owner: int, model: str, revision: str, dim: int, keys: Sequence[bytes]
    ) -> Mapping[bytes, npt.NDArray[np.float32]]:
        """Embedding cache: ``owner``'s (the document's user) vectors stored under ``keys`` (text
        SHA-256) in that namespace; never another user's."""
        ...

    async def cache_store(
        self, owner: int, document_id: int, model: str, revision: str, dim: int, keys: Sequence[bytes],
        vectors: npt.NDArray[Any],
    ) -> int:
        """Add ``owner``'s vectors (a concurrent writer's vector for the same key wins); rows
        added; 0 when ``document_id`` is gone (a deleted document leaves no entry behind)."""
        ...

    async def cache_touch(
        self, owner: int, model: str, revision: str, keys: Sequence[bytes], min_age_s: float
    ) -> int:
        """Mark ``owner``'s hits used, at most once per ``min_age_s`` per entry; rows touched."""
        ...

    async def record_skips(self, skips: Sequence[SkipRecord], worker: str) -> None:
        """``delivery_skip`` rows, all in one round trip."""
        ...

    async def commit_chunks(self, commit: ChunkCommit) -> bool:
        """The one fenced transaction (chunks + vectors replaced, task SUCCESS)."""
        ...

    async def finish_unsuccessfully(
        self, claim: Claim, *, document_id: int, status: TaskStatus, error_code: str, error_message: str,
        warnings: Sequence[str] = (),
    ) -> bool:
        """Task FAILED/TIMEOUT and document FAILED, fenced on the claim."""
        ...
