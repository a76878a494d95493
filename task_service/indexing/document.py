"""A whole document's run: download → extract → model turn → the one fenced commit, or, for a
document of at least ``SPLIT_MIN_CHUNKS`` chunks, download → extract → the split (its parts are
:mod:`task_service.indexing.part`'s), or, for an archive, download → its expansion into member
documents (:mod:`task_service.indexing.archive`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from shared.domain.errors import StaleGenerationError
from shared.domain.formats import parser_filename
from shared.domain.messages import IndexMessage
from shared.domain.parts import plan_parts, should_split
from shared.domain.records import ChunkCommit, Claim, SplitCommit
from shared.domain.states import TaskStatus
from shared.faults import fault_point
from task_service.indexing.archive import expand, is_archive
from task_service.indexing.embedding import embed_in_turn
from task_service.indexing.embedding_cache import Plan
from task_service.indexing.extraction import extract
from task_service.indexing.progress import Stage
from task_service.indexing.unit import Budget, Progress, RunDeps, UnitDone
from task_service.pipeline.extract import Extraction


@dataclass
class DocumentRun:
    """One claimed document task (a :class:`~task_service.indexing.unit.ClaimedUnit`):
    ``warnings`` are the extraction's, once it has run (the failure record keeps them); the
    ``budget`` is the base until the chunks are counted."""

    deps: RunDeps
    msg: IndexMessage
    claim: Claim
    warnings: list[str] = field(default_factory=list)
    progress: Progress = field(init=False)
    budget: Budget = field(init=False)

    def __post_init__(self) -> None:
        cfg = self.deps.config
        self.budget = Budget(cfg.budget_base_s, cfg.budget_per_chunk_s)
        self.progress = Progress(self.deps.store, self.claim)
        self.progress.throttle.written(self.progress.clock(), Stage.DOWNLOADING, 0.0)  # the claim wrote it

    async def heartbeat(self) -> bool:
        return await self.deps.store.heartbeat(self.claim)

    async def finish(self, status: TaskStatus, error_code: str, message: str) -> bool:
        return await self.deps.store.finish_unsuccessfully(
            self.claim, document_id=self.msg.document_id, status=status, error_code=error_code,
            error_message=message, warnings=self.warnings)

    async def run(self, deadline: asyncio.Timeout) -> UnitDone:
        """Index the document to its fenced commit, or split it. Raises ``StaleGenerationError``
        when the document is gone or the claim superseded."""
        data, filename = await self._download()
        if is_archive(filename):  # its members become documents (Flow 4), it has no chunks
            return await expand(self.deps, self.msg, self.claim, data, self.progress, self.warnings)
        extraction = await self._extract(data, filename)
        chunks = extraction.chunks
        deps, msg = self.deps, self.msg
        if should_split(len(chunks), deps.config.split_min_chunks):
            return await self._split(extraction)
        self.budget.add_chunks(deadline, len(chunks))
        embedded = await embed_in_turn(deps, self.progress, msg.user_id, [c.content for c in chunks], deadline,
                                       is_current=lambda: deps.store.claim_is_current(self.claim),
                                       record=self._record)
        # The model is free again: the next delivery embeds while this one commits.
        embeddings = embedded.matrix(deps.embedder.dim)
        await self.progress.report(Stage.WRITING, 1.0)
        with deps.metrics.stage("write"):
            committed = await deps.store.commit_chunks(ChunkCommit(
                self.claim, msg.document_id, msg.kb_id, chunks, embeddings, extraction.warnings))
        if not committed:
            raise StaleGenerationError("fenced out at commit")
        await deps.cache.update(msg.user_id, msg.document_id, embedded.plan, embedded.fresh, embedded.hit_keys())
        await deps.released.remove_released()  # a swapped-out version's object
        return UnitDone("task indexed", len(chunks), len(chunks), indexed=True)

    async def _split(self, extraction: Extraction) -> UnitDone:
        """The split (one fenced transaction: every chunk staged, a part row and a part message
        per ``PART_CHUNKS`` chunks), then the part messages released now are published. Raises
        ``StaleGenerationError`` when fenced out (nothing staged)."""
        deps, msg, chunks = self.deps, self.msg, extraction.chunks
        parts = plan_parts(len(chunks), deps.config.part_chunks)
        with deps.metrics.stage("split"):
            rows = await deps.store.split_task(SplitCommit(
                self.claim, msg.document_id, msg.kb_id, msg.user_id, chunks, parts, extraction.warnings))
        if rows is None:
            raise StaleGenerationError("fenced out at split")
        await deps.publish_parts(rows)
        return UnitDone("task split into parts", len(chunks), 0, indexed=False, parts=len(parts))

    async def _download(self) -> tuple[bytes, str]:
        """The bytes of the version to index, and the file name to parse them by (the API typed
        the bytes at upload: a name without an allowed extension parses as that type)."""
        source = await self.deps.store.document_source(self.msg.document_id)
        if source is None:
            raise StaleGenerationError("document deleted")
        await fault_point("before_download", source.filename)
        with self.deps.metrics.stage("download"):
            data = await self.deps.objects.get(source.object_key)
        return data, parser_filename(source.filename, source.content_type)

    async def _extract(self, data: bytes, filename: str) -> Extraction:
        """Parse + chunk the document (in the sandbox)."""
        deps = self.deps
        await fault_point("before_parse")
        await self.progress.report(Stage.PARSING)
        extraction = await extract(deps.parse, data, filename, lambda stage, p: self.progress.report(Stage(stage), p))
        deps.metrics.observe_stage("parse", extraction.parse_s)
        deps.metrics.observe_stage("chunk", extraction.chunk_s)
        self.warnings[:] = extraction.warnings
        return extraction

    async def _record(self, p: Plan) -> None:
        await self.deps.store.record_embedding_run(
            self.claim, self.msg.document_id, len(p.keys), self.deps.worker_name,
            cache_hits=p.hits, cache_misses=p.misses)
