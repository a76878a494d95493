"""The API's configs: what the routes and streams read, built once from the settings by the
composition root (``app._open``), never read from the settings per request. No defaults here:
the settings hold them (``tests/unit/test_config_defaults.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge_service.search.retrieval import SearchParams
from shared.settings import KnowledgeSettings


@dataclass(frozen=True)
class EventsConfig:
    """Server-Sent Events: poll period, stream life, KB re-read period, watermark overlap and
    token re-check period (seconds); per-user and total stream caps, the 429's Retry-After
    (seconds) and the pooled connections the polls may hold at once (``EVENTS_*``)."""

    poll_interval_s: float
    max_stream_s: float
    resync_s: float
    watermark_overlap_s: float
    token_check_s: float
    max_streams_per_user: int
    max_streams: int
    retry_after_s: int
    db_share: int

    @classmethod
    def from_settings(cls, s: KnowledgeSettings) -> EventsConfig:
        """The ``EVENTS_*`` settings; ``db_share`` at most ``DB_POOL_MAX - 1`` (one connection
        always left for requests), at least 1."""
        return cls(poll_interval_s=s.events_poll_interval_s, max_stream_s=s.events_max_stream_s,
                   resync_s=s.events_resync_s, watermark_overlap_s=s.events_watermark_overlap_s,
                   token_check_s=s.events_token_check_s, max_streams_per_user=s.events_max_streams_per_user,
                   max_streams=s.events_max_streams, retry_after_s=s.events_retry_after_s,
                   db_share=max(1, min(s.events_db_share, s.db_pool_max - 1)))


@dataclass(frozen=True)
class ApiConfig:
    """What the routes read: the model and dimension a new KB records, the upload bound and
    multipart part (bytes), the largest ``top_k``, the search tuning and the streams' config."""

    embedding_model: str
    embedding_dim: int
    max_upload_bytes: int
    upload_part_size: int
    search_max_top_k: int
    search: SearchParams
    events: EventsConfig

    @classmethod
    def from_settings(cls, s: KnowledgeSettings) -> ApiConfig:
        return cls(embedding_model=s.embedding_model, embedding_dim=s.embedding_dim,
                   max_upload_bytes=s.max_upload_bytes, upload_part_size=s.upload_part_size,
                   search_max_top_k=s.search_max_top_k, search=SearchParams.from_settings(s),
                   events=EventsConfig.from_settings(s))
