"""Dead letters: replay one as a forced retry (the DLQ CLI)."""

from __future__ import annotations

from shared.domain.errors import EnqueueContention, TaskNotFound
from shared.domain.fencing import EnqueueRequest, RequestKind
from shared.usecases.common import Deps
from shared.usecases.enqueue import request_enqueue


async def replay_dead_letter(deps: Deps, dead_letter_id: int) -> dict[str, object]:
    """Re-run the task of a dead letter: a forced retry (new generation, new message, within
    the user's cap) — never the old message, whose generation is spent.

    Returns the CLI's JSON answer: ``{"replayed": True, "task_id", "generation"}`` or
    ``{"replayed": False, "detail", ["task_status"]}``. Raises InFlightLimitExceeded.
    """
    dead = await deps.store.pending_dead_letter(dead_letter_id)
    if dead is None:
        return {"replayed": False, "detail": "no such pending dead letter"}
    if dead.task_id is None:
        return {"replayed": False, "detail": "message was not a valid index message; nothing to replay"}
    try:
        result = await request_enqueue(deps, dead.task_id, EnqueueRequest(RequestKind.RETRY, force=True))
    except TaskNotFound:
        return {"replayed": False, "detail": "task no longer exists (document deleted)"}
    except EnqueueContention:
        return {"replayed": False, "detail": "task changed concurrently; try again"}
    if result.message is None:
        snap = await deps.store.load_task_snapshot(dead.task_id)
        status = snap.status.value if snap is not None else None
        return {"replayed": False, "detail": result.reason, "task_status": status}
    await deps.store.mark_dead_letter_replayed(dead_letter_id)
    return {"replayed": True, "task_id": result.message.task_id, "generation": result.message.generation}
