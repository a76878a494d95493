"""What every use case shares: :class:`Deps` (ports only), :class:`Limits`, the cap check and
the publish-after-commit fast path."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from shared.domain.errors import BrokerUnavailableError, InFlightLimitExceeded, StorageUnavailableError
from shared.domain.fencing import StaleThresholds
from shared.domain.records import OutboxRow
from shared.domain.states import ACTIVE
from shared.ports import ObjectRemover, Publisher, ReleasedObjects, TaskStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """The per-user in-flight cap, its 429 ``Retry-After`` (seconds) and the stale thresholds."""

    max_in_flight_per_user: int
    retry_after_s: int
    stale: StaleThresholds


@dataclass
class Deps:
    """What the use cases run against; built once by each entry point's composition root.
    ``publisher`` None: no broker connection (the outbox relay publishes)."""

    store: TaskStore
    objects: ObjectRemover
    publisher: Publisher | None
    limits: Limits
    released: ReleasedObjects
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))


def over_cap(deps: Deps, *, before_body: bool = False) -> InFlightLimitExceeded:
    """The refusal of a request over the user's in-flight cap."""
    return InFlightLimitExceeded(deps.limits.max_in_flight_per_user, deps.limits.retry_after_s,
                                 before_body=before_body)


async def check_in_flight(deps: Deps, user_id: int, task_id: int | None = None) -> None:
    """Cheap early refusal, before an upload body is read. Raises InFlightLimitExceeded
    (``before_body``) if the user is at the cap and ``task_id``, when given, is not itself in
    flight (re-arming it would add no work). The authoritative check is made again in the
    transaction that creates the work."""
    if task_id is not None:
        snap = await deps.store.load_task_snapshot(task_id)
        if snap is not None and snap.status in ACTIVE:
            return
    if await deps.store.count_in_flight(user_id) >= deps.limits.max_in_flight_per_user:
        raise over_cap(deps, before_body=True)


async def discard_object(deps: Deps, key: str) -> None:
    """Best-effort removal of an object no row refers to (a refused or failed upload)."""
    try:
        await deps.objects.remove(key)
    except StorageUnavailableError:
        log.warning("orphan object not removed from storage", extra={"object_key": key})


async def publish_now(deps: Deps, row: OutboxRow) -> bool:
    """Fast path after commit: publish with confirm, then mark the outbox row published.
    False (the relay will publish) when there is no broker or it did not confirm, or when the row
    is held for fair dispatch (its user has K tasks in the broker or running)."""
    if not row.released:
        log.info("message held for fair dispatch; the relay releases it when a slot frees")
        return False
    if deps.publisher is None:
        log.warning("no broker connection; the outbox relay will publish")
        return False
    try:
        await deps.publisher.publish(row.body, exchange=row.exchange, routing_key=row.routing_key,
                                     message_id=str(row.message_id), correlation_id=str(row.task_id),
                                     headers=row.headers)
    except BrokerUnavailableError as exc:
        log.warning("inline publish failed; the outbox relay will publish", extra={"error": str(exc)})
        return False
    task = asyncio.create_task(_mark_published(deps, row.id))
    _marking.add(task)
    task.add_done_callback(_marking.discard)
    return True


#: Outbox marks in flight (a reference keeps each task alive until it ends).
_marking: set[asyncio.Task[None]] = set()


async def flush_marks(timeout_s: float = 3.0) -> None:
    """Wait up to ``timeout_s`` seconds for the outbox marks still being written (shutdown, tests)."""
    if _marking:
        await asyncio.wait(set(_marking), timeout=timeout_s)


async def _mark_published(deps: Deps, outbox_id: int) -> None:
    """The outbox mark, off the request's latency (one round trip): if it is lost (crash,
    database down), the relay publishes the row again after ``relay_grace_s`` and the worker
    skips the duplicate (fenced by generation and claim)."""
    try:
        await deps.store.mark_published(outbox_id)
    except Exception as exc:
        log.warning("outbox row not marked published", extra={"outbox_id": outbox_id, "error": str(exc)})
