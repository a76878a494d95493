"""Use cases that write: create, rename and delete a knowledge base; create work: upload, replace content, reindex,
retry, delete, DLQ replay.

One module per use case (``documents``, ``knowledge_bases``, ``enqueue``, ``dead_letters``) over ``common``; the
package re-exports the public names (``from shared import usecases; usecases.retry(...)``).

Framework-free: they take :class:`Deps` (ports only) and raise :mod:`shared.domain.errors`
``ServiceError`` subclasses (``TaskNotFound``, ``EnqueueConflict``, ``InFlightLimitExceeded``,
``EnqueueContention``); the API maps those to HTTP in one table (``knowledge_service/
errors_http.py``), the DLQ CLI to its JSON answer. Each commits its rows (document, task, outbox)
in ONE transaction (the store's), then publishes inline as the fast path; if that publish fails
the outbox relay publishes later, so nothing is lost.
"""

from __future__ import annotations

from shared.usecases.common import Deps, Limits, check_in_flight, discard_object, flush_marks, publish_now
from shared.usecases.dead_letters import replay_dead_letter
from shared.usecases.documents import create_document, create_knowledge_base, delete_document, drop_pending
from shared.usecases.enqueue import EnqueueResult, reindex, replace_content, request_enqueue, retry
from shared.usecases.knowledge_bases import delete_knowledge_base, rename_knowledge_base

__all__ = [
    "Deps",
    "EnqueueResult",
    "Limits",
    "check_in_flight",
    "create_document",
    "create_knowledge_base",
    "delete_document",
    "delete_knowledge_base",
    "discard_object",
    "drop_pending",
    "flush_marks",
    "publish_now",
    "reindex",
    "rename_knowledge_base",
    "replace_content",
    "replay_dead_letter",
    "request_enqueue",
    "retry",
]
