"""The configured embedder: its config from settings, built by both composition roots."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.adapters.embedding import Embedder, build_embedder
from shared.settings import CommonSettings


@dataclass(frozen=True)
class EmbedderConfig:
    """``EMBEDDING_*``: provider, model name, dimension, texts per call, the local model's runtime
    and intra-op ``threads`` (None: one per core), and the openai provider's endpoint, key and
    request timeout (seconds)."""

    provider: str
    model: str
    dim: int
    batch_size: int
    runtime: str
    threads: int | None
    base_url: str
    api_key: str | None = field(repr=False)
    timeout_s: float

    @classmethod
    def from_settings(cls, s: CommonSettings, *, threads: int | None = None) -> EmbedderConfig:
        key = s.embedding_api_key.get_secret_value() if s.embedding_api_key else None
        return cls(provider=s.embedding_provider, model=s.embedding_model, dim=s.embedding_dim,
                   batch_size=s.embedding_batch_size, runtime=s.embedding_runtime, threads=threads,
                   base_url=s.embedding_base_url, api_key=key or None, timeout_s=s.embedding_timeout_s)


def build_configured(config: EmbedderConfig) -> Embedder:
    """The embedder ``config.provider`` names. Raises ConfigurationError / DependencyMissingError."""
    if config.provider == "openai":
        return build_embedder("openai", base_url=config.base_url, model=config.model, api_key=config.api_key,
                              dim=config.dim, batch_size=config.batch_size, timeout_s=config.timeout_s)
    return build_embedder(config.provider, batch_size=config.batch_size, dim=config.dim, runtime=config.runtime,
                          threads=config.threads)
