"""One part of a split document: staged chunks → embedding cache → model turn → stage commit.

A part run holds the part's claim (``(generation, part attempt)``, its own lock
``lock:index-document:{id}:part:{p}``) and never downloads or parses: its chunks were staged by
the split (:mod:`task_service.indexing.document`). It looks them up in the owner's embedding
cache, embeds the misses in the worker's model turn (first come, first served: another user's
document waits one part, not one book), and stages its vectors in one fenced transaction; the
last part's commit also swaps the document's chunks and vectors (ARCHITECTURE.md, "Flow 3").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from shared.domain.errors import StaleGenerationError, TransientError
from shared.domain.messages import IndexMessage
from shared.domain.records import PartClaim, PartCommit, PartCommitted
from shared.domain.states import TaskStatus
from task_service.indexing.embedding import embed_in_turn
from task_service.indexing.embedding_cache import Plan
from task_service.indexing.progress import ProgressThrottle, Stage
from task_service.indexing.unit import Budget, RunDeps, UnitDone

log = logging.getLogger(__name__)


@dataclass
class PartProgress:
    """A part's EMBEDDING progress as its embedded chunk count (the store sums the task's over
    its parts), about once a second; other stages are the task's and are not written."""

    deps: RunDeps
    claim: PartClaim
    throttle: ProgressThrottle = field(default_factory=ProgressThrottle)
    clock: Callable[[], float] = time.monotonic

    async def report(self, stage: Stage, progress: float = 0.0) -> None:
        """Raises ``StaleGenerationError`` when the write is fenced out; a database failure is
        logged, not fatal."""
        if stage is not Stage.EMBEDDING or not self.throttle.should_write(self.clock(), stage, progress):
            return
        try:
            alive = await self.deps.store.report_part_progress(self.claim, round(progress * self.claim.chunk_count))
        except TransientError as exc:
            log.warning("part progress not written", extra={"error": str(exc)})
            return
        if not alive:
            raise StaleGenerationError("part claim superseded (progress write fenced out)")


@dataclass
class PartRun:
    """One claimed part (a :class:`~task_service.indexing.unit.ClaimedUnit`); its budget counts
    its chunks from the start."""

    deps: RunDeps
    msg: IndexMessage
    claim: PartClaim
    budget: Budget = field(init=False)
    progress: PartProgress = field(init=False)

    def __post_init__(self) -> None:
        cfg = self.deps.config
        self.budget = Budget(cfg.budget_base_s, cfg.budget_per_chunk_s, self.claim.chunk_count)
        self.progress = PartProgress(self.deps, self.claim)

    async def heartbeat(self) -> bool:
        return await self.deps.store.part_heartbeat(self.claim)

    async def finish(self, status: TaskStatus, error_code: str, message: str) -> bool:
        """The task ends ``status`` under the part's fence (the split is deleted with it)."""
        return await self.deps.store.finish_part_unsuccessfully(
            self.claim, document_id=self.msg.document_id, status=status, error_code=error_code, error_message=message)

    async def run(self, deadline: asyncio.Timeout) -> UnitDone:
        """Embed the part's staged chunks and stage its vectors (the last part swaps). Raises
        ``StaleGenerationError`` when the split is gone or the part's claim superseded."""
        deps, msg, claim = self.deps, self.msg, self.claim
        chunks = await deps.store.read_part_chunks(claim)
        if chunks is None:
            raise StaleGenerationError("split gone (fenced out before embedding)")
        embedded = await embed_in_turn(deps, self.progress, msg.user_id, [c.content for c in chunks], deadline,
                                       is_current=lambda: deps.store.part_claim_is_current(claim),
                                       record=self._record)
        with deps.metrics.stage("write"):
            committed = await deps.store.commit_part(
                PartCommit(claim, msg.document_id, msg.kb_id, embedded.matrix(deps.embedder.dim)))
        if committed is PartCommitted.FENCED:
            raise StaleGenerationError("fenced out at the part's stage commit")
        await deps.cache.update(msg.user_id, msg.document_id, embedded.plan, embedded.fresh, embedded.hit_keys())
        if committed is PartCommitted.SWAPPED:
            await deps.released.remove_released()  # a swapped-out version's object
            return UnitDone("part staged, document swapped", len(chunks), len(chunks), indexed=True)
        return UnitDone("part staged", len(chunks), len(chunks), indexed=False)

    async def _record(self, p: Plan) -> None:
        await self.deps.store.record_embedding_run(
            self.claim, self.msg.document_id, len(p.keys), self.deps.worker_name,
            cache_hits=p.hits, cache_misses=p.misses)
