"""Time rules of a run or part (pure; ARCHITECTURE.md, "Flow 3", "Time: progress-based").

No fixed wall clock bounds a document: a unit of work (a document run below the split threshold,
or one part of a split document) gets a budget that grows with its chunks, and is stopped early
only when its model completes no batch for ``EMBED_STALL_TIMEOUT_S``. A delivery carries at most
:func:`largest_unit_chunks` chunks of embedding, so the broker's consumer timeout (counted from
delivery, RabbitMQ docs "Delivery Acknowledgement Timeout") is respected by the length of one
unit, not of a whole document.
"""

from __future__ import annotations

__all__ = ["consumer_timeout_problem", "delivery_bound_s", "largest_unit_chunks", "task_budget_s"]


def task_budget_s(chunks: int | None, base_s: float, per_chunk_s: float) -> float:
    """Seconds a run or part may take of its own time (model-turn waits excluded):
    ``base_s + chunks × per_chunk_s``; before chunking (``chunks`` None) only ``base_s``.
    Raises ValueError for negative ``chunks``."""
    if chunks is None:
        return base_s
    if chunks < 0:
        raise ValueError(f"chunks must be non-negative, got {chunks}")
    return base_s + chunks * per_chunk_s


def largest_unit_chunks(split_min_chunks: int, part_chunks: int) -> int:
    """The most chunks one delivery embeds: a document below the split threshold
    (``split_min_chunks − 1``) or one part (``part_chunks``)."""
    return max(split_min_chunks - 1, part_chunks)


def delivery_bound_s(
    prefetch: int, base_s: float, per_chunk_s: float, split_min_chunks: int, part_chunks: int
) -> float:
    """The longest a delivery stays unacked, seconds: with prefetch N the last prefetched
    delivery waits for the N − 1 before it and then runs its own budget, each at most the budget
    of the largest unit: ``N × (base_s + largest_unit_chunks × per_chunk_s)`` (defaults: 2 ×
    555.5 = 1,111 s). Also the oldest a live claim of an unsplit task can be (the scanner's bound)."""
    largest = largest_unit_chunks(split_min_chunks, part_chunks)
    return prefetch * task_budget_s(largest, base_s, per_chunk_s)


def consumer_timeout_problem(
    prefetch: int, base_s: float, per_chunk_s: float, split_min_chunks: int, part_chunks: int,
    consumer_timeout_s: float,
) -> str | None:
    """The start-up guard: None when :func:`delivery_bound_s` stays below ``consumer_timeout_s``
    (RabbitMQ's ``consumer_timeout``, which would otherwise close the channel mid-unit), else
    the sentence naming what to change."""
    bound = delivery_bound_s(prefetch, base_s, per_chunk_s, split_min_chunks, part_chunks)
    if bound < consumer_timeout_s:
        return None
    largest = largest_unit_chunks(split_min_chunks, part_chunks)
    return (
        f"PREFETCH ({prefetch}) x (TASK_BUDGET_BASE_S ({base_s:g}) + max(SPLIT_MIN_CHUNKS - 1, PART_CHUNKS)"
        f" ({largest}) x TASK_BUDGET_PER_CHUNK_S ({per_chunk_s:g})) = {bound:g} s must stay below"
        f" CONSUMER_TIMEOUT_S ({consumer_timeout_s:g}, RabbitMQ's consumer_timeout): lower PREFETCH,"
        " SPLIT_MIN_CHUNKS, PART_CHUNKS or the budget, or raise consumer_timeout on the broker and"
        " CONSUMER_TIMEOUT_S here"
    )
