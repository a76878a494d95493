"""The knowledge-base lifecycle: rename one, delete one with everything in it (issue 18)."""

from __future__ import annotations

import logging
from typing import Any

from shared.domain.errors import KnowledgeBaseNotFound
from shared.usecases.common import Deps

log = logging.getLogger(__name__)

#: Objects removed before the delete answers (about 4 requests per object to the store); a
#: bigger knowledge base's remaining objects stay queued for the worker's sweep.
DELETE_OBJECTS_NOW = 1000


async def rename_knowledge_base(deps: Deps, user_id: int, kb_id: int, name: str) -> dict[str, Any]:
    """Rename ``user_id``'s knowledge base; its new row (``{"kb_id", "name", "embedding_model",
    "embedding_dim", "create_time"}``). Raises KnowledgeBaseNotFound (none, or another user's)."""
    row = await deps.store.rename_knowledge_base(user_id, kb_id, name)
    if row is None:
        raise KnowledgeBaseNotFound()
    return row


async def delete_knowledge_base(deps: Deps, user_id: int, kb_id: int) -> int:
    """Delete ``user_id``'s knowledge base with its documents, versions, tasks, chunks, vectors
    and the owner's embedding-cache entries no other chunk of theirs needs, at once (runs in
    flight are fenced out and commit nothing); then its objects, best effort (what fails is left
    to the sweep). Returns the documents deleted. Raises KnowledgeBaseNotFound (none, already
    deleted, or another user's: a second delete is a 404, with nothing changed)."""
    deleted = await deps.store.delete_knowledge_base(user_id, kb_id)
    if deleted is None:
        raise KnowledgeBaseNotFound()
    log.info("knowledge base deleted", extra={"kb_id": kb_id, "documents": deleted})
    await deps.released.remove_released(at_most=DELETE_OBJECTS_NOW)
    return deleted
