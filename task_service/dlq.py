"""Dead letters for the operator CLI: ``rag dlq list`` and ``rag dlq replay ID`` (``rag_cli``).

The scanner moves messages from ``rag.index.dlq`` into the ``dead_letter`` table (their tasks
FAILED with the reason). ``replay`` re-runs the task after a fix: a forced retry, i.e. a new
generation and a new message — never the old message, whose generation is spent.
"""

from __future__ import annotations

import logging

from shared import usecases
from shared.adapters import rabbitmq
from shared.adapters.postgres.pool import PoolConfig, create_pool, session
from shared.adapters.postgres.repo import dead_letters as dead_letters_repo
from shared.adapters.s3 import ObjectStore, StorageConfig
from shared.bootstrap import usecase_deps
from shared.domain.errors import BrokerUnavailableError, InFlightLimitExceeded
from shared.settings import WorkerSettings
from task_service import APP_ID

log = logging.getLogger(__name__)


async def list_dead(settings: WorkerSettings, include_replayed: bool) -> list[dict[str, object]]:
    async with session(PoolConfig.from_settings(settings), app_name="task_service.dlq") as conn:
        return [dict(r.items()) for r in await dead_letters_repo.list_dead_letters(conn, include_replayed)]


async def replay(settings: WorkerSettings, dead_letter_id: int) -> dict[str, object]:
    """Force-retry the task of a dead letter through the same use case as the API's retry
    (:func:`shared.usecases.replay_dead_letter`: per-user cap, race retry, outbox + publish)."""
    pool = await create_pool(PoolConfig.from_settings(settings, max_size=2), app_name="task_service.dlq")
    broker = None
    publisher = None
    try:
        try:
            broker = await rabbitmq.connect(settings.amqp_url.get_secret_value(), name="task_service.dlq",
                                        heartbeat_s=settings.amqp_heartbeat_s, robust=False)
            publisher = await rabbitmq.Publisher.open(broker, settings.amqp_publish_timeout_s, app_id=APP_ID)
        except BrokerUnavailableError as exc:  # the outbox relay publishes it later
            log.warning("broker unavailable; the replayed message stays in the outbox", extra={"error": str(exc)})
        deps = usecase_deps(settings, pool, ObjectStore(StorageConfig.from_settings(settings)), publisher)
        try:
            return await usecases.replay_dead_letter(deps, dead_letter_id)
        except InFlightLimitExceeded as exc:
            return {"replayed": False, "detail": str(exc)}
    finally:
        if broker is not None:
            await broker.close()
        await pool.close()
