"""Fixtures of the integration tier: a pool, extra connections and a Redis client on the test resources."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

import asyncpg
import pytest
import redis.asyncio as aioredis
from pgvector.asyncpg import register_vector

from shared.adapters.postgres.pool import PoolConfig, create_pool
from shared.settings import KnowledgeSettings


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
async def pool(settings: KnowledgeSettings) -> AsyncIterator[asyncpg.Pool]:
    """A production pool (pgvector codec, statement timeout) on the test database, with 12 connections
    open up front so that concurrent racers really overlap instead of queueing behind connection setup."""
    p = await create_pool(replace(PoolConfig.from_settings(settings, max_size=12), min_size=12))
    yield p
    await p.close()


Connect = Callable[[], Awaitable[asyncpg.Connection]]


@pytest.fixture
async def connect(services_env: dict[str, str]) -> AsyncIterator[Connect]:
    """Open extra connections to the test database (pgvector codec); all closed after the test."""
    opened: list[asyncpg.Connection] = []

    async def _connect() -> asyncpg.Connection:
        conn = await asyncpg.connect(services_env["DATABASE_URL"])
        await register_vector(conn)
        opened.append(conn)
        return conn

    yield _connect
    for conn in opened:
        await conn.close()


@pytest.fixture
async def redis_client(settings: KnowledgeSettings) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(settings.redis_url.get_secret_value())
    yield client
    await client.aclose()
