"""Dead letters for the operator CLI: ``rag dlq list`` and ``rag dlq replay ID`` (``rag_cli``).

The scanner moves messages from ``rag.index.dlq`` into the ``dead_letter`` table (their tasks
FAILED with the reason). ``replay`` re-runs the task after a fix: a forced retry, i.e. a new
generation and a new message — never the old message, whose generation is spent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from shared import usecases
from shared.adapters import rabbitmq
from shared.adapters.postgres.pool import PoolConfig, create_pool, session
from shared.adapters.postgres.repo import dead_letters as dead_letters_repo
from shared.adapters.s3 import ObjectStore, StorageConfig
from shared.bootstrap import UsecaseConfig, usecase_deps
from shared.domain.errors import BrokerUnavailableError, InFlightLimitExceeded
from shared.settings import WorkerSettings
from task_service import APP_ID

log = logging.getLogger(__name__)
NAME = "task_service.dlq"


@dataclass(frozen=True)
class DlqConfig:
    """What the DLQ tool opens: a small pool (2 connections), the object store, the broker, and
    the use cases' policy (the API's retry rules apply to a replay)."""

    pool: PoolConfig
    storage: StorageConfig
    broker: rabbitmq.BrokerConfig
    usecases: UsecaseConfig

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> DlqConfig:
        return cls(pool=PoolConfig.from_settings(s, max_size=2), storage=StorageConfig.from_settings(s),
                   broker=rabbitmq.BrokerConfig.from_settings(s), usecases=UsecaseConfig.from_settings(s))


async def list_dead(config: DlqConfig, include_replayed: bool) -> list[dict[str, object]]:
    async with session(config.pool, app_name=NAME) as conn:
        return [dict(r.items()) for r in await dead_letters_repo.list_dead_letters(conn, include_replayed)]


async def replay(config: DlqConfig, dead_letter_id: int) -> dict[str, object]:
    """Force-retry the task of a dead letter through the same use case as the API's retry
    (:func:`shared.usecases.replay_dead_letter`: per-user cap, race retry, outbox + publish)."""
    pool = await create_pool(config.pool, app_name=NAME)
    broker = None
    publisher = None
    try:
        try:
            broker = await rabbitmq.open_connection(config.broker, name=NAME)
            publisher = await rabbitmq.open_publisher(config.broker, broker, app_id=APP_ID)
        except BrokerUnavailableError as exc:  # the outbox relay publishes it later
            log.warning("broker unavailable; the replayed message stays in the outbox", extra={"error": str(exc)})
        deps = usecase_deps(config.usecases, pool, ObjectStore(config.storage), publisher)
        try:
            return await usecases.replay_dead_letter(deps, dead_letter_id)
        except InFlightLimitExceeded as exc:
            return {"replayed": False, "detail": str(exc)}
    finally:
        if broker is not None:
            await broker.close()
        await pool.close()
