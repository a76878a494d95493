"""Embedding cache eviction (pure): how many rows to delete (the rest of the cache decisions,
which chunks miss and how vectors are put together, are the worker's: ``task_service.embedding_cache``)."""

from __future__ import annotations


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
