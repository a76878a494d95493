"""The use cases' composition: ports and limits from settings, shared by every entry point that
creates work (the API's lifespan, the DLQ replay CLI). Built once per process."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from shared import usecases
from shared.adapters.postgres.pg_store import PgReleasedObjects, PgTaskStore
from shared.adapters.s3 import ObjectStore
from shared.domain.fencing import StaleThresholds
from shared.ports import Publisher
from shared.settings import CommonSettings


def enqueue_limits(settings: CommonSettings) -> usecases.Limits:
    """The per-user cap, its Retry-After and the stale thresholds, from settings (seconds)."""
    return usecases.Limits(
        max_in_flight_per_user=settings.max_in_flight_tasks_per_user,
        retry_after_s=settings.in_flight_retry_after_s,
        stale=StaleThresholds(queued=timedelta(seconds=settings.stale_waiting_s),
                              running=timedelta(seconds=settings.stale_running_s)),
    )


@dataclass(frozen=True)
class UsecaseConfig:
    """The enqueue policy (:func:`enqueue_limits`) and K, the fair-dispatch limit per user
    (``CommonSettings.dispatch_limit``)."""

    limits: usecases.Limits
    dispatch_limit: int

    @classmethod
    def from_settings(cls, s: CommonSettings) -> UsecaseConfig:
        return cls(limits=enqueue_limits(s), dispatch_limit=s.dispatch_limit)


def usecase_deps(
    config: UsecaseConfig, pool: asyncpg.Pool, objects: ObjectStore, publisher: Publisher | None
) -> usecases.Deps:
    """PostgreSQL store over ``pool``, the object store, the publisher (None: outbox only)."""
    return usecases.Deps(store=PgTaskStore(pool, config.dispatch_limit), objects=objects, publisher=publisher,
                         limits=config.limits, released=PgReleasedObjects(pool, objects))
