"""The search modes, stated once: the API's schema (``SearchRequest.mode``, an enum in the OpenAPI
document), the retrieval code and the admin page (which reads them from ``/openapi.json``) all
take them from here. Scores per mode: :mod:`knowledge_service.search.retrieval`."""

from __future__ import annotations

from enum import StrEnum


class SearchMode(StrEnum):
    """``vector`` (cosine similarity of embeddings), ``keyword`` (full text: the query's term weight
    a chunk holds) or ``hybrid`` (reciprocal rank fusion of the two; the default)."""

    VECTOR = "vector"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


DEFAULT_MODE = SearchMode.HYBRID
