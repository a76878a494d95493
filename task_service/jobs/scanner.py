"""Recovery scanner: times out dead RUNNING tasks, re-publishes forgotten queued ones, re-arms and
re-publishes the parts of a split task whose worker vanished or whose message was lost (a split
task is never timed out as a whole), and turns dead-lettered messages into FAILED tasks (kept in
``dead_letter`` for the DLQ CLI; a dead-lettered part fails its task and drops the split).

Runs every ``SCAN_INTERVAL_S`` inside each worker (conditional updates make concurrent scanners
safe); ``rag ops scanner --once`` runs one pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import asyncpg
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage

from shared.adapters import rabbitmq
from shared.adapters.postgres.pool import connection, row_locked
from shared.adapters.postgres.repo import dead_letters as dead_letters_repo
from shared.adapters.postgres.repo import parts as parts_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.domain import messages
from shared.domain.errors import DeliveryLimitError, TaskTimeoutError, TransientError
from shared.domain.messages import IndexMessage, InvalidMessageError
from shared.domain.records import Claim
from shared.domain.scan_policy import ScanAction, ScanThresholds, decide_part_scan, decide_scan
from shared.domain.states import TaskStatus
from shared.domain.time_budget import delivery_bound_s
from shared.log import bind
from shared.settings import WorkerSettings
from task_service.metrics import WorkerMetrics

log = logging.getLogger(__name__)
#: what ends a pass as an outage (a warning; the next pass tries again): the database's, and the
#: broker's while the DLQ is drained (a channel closed under it)
ERRORS: tuple[type[BaseException], ...] = (TransientError, *rabbitmq.BROKER_ERRORS)


@dataclass
class ScanReport:
    timed_out: list[int] = field(default_factory=list)
    republished: list[int] = field(default_factory=list)
    dead_lettered: list[int] = field(default_factory=list)
    rearmed_parts: list[tuple[int, int]] = field(default_factory=list)  # (task_id, part)
    republished_parts: list[tuple[int, int]] = field(default_factory=list)


def thresholds(s: WorkerSettings) -> ScanThresholds:
    # A claim waits for at most PREFETCH - 1 other model turns (indexing.model_turn), each within
    # its own unit's budget: PREFETCH x the largest unit's budget is the oldest a live claim of an
    # unsplit task can be (time_budget.delivery_bound_s).
    bound = delivery_bound_s(s.prefetch, s.task_budget_base_s, s.task_budget_per_chunk_s, s.split_min_chunks,
                             s.part_chunks)
    return ScanThresholds(
        heartbeat_timeout=timedelta(seconds=s.running_heartbeat_timeout_s),
        hard_limit=timedelta(seconds=bound),
        requeue_after=timedelta(seconds=s.requeue_after_s),
    )


async def scan_tasks(pool: asyncpg.Pool, th: ScanThresholds, report: ScanReport) -> None:
    """One pass over active tasks older than the smallest threshold, each in its own short
    transaction: a task whose rows another session holds locked (a worker partitioned inside its
    commit) is passed over after ``DB_LOCK_TIMEOUT_S`` and left to the next pass; the others are
    handled. Any other database failure ends the pass (TransientError)."""
    oldest = min(th.heartbeat_timeout, th.hard_limit, th.requeue_after).total_seconds()
    async with connection(pool) as conn:
        rows = await tasks_repo.active_tasks_older_than(conn, oldest, 500)
    for r in rows:
        decision = decide_scan(TaskStatus(r["status"]), r["start_time"], r["update_time"], r["now"], th)
        if decision.action is ScanAction.NONE:
            continue
        with bind(task_id=r["id"], document_id=r["document_id"], generation=r["generation"], attempt=r["attempt"]):
            try:
                async with connection(pool) as conn:
                    await _apply(conn, r, decision.action, decision.reason, report)
            except TransientError as exc:
                if not row_locked(exc):
                    raise
                log.warning("task passed over: its rows are locked by another session", extra={"error": str(exc)})


async def scan_parts(pool: asyncpg.Pool, th: ScanThresholds, report: ScanReport) -> None:
    """One pass over the open parts of split tasks (``scan_policy.decide_part_scan``), each in
    its own short transaction; locked rows are passed over as in :func:`scan_tasks`."""
    oldest = min(th.heartbeat_timeout, th.requeue_after).total_seconds()
    async with connection(pool) as conn:
        rows = await parts_repo.open_parts_older_than(conn, oldest, 500)
    for r in rows:
        decision = decide_part_scan(r["status"], r["dispatched"], r["update_time"], r["now"], th)
        if decision.action is ScanAction.NONE:
            continue
        rearm = decision.action is ScanAction.REARM
        with bind(task_id=r["task_id"], document_id=r["document_id"], generation=r["generation"],
                  part=r["part"], attempt=r["attempt"]):
            try:
                async with connection(pool) as conn:
                    row = await parts_repo.republish_part(conn, r["task_id"], r["part"], r["generation"],
                                                          r["status"], r["update_time"], rearm=rearm)
            except TransientError as exc:
                if not row_locked(exc):
                    raise
                log.warning("part passed over: its rows are locked by another session", extra={"error": str(exc)})
                continue
            if row is not None:
                log.warning("part re-armed and re-published" if rearm else "queued part re-published",
                            extra={"reason": decision.reason})
                (report.rearmed_parts if rearm else report.republished_parts).append((r["task_id"], r["part"]))


async def _apply(conn: asyncpg.Connection, r: asyncpg.Record, action: ScanAction, reason: str,
                 report: ScanReport) -> None:
    """Time out or re-publish one task the scan decided on (conditional: concurrent scanners act once)."""
    if action is ScanAction.TIMEOUT:
        if await tasks_repo.finish_unsuccessfully(
            conn, Claim(r["id"], r["generation"], r["attempt"]), document_id=r["document_id"],
            status=TaskStatus.TIMEOUT, error_code=TaskTimeoutError.error_code,
            error_message=f"timed out by the scanner: {reason}",
        ):
            log.warning("task timed out", extra={"reason": reason})
            report.timed_out.append(r["id"])
    elif action is ScanAction.REPUBLISH:
        if await tasks_repo.requeue_task(conn, r["id"], r["status"], r["generation"], r["update_time"]):
            log.warning("queued task re-published", extra={"reason": reason})
            report.republished.append(r["id"])


def _death_reason(message: AbstractIncomingMessage) -> str:
    """Why the message was dead-lettered: our own header (limits counted across re-publishes),
    else the broker's ``x-death`` reason (``rejected``, ``delivery_limit``, ``expired``, ...)."""
    headers = message.headers or {}
    if headers.get(messages.DEAD_REASON_HEADER):
        return str(headers[messages.DEAD_REASON_HEADER])
    deaths: Any = headers.get("x-death") or []
    return str(deaths[0].get("reason", "unknown")) if deaths else "unknown"


async def drain_dead_letters(pool: asyncpg.Pool, channel: AbstractChannel, report: ScanReport) -> None:
    """Move every message of ``rag.index.dlq`` into ``dead_letter``; a delivery-limit death fails
    its task (``delivery_limit``). Acked only after the row is committed."""
    queue = await channel.get_queue(messages.DLQ, ensure=False)
    while (message := await queue.get(no_ack=False, fail=False, timeout=10)) is not None:
        reason = _death_reason(message)
        try:
            msg: IndexMessage | None = IndexMessage.from_json(message.body)
        except InvalidMessageError:
            msg = None
        async with connection(pool) as conn:
            dl_id = await dead_letters_repo.record_dead_letter(
                conn, message_id=message.message_id, msg=msg, reason=reason, body=message.body,
                headers={k: v for k, v in (message.headers or {}).items() if k != "x-death"},
            )
            if msg is not None and reason == DeliveryLimitError.error_code:
                text = (f"message dead-lettered after more than {messages.DELIVERY_LIMIT} failed deliveries "
                        "(a worker crashed or was killed on it each time)")
                code = DeliveryLimitError.error_code
                if await tasks_repo.fail_dead_lettered(conn, msg.task_id, msg.generation, code, text):
                    report.dead_lettered.append(msg.task_id)
        log.warning("dead letter recorded", extra={"dead_letter_id": dl_id, "reason": reason})
        await message.ack()


async def once(pool: asyncpg.Pool, channel: AbstractChannel | None, th: ScanThresholds,
               metrics: WorkerMetrics | None = None) -> ScanReport:
    """Time out, re-publish (outbox rows) and drain the DLQ once; what it ended is counted in
    ``rag_tasks_finished_total`` when ``metrics`` is given."""
    report = ScanReport()
    await scan_tasks(pool, th, report)
    await scan_parts(pool, th, report)
    if channel is not None:
        await drain_dead_letters(pool, channel, report)
    if metrics is not None:
        for _ in report.timed_out:
            metrics.finished(TaskStatus.TIMEOUT.value, "timeout")
        for _ in report.dead_lettered:
            metrics.finished(TaskStatus.FAILED.value, "delivery_limit")
    return report


@dataclass(frozen=True)
class ScanConfig:
    """The scanner job's settings: ``SCAN_INTERVAL_S`` (seconds; 0 disables) and the thresholds."""

    interval_s: float
    thresholds: ScanThresholds

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> ScanConfig:
        return cls(interval_s=s.scan_interval_s, thresholds=thresholds(s))
