"""The local stack that scripts/services.sh opens refuses unauthenticated requests, port by port.

Every port is read from the configuration the services use (.env / environment). SeaweedFS's
own ports (filer, master, volume, their gRPC, admin) must not be reachable from the host at all:
services.sh runs weed in its own network namespace and forwards only the S3 port.
"""

from __future__ import annotations

import socket
import uuid
from urllib.parse import urlsplit

import aio_pika
import asyncpg
import httpx
import pytest
import redis.asyncio as aioredis
from minio import Minio
from minio.error import S3Error

from shared.settings import KnowledgeSettings
from tests.support import MGMT, ROOT

# weed mini's defaults: filer, master, volume HTTP, their gRPC ports, admin HTTP/gRPC, metrics
WEED_INTERNAL_PORTS = (8888, 9333, 9340, 18888, 19333, 19340, 23646, 33646)


def _port(url: str, default: int) -> int:
    return urlsplit(url).port or default


def _redis_started_by_services_sh() -> bool:
    return (ROOT / ".data" / "redis" / "started-by-services-sh").exists()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("user", ["guest", f"nobody-{uuid.uuid4().hex[:8]}"])
async def test_amqp_refuses_a_login_without_the_projects_credentials(settings: KnowledgeSettings, user: str) -> None:
    port = _port(settings.amqp_url.get_secret_value(), 5672)
    try:
        conn = await aio_pika.connect(f"amqp://{user}:guest@127.0.0.1:{port}/", timeout=10)
    except aio_pika.exceptions.ProbableAuthenticationError:
        return
    await conn.close()
    if user == "guest":
        pytest.skip("guest still exists on this broker (one services.sh did not start: it deletes guest only from "
                    "a node it started); the project never uses it — `rabbitmqctl delete_user guest` removes it")
    pytest.fail(f"AMQP on {port} accepted {user}")


@pytest.mark.parametrize("auth", [None, ("guest", "guest")])
def test_management_api_refuses_anonymous_and_guest(auth: tuple[str, str] | None) -> None:
    r = httpx.get(f"{MGMT}/api/overview", auth=auth, timeout=10)
    if r.status_code == 200 and auth is not None:
        pytest.skip("guest still exists on this broker (see the AMQP test)")
    assert r.status_code == 401, r.status_code


async def test_redis_started_by_the_scripts_refuses_clients_without_the_password(settings: KnowledgeSettings) -> None:
    url = urlsplit(settings.redis_url.get_secret_value())
    client = aioredis.Redis(host="127.0.0.1", port=url.port or 6379, socket_timeout=5)
    try:
        await client.ping()
    except aioredis.AuthenticationError:
        return
    except aioredis.ResponseError as exc:
        assert "NOAUTH" in str(exc) or "auth" in str(exc).lower(), exc
        return
    finally:
        await client.aclose()
    assert not _redis_started_by_services_sh(), "the Redis services.sh started answers without a password"
    pytest.skip("this Redis was not started by services.sh and has no password; REDIS_URL uses it as configured")


def test_s3_refuses_anonymous_and_wrongly_signed_requests(settings: KnowledgeSettings) -> None:
    base = f"http://{settings.s3_endpoint}"
    for path in ("/", f"/{settings.s3_bucket}", f"/{settings.s3_bucket}/kb/1/anything"):
        assert httpx.get(base + path, timeout=10).status_code == 403, path
    stranger = Minio(settings.s3_endpoint, access_key=f"nobody{uuid.uuid4().hex[:8]}", secret_key="x" * 40,
                     secure=settings.s3_secure)
    with pytest.raises(S3Error) as refused:
        list(stranger.list_objects(settings.s3_bucket))
    assert refused.value.code in ("InvalidAccessKeyId", "AccessDenied", "SignatureDoesNotMatch"), refused.value.code


@pytest.mark.parametrize("port", WEED_INTERNAL_PORTS)
def test_seaweedfs_internal_ports_are_not_reachable(port: int) -> None:
    assert not _listening(port), f"127.0.0.1:{port} (a SeaweedFS component) is reachable without credentials"


async def test_postgres_refuses_a_login_without_a_password(settings: KnowledgeSettings) -> None:
    port = _port(settings.database_url, 5432)
    try:
        conn = await asyncpg.connect(host="127.0.0.1", port=port, user="postgres", database="postgres",
                                     password="", timeout=10)
    except (asyncpg.InvalidPasswordError, asyncpg.InvalidAuthorizationSpecificationError):
        return
    await conn.close()
    pytest.skip("PostgreSQL trusts 127.0.0.1 (services.sh's development fallback, 'host all all 127.0.0.1/32 "
                "trust'): left as is in this session, the shared test databases rely on it")
