"""Build pipeline components from settings (used by both composition roots)."""

from __future__ import annotations

from shared.adapters.embedding import Embedder, build_embedder
from shared.settings import CommonSettings


def embedder_from_settings(settings: CommonSettings, threads: int | None = None) -> Embedder:
    """The embedder named by ``EMBEDDING_PROVIDER``; ``threads``: the local model's intra-op
    threads (None: one per core). Raises ConfigurationError / DependencyMissingError."""
    if settings.embedding_provider == "openai":
        key = settings.embedding_api_key.get_secret_value() if settings.embedding_api_key else None
        return build_embedder(
            "openai",
            base_url=settings.embedding_base_url,
            model=settings.embedding_model,
            api_key=key or None,
            dim=settings.embedding_dim,
            batch_size=settings.embedding_batch_size,
            timeout_s=settings.embedding_timeout_s,
        )
    return build_embedder(
        settings.embedding_provider, batch_size=settings.embedding_batch_size, dim=settings.embedding_dim,
        runtime=settings.embedding_runtime, threads=threads, spinning=settings.embedding_allow_spinning,
        precision=settings.embedding_precision,
    )
