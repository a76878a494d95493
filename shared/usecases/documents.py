"""Knowledge bases and documents: create a KB, create a document for an upload, delete one, drop
its pending version."""

from __future__ import annotations

import logging
from typing import Any

from shared.domain.errors import PendingVersionNotFound
from shared.domain.messages import IndexMessage
from shared.domain.records import Duplicate, NewContent
from shared.faults import fault_point
from shared.log import bind
from shared.usecases.common import Deps, discard_object, over_cap, publish_now

log = logging.getLogger(__name__)


async def create_knowledge_base(deps: Deps, user_id: int, name: str, *, model: str, dim: int) -> dict[str, Any]:
    """A new knowledge base of ``user_id`` whose vectors are ``model``'s (``dim`` floats):
    ``{"kb_id", "name", "embedding_model", "embedding_dim", "create_time"}``."""
    return await deps.store.create_knowledge_base(user_id, name, model, dim)


async def create_document(
    deps: Deps, *, user_id: int, kb_id: int, obj: NewContent, allow_duplicate: bool = False
) -> IndexMessage | Duplicate:
    """Rows for an upload stored under ``obj.object_key``, within the user's in-flight cap
    (InFlightLimitExceeded otherwise). The object is removed when no row ends up referring to it.

    Unless ``allow_duplicate``, bytes equal (SHA-256) to a document's of the same KB give that
    document (:class:`Duplicate`): nothing is created and the object is removed.
    """
    try:
        created = await deps.store.create_document(
            user_id=user_id, kb_id=kb_id, content=obj, in_flight_limit=deps.limits.max_in_flight_per_user,
            dedup=not allow_duplicate,
        )
        if created is None:
            raise over_cap(deps)
    except BaseException:
        await discard_object(deps, obj.object_key)
        raise
    if isinstance(created, Duplicate):
        await discard_object(deps, obj.object_key)
        log.info("duplicate upload", extra={"document_id": created.document_id, "size_bytes": obj.size_bytes})
        return created
    msg, row = created
    with bind(task_id=msg.task_id, document_id=msg.document_id, generation=msg.generation):
        log.info("document uploaded", extra={"size_bytes": obj.size_bytes})
        await fault_point("after_commit_before_publish")
        await publish_now(deps, row)
    return msg


async def delete_document(deps: Deps, document_id: int) -> None:
    """Delete the document (rows at once, in-flight work fenced out; objects after commit, best
    effort: what fails is left to the sweep). Already gone is fine."""
    if await deps.store.delete_document(document_id):
        log.info("document deleted", extra={"document_id": document_id})
        await deps.released.remove_released()


async def drop_pending(deps: Deps, document_id: int) -> None:
    """Drop the document's pending version (its run, if any, is fenced out; its object removed
    after commit). Raises PendingVersionNotFound (none, or the document was deleted meanwhile)."""
    if not await deps.store.drop_pending(document_id):
        raise PendingVersionNotFound()
    log.info("pending version dropped", extra={"document_id": document_id})
    await deps.released.remove_released()
