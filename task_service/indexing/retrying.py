"""The ports as the indexing run uses them: each call retried on ``TransientError``.

:class:`RetryingWorkerStore`, :class:`RetryingObjectReader` and :class:`RetryingEmbedder` wrap
the composition root's adapters (``PgWorkerStore``, ``ObjectStore``, the embedder; in unit
tests the fakes) and implement the same ports method by method, so every call the run makes is
typed against the port's own signature. :class:`Retry` runs one call under
:func:`shared.domain.retry_policy.transient_retrying` (tenacity: ``attempts`` tries in all,
exponential backoff with jitter); the last ``TransientError`` leaves unchanged, any other error
at once. ``heartbeat`` and ``part_heartbeat`` are not retried: the lease calls them every period
and a missed one is tried again by the next.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt

from shared.domain.fencing import PartSnapshot, TaskSnapshot
from shared.domain.records import (
    ArchiveCommit,
    ArchiveExpanded,
    CacheNamespace,
    Chunk,
    ChunkCommit,
    Claim,
    DocumentSource,
    OutboxRow,
    PartClaim,
    PartCommit,
    PartCommitted,
    SkipRecord,
    SplitCommit,
)
from shared.domain.retry_policy import transient_retrying
from shared.domain.states import TaskStatus
from shared.ports import Embedder, ObjectReader, Tap, WorkerStore

P = ParamSpec("P")
R = TypeVar("R")


class Retry:
    """Retries one awaited call on ``TransientError``: ``attempts`` tries in all, delays from
    ``initial_s`` doubling to ``max_s`` seconds (plus jitter)."""

    def __init__(self, attempts: int, initial_s: float, max_s: float) -> None:
        self.attempts, self.initial_s, self.max_s = attempts, initial_s, max_s

    async def __call__(self, fn: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
        """``await fn(*args, **kwargs)``, again after each TransientError until the attempts run out."""
        async for attempt in transient_retrying(self.attempts, self.initial_s, self.max_s):
            with attempt:
                return await fn(*args, **kwargs)
        raise AssertionError("unreachable: tenacity re-raises the last error")


class RetryingObjectReader:
    """:class:`~shared.ports.ObjectReader` with ``get`` retried (``StorageUnavailableError``)."""

    def __init__(self, inner: ObjectReader, retry: Retry) -> None:
        self._inner, self._retry = inner, retry

    async def get(self, key: str) -> bytes:
        return await self._retry(self._inner.get, key)

    async def put_bytes(self, key: str, data: bytes, *, content_type: str, tap: Tap) -> None:
        await self._retry(self._inner.put_bytes, key, data, content_type=content_type, tap=tap)  # a PUT overwrites

    async def remove(self, key: str) -> None:
        await self._retry(self._inner.remove, key)


class RetryingEmbedder:
    """:class:`~shared.ports.Embedder` with ``embed`` retried (``EmbeddingUnavailableError`` /
    ``EmbeddingTimeoutError``); ``model_name`` and ``dim`` are the wrapped embedder's."""

    def __init__(self, inner: Embedder, retry: Retry) -> None:
        self._inner, self._retry = inner, retry
        self.model_name = inner.model_name
        self.dim = inner.dim

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """``(len(texts), dim)`` float32, L2-normalized rows."""
        return await self._retry(self._inner.embed, texts)


class RetryingWorkerStore:
    """:class:`~shared.ports.WorkerStore` with every call but the heartbeats retried
    (``DatabaseUnavailableError``). The wrapped store's methods are looked up at call time."""

    def __init__(self, inner: WorkerStore, retry: Retry) -> None:
        self._inner, self._retry = inner, retry

    async def load_task_snapshot(self, task_id: int) -> TaskSnapshot | None:
        return await self._retry(self._inner.load_task_snapshot, task_id)

    async def claim_task(self, task_id: int, generation: int) -> Claim | None:
        return await self._retry(self._inner.claim_task, task_id, generation)

    async def heartbeat(self, claim: Claim) -> bool:
        return await self._inner.heartbeat(claim)  # the lease's next period is the retry

    async def report_progress(self, claim: Claim, stage: str, progress: float) -> bool:
        return await self._retry(self._inner.report_progress, claim, stage, progress)

    async def document_source(self, document_id: int) -> DocumentSource | None:
        return await self._retry(self._inner.document_source, document_id)

    async def claim_is_current(self, claim: Claim) -> bool:
        return await self._retry(self._inner.claim_is_current, claim)

    async def record_embedding_run(
        self, claim: Claim | PartClaim, document_id: int, chunk_count: int, worker: str,
        *, cache_hits: int = 0, cache_misses: int | None = None,
    ) -> None:
        await self._retry(self._inner.record_embedding_run, claim, document_id, chunk_count, worker,
                          cache_hits=cache_hits, cache_misses=cache_misses)

    async def cache_lookup(
        self, owner: int, ns: CacheNamespace, keys: Sequence[bytes]
    ) -> Mapping[bytes, npt.NDArray[np.float32]]:
        return await self._retry(self._inner.cache_lookup, owner, ns, keys)

    async def cache_store(
        self, owner: int, document_id: int, ns: CacheNamespace, keys: Sequence[bytes], vectors: npt.NDArray[Any],
    ) -> int:
        return await self._retry(self._inner.cache_store, owner, document_id, ns, keys, vectors)

    async def cache_touch(self, owner: int, ns: CacheNamespace, keys: Sequence[bytes], min_age_s: float) -> int:
        return await self._retry(self._inner.cache_touch, owner, ns, keys, min_age_s)

    async def record_skips(self, skips: Sequence[SkipRecord], worker: str) -> None:
        await self._retry(self._inner.record_skips, skips, worker)

    async def commit_chunks(self, commit: ChunkCommit) -> bool:
        return await self._retry(self._inner.commit_chunks, commit)

    async def finish_unsuccessfully(
        self, claim: Claim, *, document_id: int, status: TaskStatus, error_code: str, error_message: str,
        warnings: Sequence[str] = (),
    ) -> bool:
        return await self._retry(self._inner.finish_unsuccessfully, claim, document_id=document_id, status=status,
                                 error_code=error_code, error_message=error_message, warnings=warnings)

    # ---------------------------------------------------------- a big document in parts (Flow 3)

    async def split_task(self, commit: SplitCommit) -> list[OutboxRow] | None:
        return await self._retry(self._inner.split_task, commit)

    async def expand_archive(self, commit: ArchiveCommit) -> ArchiveExpanded | None:
        return await self._retry(self._inner.expand_archive, commit)

    async def mark_published(self, outbox_id: int) -> None:
        await self._retry(self._inner.mark_published, outbox_id)

    async def load_part_snapshot(self, task_id: int, part: int) -> PartSnapshot | None:
        return await self._retry(self._inner.load_part_snapshot, task_id, part)

    async def claim_part(self, task_id: int, part: int, generation: int) -> PartClaim | None:
        return await self._retry(self._inner.claim_part, task_id, part, generation)

    async def part_claim_is_current(self, claim: PartClaim) -> bool:
        return await self._retry(self._inner.part_claim_is_current, claim)

    async def read_part_chunks(self, claim: PartClaim) -> list[Chunk] | None:
        return await self._retry(self._inner.read_part_chunks, claim)

    async def part_heartbeat(self, claim: PartClaim) -> bool:
        return await self._inner.part_heartbeat(claim)  # the lease's next period is the retry

    async def report_part_progress(self, claim: PartClaim, embedded: int) -> bool:
        return await self._retry(self._inner.report_part_progress, claim, embedded)

    async def commit_part(self, commit: PartCommit) -> PartCommitted:
        return await self._retry(self._inner.commit_part, commit)

    async def finish_part_unsuccessfully(
        self, claim: PartClaim, *, document_id: int, status: TaskStatus, error_code: str, error_message: str,
    ) -> bool:
        return await self._retry(self._inner.finish_part_unsuccessfully, claim, document_id=document_id,
                                 status=status, error_code=error_code, error_message=error_message)
