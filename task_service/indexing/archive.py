"""An archive document's run (ARCHITECTURE.md "Flow 4: an archive"): plan → store the members →
the one fenced transaction that creates their documents and finishes the archive.

The plan (:func:`task_service.pipeline.readers.archive.plan.plan`) reads only the archive's
directory and refuses a bomb whole before anything is inflated (``ParseLimitError``); each member
is then inflated alone, bounded by its declared size (``open(name).read(size + 1)``), off the
event loop, one at a time (memory: the archive plus one member), and stored at once under
``kb/{kb}/arc/{task_id}-{generation}/{i}``: a retry of the same generation overwrites its objects
instead of adding. The run ends in ``WorkerStore.expand_archive``: every member's document, task
and outbox row and the archive INDEXED, in one transaction fenced on the claim, or nothing. The
objects of a run fenced out, and of members the transaction did not create (they existed, or
the KB holds their bytes), are removed afterwards; what a crash leaves is the orphan sweep's.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Iterator, Sequence

from shared.domain import formats
from shared.domain.errors import StaleGenerationError, StorageUnavailableError
from shared.domain.messages import IndexMessage
from shared.domain.records import ArchiveCommit, ArchiveMember, Claim
from shared.faults import fault_point
from task_service.indexing.progress import Stage
from task_service.indexing.unit import ReportsProgress, RunDeps, UnitDone
from task_service.pipeline.readers.archive.plan import Member, Plan, members, plan

log = logging.getLogger(__name__)

__all__ = ["expand", "is_archive", "member_key"]


def is_archive(filename: str) -> bool:
    """Whether the worker expands a document of this (parser) file name instead of reading it."""
    fmt = formats.by_extension(formats.extension(filename))
    return fmt is not None and fmt.is_archive


def member_key(kb_id: int, claim: Claim, index: int) -> str:
    """The object key of the archive's ``index``-th accepted member in this run's generation."""
    return f"kb/{kb_id}/arc/{claim.task_id}-{claim.generation}/{index}"


async def expand(deps: RunDeps, msg: IndexMessage, claim: Claim, data: bytes, progress: ReportsProgress,
                 warnings: list[str]) -> UnitDone:
    """Expand the archive ``data`` of ``msg``'s document. ``warnings`` receives the plan's (the
    failure record keeps them). Raises ``ParseLimitError`` (a bomb or over the limits: nothing
    created), ``CorruptDocumentError``, ``StaleGenerationError`` (fenced out: nothing created)."""
    limits = deps.config.archive_limits
    await progress.report(Stage.PARSING)
    chosen = await asyncio.to_thread(plan, data, limits)
    warnings[:] = chosen.warnings()
    stored = await _store_members(deps, msg, claim, data, chosen)
    await progress.report(Stage.WRITING, 1.0)
    await fault_point("before_expand")
    with deps.metrics.stage("write"):
        done = await deps.store.expand_archive(ArchiveCommit(claim, msg.document_id, msg.kb_id, msg.user_id,
                                                             stored, tuple(warnings)))
    if done is None:
        await _remove(deps, [m.object_key for m in stored])
        raise StaleGenerationError("fenced out at the archive's expansion")
    warnings[:] = done.warnings
    await deps.publish_parts(list(done.rows))  # the members' task messages; the relay sends what this cannot
    await _remove(deps, done.unused)
    return UnitDone(f"archive expanded into {len(done.rows)} documents", 0, 0, indexed=True)


async def _store_members(deps: RunDeps, msg: IndexMessage, claim: Claim, data: bytes,
                         chosen: Plan) -> list[ArchiveMember]:
    """Inflate and store each accepted member (one at a time, off the loop)."""
    stored: list[ArchiveMember] = []
    entries = members(data, chosen, deps.config.archive_limits)
    while (entry := await asyncio.to_thread(_next, entries)) is not None:
        member, body = entry
        stored.append(await _store(deps, msg, claim, len(stored), member, body))
    return stored


def _next(entries: Iterator[tuple[Member, bytes]]) -> tuple[Member, bytes] | None:
    return next(entries, None)


async def _store(deps: RunDeps, msg: IndexMessage, claim: Claim, index: int, member: Member,
                 body: bytes) -> ArchiveMember:
    key = member_key(msg.kb_id, claim, index)
    mime = formats.by_kind(member.kind).mime
    await deps.objects.put_bytes(key, body, content_type=mime, tap=lambda _: None)
    return ArchiveMember(member.path, key, mime, len(body), hashlib.sha256(body).hexdigest())


async def _remove(deps: RunDeps, keys: Sequence[str]) -> None:
    """Remove objects no document names; best effort (the orphan sweep removes what fails)."""
    for key in keys:
        try:
            await deps.objects.remove(key)
        except StorageUnavailableError as exc:
            log.warning("archive member object not removed", extra={"key": key, "error": str(exc)})
