"""The embedding cache as a run uses it: lookup before the model, the turn's hand-off, the write
after the commit (the decisions are :mod:`task_service.indexing.embedding_cache`'s)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from shared.domain.errors import TransientError
from shared.domain.records import CacheNamespace
from shared.ports import WorkerStore
from task_service.indexing import embedding_cache
from task_service.indexing.embedding_cache import Plan

log = logging.getLogger(__name__)
CACHE_WRITE_BATCH = 1000  # vectors per embedding-cache INSERT (≈1.5 MB of parameters at 384-d)


class EmbeddingCache:
    """``owner``-scoped vectors of chunk texts in one namespace ``ns`` (``enabled`` False: every
    lookup is empty and nothing is written). ``store`` retries transient failures;
    ``touch_interval_s``: a hit's ``last_used`` is written at most once per that many seconds."""

    def __init__(self, store: WorkerStore, ns: CacheNamespace, *, enabled: bool, touch_interval_s: float) -> None:
        self._store = store
        self.ns = ns
        self.enabled = enabled
        self._touch_interval_s = touch_interval_s
        # The last model turn's fresh vectors, (owner, {text key: vector}): its run may still be
        # committing (its cache write comes after) when the next turn looks up the cache.
        self._last_turn: tuple[int, dict[bytes, Any]] | None = None

    async def lookup(self, owner: int, texts: Sequence[str]) -> Mapping[bytes, Any]:
        """``owner``'s cached ``(dim,)`` vectors of ``texts`` by text key (``{}`` when disabled): a
        tenant never reads another's entries. The previous model turn's fresh vectors of the same
        owner count as cached: that run's cache write may not have happened yet (it follows its
        commit, after the turn), and a copy of its texts must not reach the model again. The
        vectors are values of a pure function of the text, whether or not that run commits."""
        if not self.enabled or not texts:
            return {}
        keys = [embedding_cache.text_key(t) for t in texts]
        found = dict(await self._store.cache_lookup(owner, self.ns, keys))
        if self._last_turn is not None and self._last_turn[0] == owner:
            handed = self._last_turn[1]
            found.update({k: handed[k] for k in keys if k in handed and k not in found})
        return found

    def hand_off(self, owner: int, p: Plan, fresh: Any) -> None:
        """Keep this turn's fresh vectors (``(len(p.miss_keys), dim)``) for the next turn's lookup."""
        self._last_turn = (owner, dict(zip(p.miss_keys, fresh, strict=True))) if self.enabled else None

    async def update(self, owner: int, document_id: int, p: Plan, fresh: Any, hit_keys: list[bytes]) -> None:
        """After the fenced commit, in its own transactions: add this run's new vectors under the
        document's user, and touch the hits' ``last_used`` (at most once per touch interval). A
        document deleted meanwhile gets no entry.

        Not inside the commit: the cache holds values of a pure function (text → vector), so
        losing a write costs one re-embedding later, never correctness; outside, the fenced
        transaction stays as short as before, never waits on another worker inserting the same
        key, and cannot be failed by the cache. Only a committed run writes (a fenced-out run
        writes nothing anywhere). Failures are logged, not raised: the document is indexed.
        """
        if not self.enabled:
            return
        try:
            for i in range(0, len(p.miss_keys), CACHE_WRITE_BATCH):  # bounded statements for 20,000-chunk documents
                await self._store.cache_store(owner, document_id, self.ns, list(p.miss_keys[i:i + CACHE_WRITE_BATCH]),
                                              fresh[i:i + CACHE_WRITE_BATCH])
            if hit_keys:
                await self._store.cache_touch(owner, self.ns, hit_keys, self._touch_interval_s)
        except TransientError as exc:
            log.warning("embedding cache not updated", extra={"error": str(exc)})
