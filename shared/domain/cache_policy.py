"""Embedding cache rules the adapters need (pure): the key of a text (:func:`text_key`, also
stored on every chunk as ``document_chunk.text_sha256``) and how many rows to evict (the rest of
the cache decisions, which chunks miss and how vectors are put together, are the worker's:
``task_service.indexing.embedding_cache``).

Entries are per user (``embedding_cache.user_id``, sql/0016): a run reads and writes only its
document owner's entries, so one tenant's upload never hits another's work.
"""

from __future__ import annotations

import hashlib


def text_key(text: str) -> bytes:
    """SHA-256 (32 bytes) of the chunk text as UTF-8, exactly as it is sent to the model (the
    database computes the same for a stored chunk: ``sha256(convert_to(content, 'UTF8'))``)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def eviction_count(rows: int, max_rows: int, low_water: float = 0.9) -> int:
    """Rows to delete so that the cache holds at most ``max_rows``: none while ``rows`` ≤
    ``max_rows``; above, down to ``low_water`` × ``max_rows`` (so the next insertions do not
    trigger an eviction at every pass). ``max_rows`` 0 means "keep nothing".

    Raises ValueError for negative counts or ``low_water`` outside (0, 1].
    """
    if rows < 0 or max_rows < 0:
        raise ValueError("row counts must be >= 0")
    if not 0 < low_water <= 1:
        raise ValueError("low_water must be in (0, 1]")
    if rows <= max_rows:
        return 0
    return rows - int(max_rows * low_water)
