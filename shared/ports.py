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

from shared.domain.fencing import EnqueueDecision, PartSnapshot, TaskSnapshot
from shared.domain.messages import IndexMessage
from shared.domain.records import (
    ArchiveCommit,
    ArchiveExpanded,
    CacheNamespace,
    Chunk,
    ChunkCommit,
    ChunkCopy,
    ChunkDetails,
    Claim,
    DocumentSource,
    Duplicate,
    NewContent,
    OpsSample,
    OutboxRow,
    PartClaim,
    PartCommit,
    PartCommitted,
    SkipRecord,
    SplitCommit,
    TermFold,
)
from shared.domain.states import TaskStatus

__all__ = [
    "DeadLetter",
    "DocumentLock",
    "Embedder",
    "IssueRefused",
    "MaintenanceStore",
    "ObjectReader",
    "ObjectRemover",
    "ObjectStream",
    "ObjectWriter",
    "Publisher",
    "ReleasedObjects",
    "SearchReads",
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


class MaintenanceStore(Protocol):
    """What the worker's single-statement jobs read and write (:class:`shared.adapters.postgres.
    pg_store.PgMaintenance`): each call one statement (or one short transaction) on its own pooled
    connection. Raises ``DatabaseUnavailableError``."""

    async def cache_evict(self, max_rows: int, low_water: float) -> int | None:
        """One LRU eviction pass of the embedding cache down to ``low_water`` x ``max_rows``: rows
        deleted, None when another worker's pass holds the lock."""
        ...

    async def fold_term_stats(self, batch: int) -> TermFold | None:
        """Fold up to ``batch`` pending deltas of the keyword statistics per KB; None when
        another fold was running."""
        ...

    async def pending_term_deltas(self) -> int:
        """Deltas of the keyword statistics not yet folded."""
        ...

    async def sample(self) -> OpsSample:
        """The gauges of the worker's ``/metrics`` that PostgreSQL holds."""
        ...

    async def kbs_needing_ann(self, exact_max_chunks: int) -> list[int]:
        """KBs above ``exact_max_chunks`` chunks with vectors not yet in the HNSW index."""
        ...

    async def add_to_ann(self, kb_id: int, batch: int) -> int:
        """Add up to ``batch`` of the KB's vectors to the HNSW index (one transaction): how many."""
        ...


class SearchReads(Protocol):
    """The search's reads (:class:`shared.adapters.postgres.reads.PgSearch`; the statements in
    ``shared.adapters.postgres.repo.search``). Rankings are ``[(chunk id, score)]``, best first.
    ``parallel``: two calls may run at once (each on its own connection). Raises
    ``DatabaseUnavailableError``."""

    @property
    def parallel(self) -> bool: ...

    async def vector(self, kb_id: int, embedding: npt.NDArray[np.float32], limit: int, *, exact_max_chunks: int,
                     ef_search: int) -> list[tuple[int, float]]:
        """Top ``limit`` chunks of the KB by cosine similarity to ``embedding`` (``(dim,) float32``):
        exact up to ``exact_max_chunks`` vectors in the KB, HNSW at ``ef_search`` above."""
        ...

    async def keyword(self, kb_id: int, text: str, limit: int, *, budget: int,
                      max_candidates: int) -> list[tuple[int, float]]:
        """Top ``limit`` chunks of the KB by full-text match of ``text``, the KB's own term
        statistics; about ``budget`` candidates, at most ``max_candidates``."""
        ...

    async def details(self, ids: Sequence[int]) -> dict[int, ChunkDetails]:
        """The chunks still there among ``ids``, each saying whether another chunk of its KB holds exactly its
        text (``has_copies``, as :meth:`copies` would find it: only those are looked up there)."""
        ...

    async def copies(self, ids: Sequence[int], limit: int) -> dict[int, tuple[list[ChunkCopy], int]]:
        """``{chunk id: (the other chunks of its KB holding exactly its text, by document then chunk,
        at most ``limit``; how many in all)}`` for the chunks among ``ids`` that have copies."""
        ...


class ReleasedObjects(Protocol):
    """Removes, after a commit, the objects committed transactions released (``object_removal``);
    best effort: what fails stays queued for the sweep (``task_service.cleanup``). Never raises."""

    async def remove_released(self, *, at_most: int = 100) -> None:
        """Remove up to about ``at_most`` queued objects now (the rest: the next call or the sweep)."""
        ...


class ObjectReader(Protocol):
    """What the worker needs of the object store: read a stored document; store and remove an
    archive's members (Flow 4). Raises ``ObjectMissingError`` / ``StorageUnavailableError``."""

    async def get(self, key: str) -> bytes: ...

    async def put_bytes(self, key: str, data: bytes, *, content_type: str, tap: Tap) -> None:
        """Store a small object with one request (overwrites the key)."""
        ...

    async def remove(self, key: str) -> None: ...


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
        """The run's stage (``task_service.indexing.progress.Stage`` value) and progress (0..1); also a heartbeat."""
        ...

    async def document_source(self, document_id: int) -> DocumentSource | None:
        """The version to index (the pending one if any); None if the document was deleted."""
        ...

    async def claim_is_current(self, claim: Claim) -> bool: ...

    async def record_embedding_run(
        self, claim: Claim | PartClaim, document_id: int, chunk_count: int, worker: str,
        *, cache_hits: int = 0, cache_misses: int | None = None,
    ) -> None:
        """One row per embedding step (of a run, or of a part: the row carries its ``part`` and
        the part's attempt): ``cache_hits`` chunks from the cache, ``cache_misses`` (default: the
        rest) sent to the model."""
        ...

    async def cache_lookup(
        self, owner: int, ns: CacheNamespace, keys: Sequence[bytes]
    ) -> Mapping[bytes, npt.NDArray[np.float32]]:
        """Embedding cache: ``owner``'s (the document's user) ``(ns.dim,)`` vectors stored under
        ``keys`` (text SHA-256) in namespace ``ns``; never another user's."""
        ...

    async def cache_store(
        self, owner: int, document_id: int, ns: CacheNamespace, keys: Sequence[bytes], vectors: npt.NDArray[Any],
    ) -> int:
        """Add ``owner``'s vectors (a concurrent writer's vector for the same key wins); rows
        added; 0 when ``document_id`` is gone (a deleted document leaves no entry behind)."""
        ...

    async def cache_touch(self, owner: int, ns: CacheNamespace, keys: Sequence[bytes], min_age_s: float) -> int:
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

    # ---------------------------------------------------------- a big document in parts (Flow 3)

    async def expand_archive(self, commit: ArchiveCommit) -> ArchiveExpanded | None:
        """The archive's one fenced transaction (``repo.archives.expand_archive``): its members'
        documents, tasks and outbox rows, the archive INDEXED; None when fenced out (nothing)."""
        ...

    async def split_task(self, commit: SplitCommit) -> list[OutboxRow] | None:
        """The split, ONE transaction fenced on the document run's claim (document row locked,
        its generation checked; task RUNNING at ``(generation, attempt)``): task stage EMBEDDING,
        progress 0, its dispatch slot given up (its parts take slots); every chunk staged; one
        WAITING part row and one outbox row (message ``IndexMessage.for_part(p)``) per part.
        Returns the part outbox rows released to the broker now, to publish after the commit
        (then :meth:`mark_published`); held rows are the relay's (fair dispatch). None: fenced
        out, nothing written. Raises ValueError if ``commit.parts`` do not cover ``commit.chunks``
        contiguously from 0."""
        ...

    async def mark_published(self, outbox_id: int) -> None:
        """The outbox row was confirmed by the broker."""
        ...

    async def load_part_snapshot(self, task_id: int, part: int) -> PartSnapshot | None:
        """The task (as :meth:`load_task_snapshot`) with its part ``part``, one query; None if
        the task is gone; ``state`` None if it has no such part."""
        ...

    async def claim_part(self, task_id: int, part: int, generation: int) -> PartClaim | None:
        """Part RUNNING, part attempt + 1, if it is WAITING or RUNNING at ``generation`` and its
        task RUNNING at ``generation`` with its document at it too; the claim (the part's new
        attempt and range), or None (nothing written)."""
        ...

    async def part_claim_is_current(self, claim: PartClaim) -> bool:
        """The pre-embedding re-check: the part is still RUNNING under ``claim`` (generation and
        part attempt), its task RUNNING and its document at the generation."""
        ...

    async def read_part_chunks(self, claim: PartClaim) -> list[Chunk] | None:
        """The part's staged chunks, ``claim.first_chunk .. claim.end_chunk - 1`` in order
        (``Chunk.index`` = the document's chunk index); None if the split is gone (fenced out)."""
        ...

    async def part_heartbeat(self, claim: PartClaim) -> bool:
        """Bump the part's and its task's ``update_time`` under ``claim``; False: fenced out."""
        ...

    async def report_part_progress(self, claim: PartClaim, embedded: int) -> bool:
        """The part has ``embedded`` (0..chunk_count) of its chunks embedded: the part's counter,
        the task's progress (embedded over all parts / the split's chunks) and ``update_time``;
        also a heartbeat. False: fenced out."""
        ...

    async def commit_part(self, commit: PartCommit) -> PartCommitted:
        """The part's stage commit, ONE transaction (document row locked first, so every part
        commit of a document and its swap are serialised): part DONE under the claim, its
        vectors staged, the task's progress. When no part is left the swap runs in the same
        transaction: the document's chunks and vectors replaced server-side from the staged rows
        (counts checked), the document promoted as by :meth:`commit_chunks` (with the split's
        warnings), task SUCCESS, the split deleted. FENCED: nothing written. Raises ValueError
        if ``commit.embeddings`` does not have ``claim.chunk_count`` rows."""
        ...

    async def finish_part_unsuccessfully(
        self, claim: PartClaim, *, document_id: int, status: TaskStatus, error_code: str, error_message: str,
    ) -> bool:
        """A part failed for good (or stalled, or ran out of budget): the task FAILED/TIMEOUT
        with that error, fenced on the part's claim; the document FAILED unless it has a served
        version (with the split's warnings); the split deleted (every part and staged row).
        False: fenced out, nothing written."""
        ...
