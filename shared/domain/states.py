"""Task and document states and the allowed transitions (pure; no I/O).

Every status write in the database is a conditional ``UPDATE ... WHERE status IN (sources)``
whose source set comes from :func:`sources_for`, so a forbidden transition (SUCCESS→RUNNING,
FAILED→SUCCESS, WAITING→SUCCESS, ...) cannot be written even by a confused caller.
Cf. celery ``celery/states.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class TaskStatus(StrEnum):
    WAITING = "WAITING"  # message published (or in the outbox), not yet claimed
    RUNNING = "RUNNING"  # claimed by a worker (attempt bumped)
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    RETRYING = "RETRYING"  # manual retry issued, message re-published
    TIMEOUT = "TIMEOUT"  # the scanner, the unit's budget or the stall timeout stopped it


class DocumentStatus(StrEnum):
    UPLOADED = "UPLOADED"  # stored, never indexed (only rows backfilled by migration 0002)
    INDEXING = "INDEXING"
    INDEXED = "INDEXED"
    FAILED = "FAILED"


T = TaskStatus

#: Claimable from a delivery. RUNNING is claimable by whoever holds the document lock: the
#: previous holder is dead or paused, and its later writes are fenced out by ``attempt``.
CLAIMABLE: frozenset[TaskStatus] = frozenset({T.WAITING, T.RETRYING, T.RUNNING})
#: In flight: counts against the per-user cap; a reindex/retry answers with it unless stale.
ACTIVE: frozenset[TaskStatus] = frozenset({T.WAITING, T.RETRYING, T.RUNNING})
QUEUED: frozenset[TaskStatus] = frozenset({T.WAITING, T.RETRYING})
TERMINAL: frozenset[TaskStatus] = frozenset({T.SUCCESS, T.FAILED, T.TIMEOUT})
#: Manual retry is allowed only from these.
RETRYABLE: frozenset[TaskStatus] = frozenset({T.FAILED, T.TIMEOUT})

#: current status -> statuses it may move to.
TRANSITIONS: Mapping[TaskStatus, frozenset[TaskStatus]] = {
    # re-armed (takeover/new content) or claimed; dead-lettered → FAILED
    T.WAITING: frozenset({T.WAITING, T.RUNNING, T.FAILED}),
    T.RETRYING: frozenset({T.WAITING, T.RUNNING, T.FAILED}),
    # finished, failed, timed out, reclaimed after a crash, or re-armed by takeover/new content
    T.RUNNING: frozenset({T.RUNNING, T.SUCCESS, T.FAILED, T.TIMEOUT, T.WAITING}),
    # only new content or a forced reindex starts a new round
    T.SUCCESS: frozenset({T.WAITING}),
    T.FAILED: frozenset({T.RETRYING, T.WAITING}),
    T.TIMEOUT: frozenset({T.RETRYING, T.WAITING}),
}


def can_transition(current: TaskStatus, target: TaskStatus) -> bool:
    """True if ``current → target`` is allowed by :data:`TRANSITIONS`."""
    return target in TRANSITIONS[current]


def sources_for(target: TaskStatus) -> list[str]:
    """The statuses from which ``target`` may be written, as strings for ``status = ANY($n)``."""
    return sorted(s.value for s, targets in TRANSITIONS.items() if target in targets)
