"""Enqueue requests on an existing task: new content, reindex, retry (decide, then apply)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from shared.domain.errors import EnqueueConflict, EnqueueContention, TaskNotFound
from shared.domain.fencing import Action, EnqueueRequest, RequestKind, decide_enqueue
from shared.domain.messages import IndexMessage
from shared.domain.records import NewContent
from shared.domain.states import ACTIVE
from shared.log import bind
from shared.ports import IssueRefused
from shared.usecases.common import Deps, discard_object, over_cap, publish_now

log = logging.getLogger(__name__)

#: Attempts of the read–decide–apply loop before concurrent requests are reported as contention.
ENQUEUE_ATTEMPTS = 8


@dataclass(frozen=True)
class EnqueueResult:
    action: Action
    reason: str
    message: IndexMessage | None


async def request_enqueue(
    deps: Deps, task_id: int, request: EnqueueRequest, content: NewContent | None = None
) -> EnqueueResult:
    """Decide (pure) and apply (conditional update) a retry / reindex / new-content request.

    A lost race (another request moved the task first) re-reads and decides again, so N
    concurrent requests make exactly one transition and publish one message. Re-arming a task
    that is not in flight adds work, and so does new content (another upload to store and
    index, even over an active task): either must fit under the user's cap.

    Raises TaskNotFound, InFlightLimitExceeded, EnqueueContention (still racing after
    :data:`ENQUEUE_ATTEMPTS` reads).
    """
    for _ in range(ENQUEUE_ATTEMPTS):
        snap = await deps.store.load_task_snapshot(task_id)
        if snap is None:
            raise TaskNotFound()
        decision = decide_enqueue(snap, request, deps.clock(), deps.limits.stale)
        if decision.action is not Action.ISSUE:
            return EnqueueResult(decision.action, decision.reason, None)
        # already counted when in flight: a takeover adds no work
        cap = None if snap.status in ACTIVE and content is None else deps.limits.max_in_flight_per_user
        issued = await deps.store.issue_generation(snap, decision, content, in_flight_limit=cap)
        if issued is IssueRefused.OVER_CAP:
            raise over_cap(deps)
        if isinstance(issued, IssueRefused):
            continue
        msg, row = issued
        with bind(task_id=msg.task_id, document_id=msg.document_id, generation=msg.generation):
            log.info("generation issued", extra={"request": request.kind.value, "takeover": decision.takeover})
            await publish_now(deps, row)
        return EnqueueResult(Action.ISSUE, decision.reason, msg)
    raise EnqueueContention("the task kept changing under concurrent requests; try again")


async def replace_content(deps: Deps, task_id: int, content: NewContent) -> IndexMessage:
    """New content (already stored under ``content.object_key``) → new generation.

    A document with a served (INDEXED) version gets it as its pending version: the served one
    stays searchable, with its object, until the pending one commits. A document never indexed
    takes it over its own columns. The object this replaces (the previous pending one, or a
    never-indexed document's own) is removed after commit. The new object is removed if the
    request fails (InFlightLimitExceeded, document deleted meanwhile: TaskNotFound, ...).
    """
    try:
        result = await request_enqueue(deps, task_id, EnqueueRequest(RequestKind.NEW_CONTENT), content)
    except BaseException:
        await discard_object(deps, content.object_key)
        raise
    assert result.message is not None, "new content always issues a generation"
    await deps.released.remove_released()
    return result.message


async def reindex(deps: Deps, task_id: int, *, force: bool = False) -> EnqueueResult:
    """Reindex: a new generation, or (``action`` EXISTING/NOOP) the current task answers."""
    return await request_enqueue(deps, task_id, EnqueueRequest(RequestKind.REINDEX, force=force))


async def retry(deps: Deps, task_id: int, *, force: bool = False,
                expected_generation: int | None = None) -> IndexMessage:
    """Retry a FAILED/TIMEOUT task (new generation, RETRYING); with ``expected_generation`` only
    if the task is still at that generation (a double click retries once). Raises
    EnqueueConflict with the reason and the task's current status when refused (not
    retryable, limit reached, generation moved on)."""
    request = EnqueueRequest(RequestKind.RETRY, force=force, expected_generation=expected_generation)
    result = await request_enqueue(deps, task_id, request)
    if result.message is None:
        snap = await deps.store.load_task_snapshot(task_id)
        if snap is None:
            raise TaskNotFound()
        raise EnqueueConflict(result.reason, snap.status.value)
    return result.message
