"""``scripts/svc.py``'s readiness probes against the real services, through the clients the
project uses (MinIO SDK, redis-py, asyncpg): a service that answers and takes the credentials
passes; wrong credentials, a missing bucket or a closed port fail. Redis with a password is a
``redis-server`` this test starts on a free port (and stops)."""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit

import pytest

from shared.adapters.s3 import ObjectStore, StorageConfig
from shared.settings import KnowledgeSettings
from tests.support import ROOT, free_port, poll


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("svc", ROOT / "scripts" / "svc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


svc = _load()


async def test_s3_probe_lists_buckets_and_finds_one_with_the_keys(settings: KnowledgeSettings,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://{settings.s3_endpoint}/"
    await ObjectStore(StorageConfig.from_settings(settings)).ensure_bucket()  # the session's bucket
    monkeypatch.setenv("S3_ACCESS_KEY", settings.s3_access_key.get_secret_value())
    monkeypatch.setenv("S3_SECRET_KEY", settings.s3_secret_key.get_secret_value())
    assert svc.probe_s3(url) is True
    assert svc.probe_s3(url + settings.s3_bucket) is True
    assert svc.probe_s3(url + "no-such-bucket-svc-probe") is False
    assert svc.probe_s3(f"http://127.0.0.1:{free_port()}/") is False
    monkeypatch.setenv("S3_SECRET_KEY", "not-the-secret")
    assert svc.probe_s3(url) is False


def test_pg_probe_logs_in(settings: KnowledgeSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    dsn = urlsplit(settings.database_url)
    monkeypatch.setenv("PGPASSWORD", dsn.password or "")
    port = str(dsn.port or 5432)
    assert svc.probe_pg(dsn.hostname or "127.0.0.1", port, dsn.username or "postgres") is True
    assert svc.probe_pg(dsn.hostname or "127.0.0.1", port, "no_such_role_svc_probe") is False
    assert svc.probe_pg("127.0.0.1", str(free_port()), "postgres") is False


@pytest.fixture
def redis_with_password(tmp_path: Path) -> Iterator[int]:
    """A redis-server of this test only: free port, ``requirepass pw``, no persistence."""
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--requirepass", "pw",
                             "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        poll(lambda: svc.probe_tcp("127.0.0.1", str(port)), timeout=15, what="the test's redis-server")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_redis_probe_with_and_without_a_password(redis_with_password: int, settings: KnowledgeSettings,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    port = str(redis_with_password)
    monkeypatch.setenv("REDISCLI_AUTH", "pw")
    assert svc.probe_redis("127.0.0.1", port) is True
    monkeypatch.setenv("REDISCLI_AUTH", "wrong")
    assert svc.probe_redis("127.0.0.1", port) is False
    monkeypatch.delenv("REDISCLI_AUTH")
    assert svc.probe_redis("127.0.0.1", port) is False  # NOAUTH
    assert svc.probe_redis("127.0.0.1", str(free_port())) is False
    # the project's Redis, as REDIS_URL says (a Redis without a password also passes with one given,
    # as with redis-cli: the refused AUTH does not matter once PING is answered)
    url = urlsplit(settings.redis_url.get_secret_value())
    monkeypatch.setenv("REDISCLI_AUTH", url.password or "any")
    assert svc.probe_redis(url.hostname or "127.0.0.1", str(url.port or 6379)) is True
