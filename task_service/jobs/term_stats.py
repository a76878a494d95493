"""Periodic fold of the keyword statistics per knowledge base (sql/0018): every worker moves the
pending ``kb_term_delta`` rows into ``kb_term`` every ``TERM_STATS_FOLD_INTERVAL_S`` seconds (an
advisory lock lets one pass run at a time). Scores never wait for it: the search reads folded
counts plus pending deltas, so folding only keeps that read short. ``rag ops term-stats --once``
folds everything pending now.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from shared.domain.records import TermFold
from shared.ports import MaintenanceStore
from shared.settings import WorkerSettings

log = logging.getLogger(__name__)
BATCH = 50_000  # deltas per transaction; a full batch runs the next pass at once


@dataclass(frozen=True)
class FoldConfig:
    """``TERM_STATS_FOLD_INTERVAL_S`` (seconds between passes)."""

    interval_s: float

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> FoldConfig:
        return cls(interval_s=s.term_stats_fold_interval_s)


async def once(store: MaintenanceStore, batch: int = BATCH) -> TermFold | None:
    """One pass: up to ``batch`` deltas folded, or None when another worker's pass is running.
    Raises ``DatabaseUnavailableError`` (transient)."""
    done = await store.fold_term_stats(batch)
    if done is not None and done.moved:
        log.info("term statistics folded", extra={"deltas": done.moved, "terms_dropped": done.dropped})
    return done


def full(done: TermFold | None, batch: int = BATCH) -> bool:
    """The pass moved a whole batch: more is pending, run again at once."""
    return done is not None and done.moved >= batch


async def fold_all(store: MaintenanceStore, batch: int = BATCH) -> dict[str, int | None]:
    """Fold until nothing is pending: ``{"folded": deltas, "dropped": terms, "pending": left}``
    (``pending`` is what writers appended meanwhile, or what a concurrent pass holds)."""
    moved = dropped = 0
    while True:
        done = await once(store, batch)
        if done is None:
            break
        moved, dropped = moved + done.moved, dropped + done.dropped
        if not full(done, batch):
            break
    left = await store.pending_term_deltas()
    return {"folded": moved, "dropped": dropped, "pending": left}
