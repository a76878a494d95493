"""Session-wide isolation for the integration and e2e tiers.

Tests never touch the demo's data: database ``rag_test`` (recreated), RabbitMQ vhost
``rag_test`` (recreated), Redis DB 15 (flushed), bucket ``rag-test``. Unit tests need none of it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import redis as sync_redis

from shared.settings import KnowledgeSettings
from tests.support import MGMT, MGMT_AUTH, TEST_DB, VHOST

TEST_OVERRIDES = {
    "DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{TEST_DB}",
    "AMQP_URL": f"amqp://guest:guest@127.0.0.1:5672/{VHOST}",
    "REDIS_URL": "redis://127.0.0.1:6379/15",
    "S3_BUCKET": "rag-test",
    "LOG_JSON": "true",
    "LOG_LEVEL": "INFO",
}


def _needs_services(items: list[pytest.Item]) -> bool:
    return any("/integration/" in str(i.fspath) or "/e2e/" in str(i.fspath) for i in items)


async def _recreate_database() -> None:
    admin = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres")
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            TEST_DB,
        )
        await admin.execute(f'DROP DATABASE IF EXISTS "{TEST_DB}"')
        await admin.execute(f'CREATE DATABASE "{TEST_DB}"')
    finally:
        await admin.close()


def _recreate_vhost() -> None:
    with httpx.Client(base_url=MGMT, auth=MGMT_AUTH, timeout=30) as c:
        c.delete(f"/api/vhosts/{VHOST}")
        r = c.put(f"/api/vhosts/{VHOST}", json={})
        r.raise_for_status()
        r = c.put(f"/api/permissions/{VHOST}/guest", json={"configure": ".*", "write": ".*", "read": ".*"})
        r.raise_for_status()


@pytest.fixture(scope="session")
def services_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """Env vars pointing every service and process at the isolated test resources."""
    os.environ.update(TEST_OVERRIDES)
    asyncio.run(_recreate_database())
    _recreate_vhost()
    sync_redis.Redis.from_url(TEST_OVERRIDES["REDIS_URL"]).flushdb()
    from shared.migrate import migrate

    asyncio.run(migrate(TEST_OVERRIDES["DATABASE_URL"]))
    yield dict(TEST_OVERRIDES)


@pytest.fixture(scope="session")
def settings(services_env: dict[str, str]) -> KnowledgeSettings:
    return KnowledgeSettings()


@pytest.fixture
async def db(services_env: dict[str, str]) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(services_env["DATABASE_URL"])
    from pgvector.asyncpg import register_vector

    await register_vector(conn)
    yield conn
    await conn.close()


@pytest.fixture(scope="session")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logs")
