"""Set-up shared by the one-pass commands (``relay --once``, ``scanner --once``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import asyncpg
from aio_pika.abc import AbstractChannel, AbstractConnection

from shared.adapters import rabbitmq
from shared.adapters.postgres.pool import PoolConfig, create_pool
from shared.log import configure
from shared.settings import WorkerSettings

OneShot = tuple[WorkerSettings, asyncpg.Pool, AbstractConnection, AbstractChannel]


@contextlib.asynccontextmanager
async def one_shot(name: str) -> AsyncIterator[OneShot]:
    """Settings, a small pool and a broker connection with the topology declared; all closed after."""
    settings = WorkerSettings()
    configure(settings.log_level, json_lines=settings.log_json)
    pool = await create_pool(PoolConfig.from_settings(settings, max_size=2), app_name=name)
    conn = await rabbitmq.connect(settings.amqp_url.get_secret_value(), name=name,
                              heartbeat_s=settings.amqp_heartbeat_s, robust=False)
    try:
        channel = await conn.channel()
        await rabbitmq.declare_topology(channel, delay_ms=settings.delay_ms)
        yield settings, pool, conn, channel
    finally:
        await conn.close()
        await pool.close()
