"""How a big document is cut into parts (pure; ARCHITECTURE.md, "Flow 3").

A document of at least ``SPLIT_MIN_CHUNKS`` chunks is split after chunking into consecutive
parts of ``PART_CHUNKS`` chunks (the last part takes the remainder, so no part is longer than
``PART_CHUNKS``: the bound the start-up guard of :mod:`shared.domain.time_budget` relies on).
Below the threshold the document keeps the single path.
"""

from __future__ import annotations

from enum import StrEnum

from shared.domain.records import PartRange

__all__ = ["PartStatus", "plan_parts", "should_split"]


class PartStatus(StrEnum):
    """``index_part.status``: WAITING (message published or held, not claimed), RUNNING
    (claimed: part attempt bumped), DONE (its vectors staged). A part has no failed state: a
    part that fails ends its task, which deletes the split."""

    WAITING = "WAITING"
    RUNNING = "RUNNING"
    DONE = "DONE"


#: Claimable part statuses (RUNNING: its previous holder is dead or paused, fenced by the attempt).
PART_CLAIMABLE: frozenset[PartStatus] = frozenset({PartStatus.WAITING, PartStatus.RUNNING})


def should_split(chunk_count: int, split_min_chunks: int) -> bool:
    """True when a document of ``chunk_count`` chunks goes the split path."""
    return chunk_count >= split_min_chunks


def plan_parts(chunk_count: int, part_chunks: int) -> list[PartRange]:
    """Consecutive parts of ``part_chunks`` chunks covering ``0 .. chunk_count - 1`` in order
    (the last one shorter when ``part_chunks`` does not divide ``chunk_count``); ``[]`` for 0
    chunks. Raises ValueError for ``part_chunks < 1`` or ``chunk_count < 0``."""
    if part_chunks < 1:
        raise ValueError(f"part_chunks must be at least 1, got {part_chunks}")
    if chunk_count < 0:
        raise ValueError(f"chunk_count must be non-negative, got {chunk_count}")
    return [
        PartRange(part, first, min(part_chunks, chunk_count - first))
        for part, first in enumerate(range(0, chunk_count, part_chunks))
    ]
