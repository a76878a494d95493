"""The indexing run's settings, built once from ``WorkerSettings`` by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from shared.settings import WorkerSettings
from task_service.pipeline.readers.archive.plan import MIB, ArchiveLimits


@dataclass(frozen=True)
class HandlerConfig:
    """The handler's settings (seconds): built once from WorkerSettings by the composition root
    (:meth:`from_settings`); no defaults here, the settings hold them."""

    lock_retry_max_attempts: int
    lease_period_s: float  # lock renewal + task heartbeat period
    # time: a unit's budget = base + chunks x per chunk (its own time, model-turn waits excluded);
    # a model call that completes no batch for the stall timeout ends the unit TIMEOUT
    budget_base_s: float
    budget_per_chunk_s: float
    embed_stall_timeout_s: float
    # big documents: split after chunking at >= split_min_chunks, into parts of part_chunks
    split_min_chunks: int
    part_chunks: int
    retry_attempts: int  # transient failures: attempts, first and largest backoff
    retry_initial_s: float
    retry_max_s: float
    # embedding cache: on/off (EMBEDDING_CACHE_MAX_ROWS > 0), namespace, last_used touch period
    cache_enabled: bool
    embedding_provider: str
    embedding_model_revision: str
    cache_touch_interval_s: float
    embed_chunks: int  # chunks per embedding call, a progress report after each
    archive_limits: ArchiveLimits  # an archive's expansion (ARCHIVE_MAX_*, ZIP_MAX_INFLATE_RATIO)

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> HandlerConfig:
        return cls(
            lock_retry_max_attempts=s.lock_retry_max_attempts, lease_period_s=min(s.lock_renew_s, s.heartbeat_s),
            budget_base_s=s.task_budget_base_s, budget_per_chunk_s=s.task_budget_per_chunk_s,
            embed_stall_timeout_s=s.embed_stall_timeout_s, split_min_chunks=s.split_min_chunks,
            part_chunks=s.part_chunks, retry_attempts=s.transient_retry_attempts,
            retry_initial_s=s.transient_retry_initial_s, retry_max_s=s.transient_retry_max_s,
            cache_enabled=s.embedding_cache_max_rows > 0, embedding_provider=s.embedding_provider,
            embedding_model_revision=s.embedding_model_revision,
            cache_touch_interval_s=s.embedding_cache_touch_interval_s,
            embed_chunks=max(1, min(s.embed_progress_chunks, s.embedding_batch_size)),
            archive_limits=ArchiveLimits(max_members=s.archive_max_members,
                                         max_member_bytes=s.archive_max_member_mb * MIB,
                                         max_total_bytes=s.archive_max_total_mb * MIB,
                                         max_ratio=s.zip_max_inflate_ratio),
        )
