"""What the recovery scanner does with an active task (pure; no I/O).

* RUNNING without a heartbeat (``update_time``) for ``heartbeat_timeout``, or running longer than
  ``hard_limit`` → TIMEOUT (the worker is dead, paused, or stuck; its later commit is fenced).
* WAITING / RETRYING untouched for ``requeue_after`` → re-publish the same generation (queued age
  is not running time, onyx#12507: never time a queued task out). A duplicate this creates is
  skipped by the worker at no embedding cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from shared.domain.states import QUEUED, TaskStatus


@dataclass(frozen=True)
class ScanThresholds:
    heartbeat_timeout: timedelta = timedelta(minutes=5)
    hard_limit: timedelta = timedelta(seconds=2 * 850)  # PREFETCH x TASK_HARD_LIMIT_S: a claim may wait one model turn
    requeue_after: timedelta = timedelta(minutes=10)


class ScanAction(StrEnum):
    NONE = "none"
    TIMEOUT = "timeout"
    REPUBLISH = "republish"


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
