"""What the recovery scanner does with an active task (pure; no I/O).

* RUNNING without a heartbeat (``update_time``) for ``heartbeat_timeout``, or running longer than
  ``hard_limit`` → TIMEOUT (the worker is dead, paused, or stuck; its later commit is fenced).
* WAITING / RETRYING untouched for ``requeue_after`` → re-publish the same generation (queued age
  is not running time, onyx#12507: never time a queued task out). A duplicate this creates is
  skipped by the worker at no embedding cost.
* A split task (ARCHITECTURE.md "Flow 3") is never timed out as a whole: its parts are watched
  (:func:`decide_part_scan`). A RUNNING part silent for ``heartbeat_timeout`` is re-armed WAITING
  and re-published (its worker vanished; the next claim's attempt fences the old one out); a
  dispatched WAITING part untouched for ``requeue_after`` is re-published (its message was lost);
  a part still held for fair dispatch is the relay's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from shared.domain.states import QUEUED, TaskStatus


@dataclass(frozen=True)
class ScanThresholds:
    heartbeat_timeout: timedelta = timedelta(minutes=5)
    #: the oldest a live claim of an unsplit task can be: PREFETCH x the largest unit's budget
    #: (shared.domain.time_budget.delivery_bound_s: 2 x (300 + 511 x 0.5) s with the defaults)
    hard_limit: timedelta = timedelta(seconds=2 * (300 + 511 * 0.5))
    requeue_after: timedelta = timedelta(minutes=10)


class ScanAction(StrEnum):
    NONE = "none"
    TIMEOUT = "timeout"
    REPUBLISH = "republish"
    REARM = "rearm"  # a part: back to WAITING, and re-published


@dataclass(frozen=True)
class ScanDecision:
    action: ScanAction
    reason: str = ""


def decide_scan(
    status: TaskStatus, start_time: datetime | None, update_time: datetime, now: datetime, th: ScanThresholds
) -> ScanDecision:
    """Decide one active task; ``now`` and the row's times come from the same (database) clock."""
    if status is TaskStatus.RUNNING:
        silent = now - update_time
        if silent > th.heartbeat_timeout:
            return ScanDecision(ScanAction.TIMEOUT, f"no heartbeat for {silent.total_seconds():.0f} s")
        if start_time is not None and now - start_time > th.hard_limit:
            return ScanDecision(
                ScanAction.TIMEOUT, f"running longer than the hard limit of {th.hard_limit.total_seconds():.0f} s"
            )
        return ScanDecision(ScanAction.NONE)
    if status in QUEUED and now - update_time > th.requeue_after:
        return ScanDecision(ScanAction.REPUBLISH, f"queued for {(now - update_time).total_seconds():.0f} s")
    return ScanDecision(ScanAction.NONE)


def decide_part_scan(
    status: str, dispatched: bool, update_time: datetime, now: datetime, th: ScanThresholds
) -> ScanDecision:
    """Decide one part not DONE (``status`` WAITING or RUNNING; ``dispatched``: it holds a
    dispatch slot, so its message was released); times from the database clock."""
    quiet = now - update_time
    if status == "RUNNING" and quiet > th.heartbeat_timeout:
        return ScanDecision(ScanAction.REARM, f"part silent for {quiet.total_seconds():.0f} s")
    if status == "WAITING" and dispatched and quiet > th.requeue_after:
        return ScanDecision(ScanAction.REPUBLISH, f"part queued for {quiet.total_seconds():.0f} s")
    return ScanDecision(ScanAction.NONE)
