"""``shared.adapters.s3.ObjectStore`` against the real S3 server (the session's test bucket)."""

from __future__ import annotations

import io
import os
import uuid
from typing import Any

import pytest
from pydantic import SecretStr

from shared.adapters.s3 import ObjectMissingError, ObjectStore, StorageConfig
from shared.domain.errors import PermanentError, StorageUnavailableError, TransientError
from shared.settings import KnowledgeSettings

MIB = 1024 * 1024


@pytest.fixture
async def store(settings: KnowledgeSettings) -> ObjectStore:
    s = ObjectStore(StorageConfig.from_settings(settings))
    await s.ensure_bucket()
    return s


def _key() -> str:
    return f"it/{uuid.uuid4()}"


async def test_ensure_bucket_is_idempotent(store: ObjectStore) -> None:
    await store.ensure_bucket()
    await store.ensure_bucket()
    await store.ping()


@pytest.mark.parametrize("known_length", [True, False], ids=["length", "streamed"])
async def test_multipart_round_trip(store: ObjectStore, known_length: bool) -> None:
    data = os.urandom(5 * MIB + 1)
    key = _key()
    await store.put(key, io.BytesIO(data), len(data) if known_length else -1, part_size=5 * MIB)
    try:
        assert await store.get(key) == data
        assert await store.exists(key) is True
        etag = store._client.stat_object(store.bucket, key).etag  # multipart ETag: "<md5>-<parts>"
        assert etag.endswith("-2"), etag
    finally:
        await store.remove(key)
    assert await store.exists(key) is False


async def test_missing_object_is_a_permanent_error(store: ObjectStore) -> None:
    key = _key()
    assert await store.exists(key) is False
    with pytest.raises(ObjectMissingError) as info:
        await store.get(key)
    assert isinstance(info.value, PermanentError) and info.value.error_code == "object_missing"


@pytest.mark.parametrize(
    "update",
    [{"s3_secret_key": SecretStr("not-the-secret")}, {"s3_endpoint": "127.0.0.1:1"}],
    ids=["wrong-secret", "closed-port"],
)
async def test_unreachable_storage_is_a_transient_error(settings: KnowledgeSettings, update: dict[str, Any]) -> None:
    bad = ObjectStore(StorageConfig.from_settings(settings.model_copy(update=update)))
    with pytest.raises(StorageUnavailableError) as info:
        await bad.get(_key())
    assert isinstance(info.value, TransientError) and not isinstance(info.value, ObjectMissingError)
    with pytest.raises(StorageUnavailableError):
        await bad.exists(_key())  # never "False" when the server cannot answer
    with pytest.raises(StorageUnavailableError):
        await bad.put(_key(), io.BytesIO(b"x"), 1, part_size=5 * MIB)
    with pytest.raises(StorageUnavailableError):
        await bad.ping()
