"""Session-wide isolation for the integration and e2e tiers.

Tests never touch the demo's data: each pytest session gets its own database, RabbitMQ vhost,
bucket and Redis DB (see ``tests.support.TEST_ID``), dropped when the session ends. Unit tests
need none of it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote

import asyncpg
import httpx
import pytest
import redis as sync_redis

from shared.settings import KnowledgeSettings
from tests.support import (
    MGMT,
    MGMT_AUTH,
    TEST_DB,
    TEST_ID,
    VHOST,
    amqp_url_for,
    claim_redis_db,
    redis_url_for,
    release_redis_db,
)


def session_overrides(redis_db: int) -> dict[str, str]:
    """Env vars pointing every service and process at this session's isolated resources."""
    return {
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{TEST_DB}",
        "AMQP_URL": amqp_url_for(VHOST),
        "REDIS_URL": redis_url_for(redis_db),
        "S3_BUCKET": f"rag-test-{TEST_ID}",
        "LOG_JSON": "true",
        "LOG_LEVEL": "INFO",
        # the product's defaults, whatever a developer's .env says: a large per-user queued cap
        # and fair dispatch with K = 2 x 1 worker
        "MAX_IN_FLIGHT_TASKS_PER_USER": "10000",
        "DISPATCH_WORKERS": "1",
    }


async def _drop_database() -> None:
    admin = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres")
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            TEST_DB,
        )
        await admin.execute(f'DROP DATABASE IF EXISTS "{TEST_DB}"')
    finally:
        await admin.close()


async def _recreate_database() -> None:
    await _drop_database()
    admin = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/postgres")
    try:
        await admin.execute(f'CREATE DATABASE "{TEST_DB}"')
    finally:
        await admin.close()


def _recreate_vhost() -> None:
    with httpx.Client(base_url=MGMT, auth=MGMT_AUTH, timeout=30) as c:
        c.delete(f"/api/vhosts/{VHOST}")
        r = c.put(f"/api/vhosts/{VHOST}", json={})
        r.raise_for_status()
        r = c.put(f"/api/permissions/{VHOST}/{quote(MGMT_AUTH[0], safe='')}",
                  json={"configure": ".*", "write": ".*", "read": ".*"})
        r.raise_for_status()


@pytest.fixture(scope="session")
def services_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """Env vars pointing every service and process at the isolated test resources."""
    redis_db = claim_redis_db()
    overrides = session_overrides(redis_db)
    os.environ.update(overrides)
    asyncio.run(_recreate_database())
    _recreate_vhost()
    sync_redis.Redis.from_url(overrides["REDIS_URL"]).flushdb()  # this session's own DB (claimed)
    from shared.adapters.postgres.migrate import migrate

    asyncio.run(migrate(overrides["DATABASE_URL"]))
    yield dict(overrides)
    if os.environ.get("RAG_TEST_KEEP"):
        return
    with httpx.Client(base_url=MGMT, auth=MGMT_AUTH, timeout=30) as c:
        c.delete(f"/api/vhosts/{VHOST}")
    asyncio.run(_drop_database())
    _remove_bucket(overrides["S3_BUCKET"])
    release_redis_db(redis_db)


def _remove_bucket(bucket: str) -> None:
    from minio import Minio
    from minio.deleteobjects import DeleteObject

    s = KnowledgeSettings()
    client = Minio(s.s3_endpoint, access_key=s.s3_access_key.get_secret_value(),
                   secret_key=s.s3_secret_key.get_secret_value(), secure=s.s3_secure)
    if not client.bucket_exists(bucket):
        return
    objects = [DeleteObject(o.object_name) for o in client.list_objects(bucket, recursive=True) if o.object_name]
    for _ in client.remove_objects(bucket, objects):
        pass
    client.remove_bucket(bucket)


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
