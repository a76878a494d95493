"""The ANN job: adds vectors to the HNSW index behind the commits (issue 31; ARCHITECTURE.md
"The swap without the ANN index on its path").

Commits and swaps insert vectors with ``ann = false``, outside the partial HNSW index (``WHERE
ann``, sql/0017): measured while designing, COPY of 20,000 vectors took 1.1 s without the index and
68-101 s with it. Vector search reads through HNSW only in KBs above ``SEARCH_EXACT_MAX_CHUNKS``,
and there scans the rows not yet indexed exactly (results unchanged), so only those KBs' vectors
are added, in batches of ``ANN_INDEX_BATCH`` rows, each its own short transaction. Every worker
runs it every ``ANN_INDEX_INTERVAL_S``; concurrent passes skip each other's rows (SKIP LOCKED).
``rag ops ann-indexer --once`` runs one pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from shared.ports import MaintenanceStore
from shared.settings import WorkerSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnnConfig:
    """The ANN job's settings: ``ANN_INDEX_INTERVAL_S`` (seconds; 0 disables), ``ANN_INDEX_BATCH``
    (rows per transaction) and ``SEARCH_EXACT_MAX_CHUNKS`` (only KBs above it are indexed)."""

    interval_s: float
    batch: int
    exact_max_chunks: int

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> AnnConfig:
        return cls(interval_s=s.ann_index_interval_s, batch=s.ann_index_batch,
                   exact_max_chunks=s.search_exact_max_chunks)


async def once(store: MaintenanceStore, *, batch: int, exact_max_chunks: int) -> int:
    """One pass: every vector of the KBs above ``exact_max_chunks`` added to the HNSW index,
    ``batch`` rows per transaction; how many were added. Raises ``DatabaseUnavailableError``."""
    kbs = await store.kbs_needing_ann(exact_max_chunks)
    added = 0
    for kb_id in kbs:
        while True:
            n = await store.add_to_ann(kb_id, batch)
            added += n
            if n < batch:
                break
    if added:
        log.info("vectors added to the HNSW index", extra={"rows": added, "knowledge_bases": len(kbs)})
    return added
