"""In-memory fakes of the ports in :mod:`shared.ports` (cf. cosmicpython ``FakeUnitOfWork``,
dramatiq ``brokers/stub.py``). Pure Python: the unit tier uses them with the network cut.

The fakes keep the database's rules where the use cases depend on them: conditional updates on
``(status, generation)``, the per-user in-flight cap, the claim's ``attempt``. Races are
simulated with hooks (``before_issue``) that move the task between a read and a write.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

from shared.domain.errors import BrokerUnavailableError, LockUnavailableError, StorageUnavailableError
from shared.domain.fencing import EnqueueDecision, PartSnapshot, PartState, StaleThresholds, TaskSnapshot
from shared.domain.messages import EXCHANGE, ROUTING_KEY, IndexMessage
from shared.domain.parts import PART_CLAIMABLE, PartStatus
from shared.domain.records import (
    ArchiveCommit,
    ArchiveExpanded,
    CacheNamespace,
    Chunk,
    ChunkCommit,
    Claim,
    DocumentSource,
    Duplicate,
    NewContent,
    OutboxRow,
    PartClaim,
    PartCommit,
    PartCommitted,
    SkipRecord,
    SplitCommit,
)
from shared.domain.states import ACTIVE, DocumentStatus, TaskStatus
from shared.ports import IssueRefused
from task_service.pipeline.extract import Extraction

#: The settings' defaults (STALE_WAITING_S=600, STALE_RUNNING_S=2700) for tests that decide enqueues.
STALE = StaleThresholds(queued=timedelta(minutes=10), running=timedelta(minutes=45))


@dataclass
class FakeDocument:
    id: int
    kb_id: int
    user_id: int
    content: NewContent
    generation: int = 1
    status: DocumentStatus = DocumentStatus.INDEXING
    chunks: list[Chunk] = field(default_factory=list)
    embeddings: npt.NDArray[Any] | None = None  # row i: chunk i's vector
    pending: NewContent | None = None  # new content not yet indexed (the served one stays)
    warnings: list[str] = field(default_factory=list)
    origin_document_id: int | None = None  # the archive it came from, and its path there
    origin_member: str | None = None


@dataclass
class FakeTask:
    id: int
    document_id: int
    kb_id: int
    user_id: int
    status: TaskStatus = TaskStatus.WAITING
    generation: int = 1
    attempt: int = 0
    retry_count: int = 0
    max_retry_count: int = 3
    error_code: str | None = None
    error_message: str | None = None
    update_time: datetime = field(default_factory=lambda: datetime.now(UTC))
    progress: list[tuple[str, float]] = field(default_factory=list)  # (stage, progress) reports written


@dataclass
class FakePart:
    """An ``index_part`` row."""

    part: int
    first_chunk: int
    chunk_count: int
    generation: int
    status: PartStatus = PartStatus.WAITING
    attempt: int = 0
    embedded: int = 0


@dataclass
class FakeSplit:
    """An ``index_split`` row with its parts and staged rows (``vectors``: chunk index → vector)."""

    generation: int
    attempt: int
    document_id: int
    kb_id: int
    chunks: list[Chunk]
    parts: dict[int, FakePart]
    warnings: list[str]
    vectors: dict[int, npt.NDArray[Any]] = field(default_factory=dict)


@dataclass
class FakeDeadLetter:
    task_id: int | None
    replayed: bool = False


class FakeStore:
    """Both store ports (``TaskStore`` for the use cases, ``WorkerStore`` for the handler) over
    dicts. ``fail_next``: names of methods whose next call raises ``fail_with``."""

    def __init__(self) -> None:
        self.documents: dict[int, FakeDocument] = {}
        self.tasks: dict[int, FakeTask] = {}
        self.outbox: list[tuple[OutboxRow, bool]] = []
        self.dead_letters: dict[int, FakeDeadLetter] = {}
        self.knowledge_bases: list[dict[str, Any]] = []
        self.skips: list[str] = []
        self.skip_writes = 0  # record_skips calls (one round trip each in the real store)
        self.released: list[str] = []  # object keys queued for removal after commit
        self.embedding_runs = 0
        self.cache_misses = 0  # chunks sent to the model
        self.cache: dict[tuple[int, str, str, bytes], npt.NDArray[Any]] = {}  # (owner, model, revision, key)
        self.before_issue: Callable[[TaskSnapshot], Awaitable[None]] | None = None
        self.fail_next: dict[str, Exception] = {}
        self.splits: dict[int, FakeSplit] = {}  # task_id -> its split (deleted by the swap or a re-arm)
        self.outbox_deleted: set[int] = set()  # outbox ids deleted (unpublished part rows of a fenced split)
        self.part_runs: list[tuple[int, int, int]] = []  # (task_id, part, part attempt) of part embedding runs
        self.swaps = 0
        self._ids = 0

    # -------------------------------------------------------------- helpers for tests

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def _maybe_fail(self, name: str) -> None:
        exc = self.fail_next.pop(name, None)
        if exc is not None:
            raise exc

    def add_document(self, *, user_id: int = 1, kb_id: int = 1, status: TaskStatus = TaskStatus.WAITING,
                     generation: int = 1, attempt: int = 0, retry_count: int = 0) -> IndexMessage:
        """A document with its task (no outbox row); returns the message that would index it."""
        doc = FakeDocument(self._next_id(), kb_id, user_id, NewContent("a.txt", "text/plain", 3, "00", "k1"),
                           generation=generation)
        task = FakeTask(self._next_id(), doc.id, kb_id, user_id, status=status, generation=generation,
                        attempt=attempt, retry_count=retry_count)
        doc.status = {TaskStatus.SUCCESS: DocumentStatus.INDEXED, TaskStatus.FAILED: DocumentStatus.FAILED,
                      TaskStatus.TIMEOUT: DocumentStatus.FAILED}.get(status, DocumentStatus.INDEXING)
        self.documents[doc.id] = doc
        self.tasks[task.id] = task
        return IndexMessage(task_id=task.id, document_id=doc.id, kb_id=kb_id, user_id=user_id,
                            generation=generation)

    def published(self) -> list[bool]:
        return [done for _, done in self.outbox]

    def unpublished_part_rows(self, task_id: int | None = None) -> list[OutboxRow]:
        """Part outbox rows neither published nor deleted (of ``task_id``, or of any task)."""
        rows = []
        for row, done in self.outbox:
            msg = IndexMessage.from_json(row.body)
            if not done and row.id not in self.outbox_deleted and msg.part is not None and (
                    task_id is None or msg.task_id == task_id):
                rows.append(row)
        return rows

    def _drop_split(self, task_id: int) -> None:
        """What the generation-issuing transactions and deletes do to a task's split: the split
        (parts, staged rows) and its unpublished part outbox rows are deleted."""
        self.splits.pop(task_id, None)
        self.outbox_deleted.update(r.id for r in self.unpublished_part_rows(task_id))

    # -------------------------------------------------------------- TaskStore

    def _snapshot(self, task: FakeTask) -> TaskSnapshot:
        doc = self.documents[task.document_id]
        return TaskSnapshot(
            task_id=task.id, document_id=task.document_id, kb_id=task.kb_id, user_id=task.user_id,
            status=task.status, generation=task.generation, attempt=task.attempt,
            document_generation=doc.generation, document_status=doc.status, retry_count=task.retry_count,
            max_retry_count=task.max_retry_count, update_time=task.update_time,
            split=task.id in self.splits and self.splits[task.id].generation == task.generation,
        )

    async def load_task_snapshot(self, task_id: int) -> TaskSnapshot | None:
        self._maybe_fail("load_task_snapshot")
        task = self.tasks.get(task_id)
        return None if task is None else self._snapshot(task)

    async def count_in_flight(self, user_id: int) -> int:
        return sum(1 for t in self.tasks.values() if t.user_id == user_id and t.status in ACTIVE)

    def _outbox(self, msg: IndexMessage) -> OutboxRow:
        row = OutboxRow(len(self.outbox) + 1, uuid.uuid4(), EXCHANGE, ROUTING_KEY, msg.to_json(), msg.task_id,
                        msg.generation)
        self.outbox.append((row, False))
        return row

    async def create_document(
        self, *, user_id: int, kb_id: int, content: NewContent, in_flight_limit: int, dedup: bool = False,
    ) -> tuple[IndexMessage, OutboxRow] | Duplicate | None:
        self._maybe_fail("create_document")
        same = next((d for d in self.documents.values() if d.kb_id == kb_id and d.content.sha256 == content.sha256),
                    None) if dedup else None
        if same is not None:
            task = next(t for t in self.tasks.values() if t.document_id == same.id)
            return Duplicate(same.id, task.id, same.status.value, task.status.value, same.generation)
        if await self.count_in_flight(user_id) >= in_flight_limit:
            return None
        msg = self.add_document(user_id=user_id, kb_id=kb_id)
        self.documents[msg.document_id].content = content
        return msg, self._outbox(msg)

    async def issue_generation(
        self, snap: TaskSnapshot, decision: EnqueueDecision, content: NewContent | None,
        *, in_flight_limit: int | None,
    ) -> tuple[IndexMessage, OutboxRow] | IssueRefused:
        if self.before_issue is not None:
            await self.before_issue(snap)
        self._maybe_fail("issue_generation")
        if in_flight_limit is not None and await self.count_in_flight(snap.user_id) >= in_flight_limit:
            return IssueRefused.OVER_CAP
        task = self.tasks.get(snap.task_id)
        doc = self.documents.get(snap.document_id)
        if task is None or doc is None or (task.status, task.generation) != (snap.status, snap.generation):
            return IssueRefused.LOST_RACE
        assert decision.new_status is not None
        self._drop_split(task.id)
        doc.generation += 1
        doc.status = DocumentStatus.INDEXING
        if content is not None:
            doc.content = content
        task.generation = doc.generation
        task.status = decision.new_status
        if decision.reset_retry_count:
            task.retry_count = 0
        elif decision.bump_retry_count:
            task.retry_count += 1
        task.error_code = task.error_message = None
        task.update_time = datetime.now(UTC)
        msg = IndexMessage(task_id=task.id, document_id=doc.id, kb_id=task.kb_id, user_id=task.user_id,
                           generation=task.generation)
        return msg, self._outbox(msg)

    async def mark_published(self, outbox_id: int) -> None:
        row, _ = self.outbox[outbox_id - 1]
        self.outbox[outbox_id - 1] = (row, True)

    async def delete_document(self, document_id: int) -> bool:
        doc = self.documents.pop(document_id, None)
        if doc is None:
            return False
        for tid in [t.id for t in self.tasks.values() if t.document_id == document_id]:
            del self.tasks[tid]
            self._drop_split(tid)
        self.released.append(doc.content.object_key)
        return True

    async def drop_pending(self, document_id: int) -> bool:
        doc = self.documents.get(document_id)
        if doc is None or doc.pending is None:
            return False
        self.released.append(doc.pending.object_key)
        doc.pending = None
        doc.generation += 1
        for tid in [t.id for t in self.tasks.values() if t.document_id == document_id]:
            self._drop_split(tid)
        return True

    async def pending_dead_letter(self, dead_letter_id: int) -> FakeDeadLetter | None:
        dl = self.dead_letters.get(dead_letter_id)
        return None if dl is None or dl.replayed else dl

    async def mark_dead_letter_replayed(self, dead_letter_id: int) -> bool:
        dl = self.dead_letters.get(dead_letter_id)
        if dl is None or dl.replayed:
            return False
        dl.replayed = True
        return True

    async def create_knowledge_base(self, user_id: int, name: str, model: str, dim: int) -> dict[str, Any]:
        kb = {"kb_id": self._next_id(), "name": name, "embedding_model": model, "embedding_dim": dim,
              "create_time": datetime.now(UTC), "user_id": user_id}
        self.knowledge_bases.append(kb)
        return {k: v for k, v in kb.items() if k != "user_id"}

    def _kb(self, user_id: int, kb_id: int) -> dict[str, Any] | None:
        return next((k for k in self.knowledge_bases if k["kb_id"] == kb_id and k["user_id"] == user_id), None)

    async def rename_knowledge_base(self, user_id: int, kb_id: int, name: str) -> dict[str, Any] | None:
        kb = self._kb(user_id, kb_id)
        if kb is None:
            return None
        kb["name"] = name
        return {k: v for k, v in kb.items() if k != "user_id"}

    async def delete_knowledge_base(self, user_id: int, kb_id: int) -> int | None:
        kb = self._kb(user_id, kb_id)
        if kb is None:
            return None
        self.knowledge_bases.remove(kb)
        docs = [d.id for d in self.documents.values() if d.kb_id == kb_id]
        for doc_id in docs:
            await self.delete_document(doc_id)
        return len(docs)

    # -------------------------------------------------------------- WorkerStore

    def _fenced(self, claim: Claim) -> FakeTask | None:
        task = self.tasks.get(claim.task_id)
        if task is None or (task.status, task.generation, task.attempt) != (
                TaskStatus.RUNNING, claim.generation, claim.attempt):
            return None
        if self.documents[task.document_id].generation != claim.generation:
            return None
        return task

    async def claim_task(self, task_id: int, generation: int) -> Claim | None:
        self._maybe_fail("claim_task")
        task = self.tasks.get(task_id)
        if task is None or task.generation != generation or task.status not in ACTIVE:
            return None
        if self._snapshot(task).split:  # its parts run: no second document run
            return None
        task.status = TaskStatus.RUNNING
        task.attempt += 1
        return Claim(task_id, generation, task.attempt)

    async def heartbeat(self, claim: Claim) -> bool:
        return self._fenced(claim) is not None

    async def report_progress(self, claim: Claim, stage: str, progress: float) -> bool:
        task = self._fenced(claim)
        if task is None:
            return False
        task.progress.append((stage, progress))
        return True

    async def document_source(self, document_id: int) -> DocumentSource | None:
        self._maybe_fail("document_source")
        doc = self.documents.get(document_id)
        return None if doc is None else DocumentSource(doc.content.object_key, doc.content.filename,
                                                       doc.content.content_type)

    async def claim_is_current(self, claim: Claim) -> bool:
        return self._fenced(claim) is not None

    async def record_embedding_run(
        self, claim: Claim | PartClaim, document_id: int, chunk_count: int, worker: str,
        *, cache_hits: int = 0, cache_misses: int | None = None,
    ) -> None:
        self.embedding_runs += 1
        if isinstance(claim, PartClaim):
            self.part_runs.append((claim.task_id, claim.part, claim.attempt))
        self.cache_misses += chunk_count - cache_hits if cache_misses is None else cache_misses

    async def cache_lookup(
        self, owner: int, ns: CacheNamespace, keys: Sequence[bytes]
    ) -> dict[bytes, npt.NDArray[Any]]:
        at = (owner, ns.model, ns.revision)
        return {k: self.cache[(*at, k)] for k in keys if (*at, k) in self.cache}

    async def cache_store(
        self, owner: int, document_id: int, ns: CacheNamespace, keys: Sequence[bytes], vectors: npt.NDArray[Any],
    ) -> int:
        if document_id not in self.documents:
            return 0
        at = (owner, ns.model, ns.revision)
        new = [(k, v) for k, v in zip(keys, vectors, strict=True) if (*at, k) not in self.cache]
        self.cache.update({(*at, k): np.asarray(v, dtype=np.float32) for k, v in new})
        return len(new)

    async def cache_touch(self, owner: int, ns: CacheNamespace, keys: Sequence[bytes], min_age_s: float) -> int:
        return 0

    async def record_skips(self, skips: Sequence[SkipRecord], worker: str) -> None:
        self.skip_writes += 1
        self.skips.extend(str(s.reason) for s in skips)

    async def commit_chunks(self, commit: ChunkCommit) -> bool:
        self._maybe_fail("commit_chunks")
        task = self._fenced(commit.claim)
        if task is None:
            return False
        assert len(commit.embeddings) == len(commit.chunks)
        task.status = TaskStatus.SUCCESS
        doc = self.documents[commit.document_id]
        doc.status = DocumentStatus.INDEXED
        doc.chunks = list(commit.chunks)
        doc.embeddings = commit.embeddings
        return True

    async def finish_unsuccessfully(
        self, claim: Claim, *, document_id: int, status: TaskStatus, error_code: str, error_message: str,
        warnings: Sequence[str] = (),
    ) -> bool:
        task = self._fenced(claim)
        if task is None:
            return False
        task.status, task.error_code, task.error_message = status, error_code, error_message
        self.documents[document_id].status = DocumentStatus.FAILED
        return True

    async def expand_archive(self, commit: ArchiveCommit) -> ArchiveExpanded | None:
        """As ``repo.archives.expand_archive``: fenced on the claim; a member path the archive
        already has, or bytes a document of the KB has, is not created."""
        self._maybe_fail("expand_archive")
        task = self._fenced(commit.claim)
        if task is None:
            return None
        existing = {d.origin_member for d in self.documents.values() if d.origin_document_id == commit.document_id}
        rows, warnings, unused = [], list(commit.warnings), []
        for m in commit.members:
            same = next((d.id for d in self.documents.values()
                         if d.kb_id == commit.kb_id and d.content.sha256 == m.sha256), None)
            if m.path in existing or same is not None:
                unused.append(m.object_key)
                if same is not None and m.path not in existing:
                    warnings.append(f"{m.path}: not created (same content as document {same})")
                continue
            msg = self.add_document(user_id=commit.user_id, kb_id=commit.kb_id)
            doc = self.documents[msg.document_id]
            doc.content = NewContent(m.path, m.content_type, m.size_bytes, m.sha256, m.object_key)
            doc.origin_document_id, doc.origin_member = commit.document_id, m.path
            rows.append(self._outbox(msg))
        task.status = TaskStatus.SUCCESS
        archive = self.documents[commit.document_id]
        archive.status, archive.chunks, archive.warnings = DocumentStatus.INDEXED, [], warnings
        return ArchiveExpanded(rows, warnings, unused)

    # -------------------------------------------------------------- WorkerStore: parts (Flow 3)

    async def split_task(self, commit: SplitCommit) -> list[OutboxRow] | None:
        self._maybe_fail("split_task")
        _check_split(commit)
        task = self._fenced(commit.claim)
        if task is None or self._snapshot(task).split:
            return None
        gen = commit.claim.generation
        self.splits[task.id] = FakeSplit(
            gen, commit.claim.attempt, commit.document_id, commit.kb_id, list(commit.chunks),
            {p.part: FakePart(p.part, p.first_chunk, p.chunk_count, gen) for p in commit.parts},
            list(commit.warnings),
        )
        task.progress.append(("EMBEDDING", 0.0))
        task.update_time = datetime.now(UTC)
        msg = IndexMessage(task_id=task.id, document_id=commit.document_id, kb_id=commit.kb_id,
                           user_id=commit.user_id, generation=gen)
        return [self._outbox(msg.for_part(p.part)) for p in commit.parts]

    async def load_part_snapshot(self, task_id: int, part: int) -> PartSnapshot | None:
        self._maybe_fail("load_part_snapshot")
        task = self.tasks.get(task_id)
        if task is None:
            return None
        split = self.splits.get(task_id)
        row = None if split is None else split.parts.get(part)
        state = None if row is None else PartState(row.part, row.generation, row.status, row.attempt,
                                                   row.first_chunk, row.chunk_count)
        return PartSnapshot(self._snapshot(task), state)

    def _split_of(self, task_id: int, generation: int) -> FakeSplit | None:
        """The task's split at ``generation`` if the task RUNNING and its document are at it."""
        task, split = self.tasks.get(task_id), self.splits.get(task_id)
        if task is None or split is None or split.generation != generation:
            return None
        if task.status is not TaskStatus.RUNNING or task.generation != generation:
            return None
        return split if self.documents[task.document_id].generation == generation else None

    def _fenced_part(self, claim: PartClaim) -> tuple[FakeSplit, FakePart] | None:
        split = self._split_of(claim.task_id, claim.generation)
        part = None if split is None else split.parts.get(claim.part)
        if split is None or part is None or (part.status, part.attempt) != (PartStatus.RUNNING, claim.attempt):
            return None
        return split, part

    async def claim_part(self, task_id: int, part: int, generation: int) -> PartClaim | None:
        self._maybe_fail("claim_part")
        split = self._split_of(task_id, generation)
        row = None if split is None else split.parts.get(part)
        if row is None or row.generation != generation or row.status not in PART_CLAIMABLE:
            return None
        row.status, row.attempt, row.embedded = PartStatus.RUNNING, row.attempt + 1, 0  # as the real claim
        return PartClaim(task_id, part, generation, row.attempt, row.first_chunk, row.chunk_count)

    async def part_claim_is_current(self, claim: PartClaim) -> bool:
        return self._fenced_part(claim) is not None

    async def read_part_chunks(self, claim: PartClaim) -> list[Chunk] | None:
        split = self._split_of(claim.task_id, claim.generation)
        return None if split is None else split.chunks[claim.first_chunk:claim.end_chunk]

    async def part_heartbeat(self, claim: PartClaim) -> bool:
        fenced = self._fenced_part(claim)
        if fenced is not None:
            self.tasks[claim.task_id].update_time = datetime.now(UTC)
        return fenced is not None

    def _task_progress(self, task_id: int, split: FakeSplit) -> None:
        done = sum(p.chunk_count if p.status is PartStatus.DONE else p.embedded for p in split.parts.values())
        task = self.tasks[task_id]
        task.progress.append(("EMBEDDING", done / max(1, len(split.chunks))))
        task.update_time = datetime.now(UTC)

    async def report_part_progress(self, claim: PartClaim, embedded: int) -> bool:
        fenced = self._fenced_part(claim)
        if fenced is None:
            return False
        split, part = fenced
        part.embedded = max(0, min(embedded, part.chunk_count))
        self._task_progress(claim.task_id, split)
        return True

    async def commit_part(self, commit: PartCommit) -> PartCommitted:
        self._maybe_fail("commit_part")
        claim = commit.claim
        if len(commit.embeddings) != claim.chunk_count:
            raise ValueError(f"{claim.chunk_count} chunks but {len(commit.embeddings)} embeddings")
        fenced = self._fenced_part(claim)
        if fenced is None:
            return PartCommitted.FENCED
        split, part = fenced
        for i, vector in enumerate(commit.embeddings):
            split.vectors[claim.first_chunk + i] = np.asarray(vector, dtype=np.float32)
        part.status, part.embedded = PartStatus.DONE, part.chunk_count
        self._task_progress(claim.task_id, split)
        if any(p.status is not PartStatus.DONE for p in split.parts.values()):
            return PartCommitted.STAGED
        self._swap(claim.task_id, split)
        return PartCommitted.SWAPPED

    def _swap(self, task_id: int, split: FakeSplit) -> None:
        assert sorted(split.vectors) == list(range(len(split.chunks)))
        task, doc = self.tasks[task_id], self.documents[split.document_id]
        task.status = TaskStatus.SUCCESS
        task.progress.append(("WRITING", 1.0))
        doc.status = DocumentStatus.INDEXED
        doc.chunks = list(split.chunks)
        doc.embeddings = np.stack([split.vectors[i] for i in range(len(split.chunks))])
        del self.splits[task_id]
        self.swaps += 1

    async def finish_part_unsuccessfully(
        self, claim: PartClaim, *, document_id: int, status: TaskStatus, error_code: str, error_message: str,
    ) -> bool:
        if self._fenced_part(claim) is None:
            return False
        task = self.tasks[claim.task_id]
        task.status, task.error_code, task.error_message = status, error_code, error_message
        self.documents[document_id].status = DocumentStatus.FAILED
        self._drop_split(claim.task_id)
        return True


def _check_split(commit: SplitCommit) -> None:
    """What the real store refuses too: parts that do not cover the chunks contiguously from 0."""
    end = 0
    for i, p in enumerate(commit.parts):
        if p.part != i or p.first_chunk != end or p.chunk_count < 1:
            raise ValueError(f"part {i} does not continue the split at chunk {end}")
        end = p.end_chunk
    if end != len(commit.chunks) or [c.index for c in commit.chunks] != list(range(end)):
        raise ValueError("the parts do not cover the chunks 0..n-1")


class FakePublisher:
    """Records confirmed publishes; ``fail`` makes every publish raise BrokerUnavailableError."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.sent: list[tuple[bytes, str, str, dict[str, Any]]] = []
        self.correlation_ids: list[str | None] = []  #: of each message sent, in order

    async def publish(
        self, body: bytes, *, exchange: str = EXCHANGE, routing_key: str = ROUTING_KEY,
        message_id: str | None = None, correlation_id: str | None = None, headers: Mapping[str, Any] | None = None,
    ) -> None:
        if self.fail:
            raise BrokerUnavailableError("publish not confirmed (fake)")
        self.sent.append((body, exchange, routing_key, dict(headers or {})))
        self.correlation_ids.append(correlation_id)


class FakeReleasedObjects:
    """Moves the keys a FakeStore queued (``released``) into a FakeObjectStore's removals."""

    def __init__(self, store: FakeStore, objects: FakeObjectStore) -> None:
        self.store = store
        self.objects = objects
        self.calls = 0

    async def remove_released(self, *, at_most: int = 100) -> None:
        self.calls += 1
        while self.store.released:
            try:
                await self.objects.remove(self.store.released[0])
            except StorageUnavailableError:
                return  # left for the sweep
            self.store.released.pop(0)


class FakeObjectStore:
    """``get`` / ``remove`` over a dict; ``down`` makes every call raise StorageUnavailableError."""

    def __init__(self, objects: dict[str, bytes] | None = None, *, down: bool = False) -> None:
        self.objects = dict(objects or {})
        self.down = down
        self.removed: list[str] = []

    async def get(self, key: str) -> bytes:
        if self.down:
            raise StorageUnavailableError("fake storage down")
        return self.objects[key]

    async def put_bytes(self, key: str, data: bytes, *, content_type: str, tap: Callable[[bytes], None]) -> None:
        if self.down:
            raise StorageUnavailableError("fake storage down")
        tap(data)
        self.objects[key] = data

    async def remove(self, key: str) -> None:
        if self.down:
            raise StorageUnavailableError("fake storage down")
        self.objects.pop(key, None)
        self.removed.append(key)


class FakeObjectStream:
    """One ``put_stream`` of a :class:`FakeObjectWriter`: collects what is written; the object
    appears on ``close``. Past ``fail_after`` bytes the store "goes away"."""

    def __init__(self, writer: FakeObjectWriter, key: str, content_type: str, tap: Callable[[bytes], None]) -> None:
        self._writer, self._key, self._content_type, self._tap = writer, key, content_type, tap
        self._data = bytearray()
        self.failed = False

    async def write(self, data: bytes) -> None:
        if self.failed:
            raise StorageUnavailableError("put: storage went away (fake)")
        self._tap(data)
        self._data += data
        limit = self._writer.fail_after
        if limit is not None and len(self._data) > limit:
            self.failed = True
            raise StorageUnavailableError("put: storage went away (fake)")

    async def close(self) -> None:
        self._writer.objects[self._key] = bytes(self._data)
        self._writer.content_types[self._key] = self._content_type

    async def abort(self) -> None:
        self._writer.aborted += 1
        self._data.clear()


class FakeObjectWriter:
    """The ``ObjectWriter`` port over a dict (the upload path): ``puts`` single PUTs,
    ``streams`` streamed uploads, ``aborted`` streams abandoned, ``ranges`` ranged reads."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.objects: dict[str, bytes] = {}
        self.content_types: dict[str, str] = {}
        self.fail_after = fail_after
        self.puts = 0
        self.streams = 0
        self.aborted = 0
        self.ranges: list[tuple[int, int]] = []

    def put_stream(self, key: str, *, content_type: str, part_size: int,
                   tap: Callable[[bytes], None]) -> FakeObjectStream:
        self.streams += 1
        return FakeObjectStream(self, key, content_type, tap)

    async def put_bytes(self, key: str, data: bytes, *, content_type: str, tap: Callable[[bytes], None]) -> None:
        if self.fail_after is not None and len(data) > self.fail_after:
            raise StorageUnavailableError("put: storage went away (fake)")
        tap(data)
        self.puts += 1
        self.objects[key] = data
        self.content_types[key] = content_type

    async def get_range(self, key: str, offset: int, length: int) -> bytes:
        self.ranges.append((offset, length))
        return self.objects[key][offset:offset + length]

    async def remove(self, key: str) -> None:
        self.objects.pop(key, None)


class FakeLocks:
    """A lock factory ((document id, part) → lock) over one set of holders, like one Redis:
    ``held`` has a document's id for its own lock, ``(id, part)`` for a part's."""

    def __init__(self, *, down: bool = False) -> None:
        self.held: set[int | tuple[int, int]] = set()
        self.down = down
        self.lost: set[int | tuple[int, int]] = set()  # renewals of these locks raise LockLostError
        self.taken: list[int | tuple[int, int]] = []  # every acquire that succeeded, in order
        self.renewals = 0  # renew() calls, of every lock

    def __call__(self, document_id: int, part: int | None = None) -> FakeLock:
        return FakeLock(self, document_id if part is None else (document_id, part))


class FakeLock:
    def __init__(self, locks: FakeLocks, key: int | tuple[int, int]) -> None:
        self._locks = locks
        self._id = key
        self._mine = False

    async def acquire(self) -> bool:
        if self._locks.down:
            raise LockUnavailableError("fake redis down")
        if self._id in self._locks.held:
            return False
        self._locks.held.add(self._id)
        self._locks.taken.append(self._id)
        self._mine = True
        return True

    async def renew(self) -> None:
        from shared.domain.errors import LockLostError

        self._locks.renewals += 1
        if self._id in self._locks.lost:
            raise LockLostError(f"lock of document {self._id} lost (fake)")

    async def release(self) -> None:
        if self._mine:
            self._locks.held.discard(self._id)
            self._mine = False


class FakeEmbedder:
    """Unit vectors of dimension ``dim``; ``error`` is raised instead when set. ``by_text``: each
    text's vector depends on the text (so a row out of place shows); else every row is e0."""

    def __init__(self, dim: int = 4, error: Exception | None = None, *, by_text: bool = False) -> None:
        self.model_name = "fake"
        self.dim = dim
        self.error = error
        self.by_text = by_text
        self.calls = 0
        self.batches: list[list[str]] = []

    def vector(self, text: str) -> npt.NDArray[np.float32]:
        """The row :meth:`embed` gives ``text`` (with ``by_text``)."""
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        out: npt.NDArray[np.float32] = v / np.linalg.norm(v)
        return out

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        self.batches.append(list(texts))
        if self.error is not None:
            raise self.error
        if self.by_text:
            return np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
        return out


class FakeExtractor:
    """Splits the text on blank lines into chunks; ``error`` is raised instead when set;
    ``block`` makes the call wait until cancelled (for timeouts)."""

    def __init__(self, error: Exception | None = None, *, block: bool = False,
                 on_chunking: Callable[[], None] | None = None) -> None:
        self.error = error
        self.block = block
        self.cancelled = 0
        self.calls = 0  # extractions that returned chunks
        self.on_chunking = on_chunking  # called when parsing is done, before the stage is reported

    def __call__(self, data: bytes, filename: str, cancel: threading.Event | None = None,
                 on_stage: Callable[[str], None] | None = None) -> Extraction:
        if self.block:
            assert cancel is not None
            cancel.wait(10)
            raise RuntimeError("cancelled")
        if self.error is not None:
            raise self.error
        parts = [p for p in data.decode().split("\n\n") if p.strip()]
        if self.on_chunking is not None:
            self.on_chunking()
        if on_stage is not None:
            on_stage("CHUNKING")
        chunks = [Chunk(index=i, content=p, token_count=len(p.split())) for i, p in enumerate(parts)]
        self.calls += 1
        return Extraction(chunks=tuple(chunks), warnings=())

    def cancel(self, token: threading.Event) -> None:
        self.cancelled += 1
        token.set()


__all__ = [
    "FakeDocument",
    "FakeEmbedder",
    "FakeExtractor",
    "FakeLocks",
    "FakeObjectStore",
    "FakeObjectStream",
    "FakeObjectWriter",
    "FakePublisher",
    "FakeReleasedObjects",
    "FakeStore",
    "FakeTask",
    "replace",
]
