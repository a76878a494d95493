"""A unit's model step: in the worker's model turn, fence check → cache lookup → embed the misses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shared.adapters.embedding.vectors import FloatMatrix, empty_matrix
from shared.domain.errors import StaleGenerationError, TaskTimeoutError
from shared.faults import fault_point
from shared.ports import Embedder
from task_service.indexing import embedding_cache
from task_service.indexing.embedding_cache import Plan
from task_service.indexing.progress import Stage, embedded_share
from task_service.indexing.unit import ReportsProgress, RunDeps

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Embedded:
    """The vectors of a unit's texts: ``plan`` (hits and misses), the ``cached`` vectors by text
    key, and ``fresh``, ``(len(plan.miss_keys), dim)`` float32 from the model."""

    plan: Plan
    cached: Mapping[bytes, Any]
    fresh: FloatMatrix

    def matrix(self, dim: int) -> FloatMatrix:
        """``(len(texts), dim)`` float32, row i for text i."""
        return embedding_cache.assemble(self.plan, self.cached, self.fresh, dim)

    def hit_keys(self) -> list[bytes]:
        """The text keys served by the cache (one per chunk that hit)."""
        return [k for k in self.plan.keys if k in self.cached]


async def embed_in_turn(deps: RunDeps, progress: ReportsProgress, owner: int, texts: Sequence[str],
                        deadline: asyncio.Timeout, *, is_current: Callable[[], Awaitable[bool]],
                        record: Callable[[Plan], Awaitable[None]]) -> Embedded:
    """Hold the worker's model turn (the wait suspends ``deadline``; stage MODEL_WAIT while it
    lasts), check the claim is still current (a stale run never reaches the model:
    ``StaleGenerationError``), look ``texts`` up in ``owner``'s cache, ``record`` the plan (the
    ``embedding_run`` row), embed the misses and hand them to the next turn. The turn ends here:
    the commit comes after it. Raises ``TaskTimeoutError`` when the model stalls."""
    async with deps.model_turn.hold(deadline, on_wait=lambda: progress.report(Stage.MODEL_WAIT)):
        if not await is_current():
            raise StaleGenerationError("generation or claim superseded before embedding")
        cached = await deps.cache.lookup(owner, texts)
        p = embedding_cache.plan(texts, cached)
        await record(p)
        log.info("embedding", extra={"chunks": len(texts), "cache_hits": p.hits, "cache_misses": p.misses})
        await fault_point("during_embed")
        with deps.metrics.stage("embed"):
            fresh = (await embed_batches(deps.embedder, list(p.miss_texts), deps.config.embed_chunks, progress,
                                         stall_s=deps.config.embed_stall_timeout_s)
                     if p.miss_texts else empty_matrix(deps.embedder.dim))
        deps.cache.hand_off(owner, p, fresh)
    return Embedded(p, cached, fresh)


async def embed_batches(embedder: Embedder, texts: list[str], step: int, progress: ReportsProgress, *,
                        stall_s: float) -> FloatMatrix:
    """Embed in calls of ``step`` texts (``embed_progress_chunks``, at most
    ``embedding_batch_size``), reporting EMBEDDING progress (embedded / total) between calls; a
    ``(len(texts), dim)`` float32 matrix in input order. A call (its retries included) that
    completes no batch within ``stall_s`` seconds raises ``TaskTimeoutError`` ("no embedded
    batch for N s"): a dead or hung model, not a slow one (``EMBED_STALL_TIMEOUT_S``).

    The texts go longest first across the whole unit, as sentence-transformers' ``encode()``
    orders one call: each call then pads to similar lengths (a call of 16 texts in document
    order pads to its longest)."""
    step = max(1, step)
    order = np.argsort([-len(t) for t in texts], kind="stable")
    ordered = [texts[i] for i in order]
    await progress.report(Stage.EMBEDDING, 0.0)
    parts = []
    for at in range(0, len(ordered), step):
        parts.append(await _within(stall_s, embedder.embed(ordered[at:at + step])))
        await fault_point("embed_batch")
        await progress.report(Stage.EMBEDDING, embedded_share(at + step, len(ordered)))
    done = parts[0] if len(parts) == 1 else np.concatenate(parts)
    out: FloatMatrix = np.empty_like(done)
    out[order] = done
    return out


async def _within(stall_s: float, call: Awaitable[FloatMatrix]) -> FloatMatrix:
    """``await call``, or ``TaskTimeoutError`` after ``stall_s`` seconds (the call cancelled)."""
    try:
        async with asyncio.timeout(stall_s):
            return await call
    except TimeoutError:
        raise TaskTimeoutError(f"no embedded batch for {stall_s:g} s") from None
