"""Per-document Redis lock (redis-py asyncio ``Lock``), errors mapped to shared.domain.errors.

One ``Lock`` object per unit of work (redis-py's thread-local token storage does not isolate
asyncio tasks), always with a timeout (the default ``None`` never expires), released only with
our own random token. Correctness never rests on this lock: the database fence does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis.asyncio as aioredis
from redis.exceptions import LockError, LockNotOwnedError, RedisError

from shared.adapters.keepalive import Keepalive
from shared.domain.errors import LockLostError, LockUnavailableError
from shared.settings import CommonSettings


@dataclass(frozen=True)
class RedisConfig:
    """``REDIS_URL``, ``REDIS_TIMEOUT_S`` (connect and every call, seconds), the TCP keepalive
    (``TCP_KEEPALIVE_*``, ``TCP_USER_TIMEOUT_S``) and ``REDIS_HEALTH_CHECK_INTERVAL_S`` (seconds)."""

    url: str = field(repr=False)
    timeout_s: float
    keepalive: Keepalive
    health_check_interval_s: float

    @classmethod
    def from_settings(cls, s: CommonSettings) -> RedisConfig:
        return cls(url=s.redis_url.get_secret_value(), timeout_s=s.redis_timeout_s,
                   keepalive=Keepalive.from_settings(s), health_check_interval_s=s.redis_health_check_interval_s)


def connect(config: RedisConfig) -> aioredis.Redis:
    """The services' Redis client: every call bounded by ``timeout_s``, TCP keepalive and a ping
    before reusing a connection idle ``health_check_interval_s``: a connection across a healed
    partition is found dead and replaced, not trusted."""
    return aioredis.from_url(
        config.url,
        socket_timeout=config.timeout_s,
        socket_connect_timeout=config.timeout_s,
        socket_keepalive=True,
        socket_keepalive_options=config.keepalive.socket_options(),
        health_check_interval=config.health_check_interval_s,
    )


def document_lock_key(document_id: int, part: int | None = None) -> str:
    """``lock:index-document:{id}``, or ``lock:index-document:{id}:part:{p}`` for part ``p`` of a
    split document (the document's lock protects parse and split; its parts run side by side)."""
    base = f"lock:index-document:{document_id}"
    return base if part is None else f"{base}:part:{part}"


class DocumentLock:
    """:func:`document_lock_key` (of the document, or of one of its parts) with TTL ``ttl_s`` seconds."""

    def __init__(self, client: aioredis.Redis, document_id: int, ttl_s: float, part: int | None = None) -> None:
        self.key = document_lock_key(document_id, part)
        self._lock = client.lock(self.key, timeout=ttl_s, blocking=False, thread_local=False)

    async def acquire(self) -> bool:
        """Try once; False if another holder has it. Raises LockUnavailableError (Redis down)."""
        try:
            return bool(await self._lock.acquire(blocking=False))
        except RedisError as exc:
            raise LockUnavailableError(f"redis unavailable: {exc}") from exc

    async def renew(self) -> None:
        """Reset the TTL to its full value. Raises LockLostError if the lock is no longer ours
        (expired and taken, or Redis unreachable: we cannot prove we still hold it)."""
        try:
            await self._lock.reacquire()
        except LockNotOwnedError as exc:
            raise LockLostError(f"lock {self.key} lost: {exc}") from exc
        except (LockError, RedisError) as exc:
            raise LockLostError(f"lock {self.key} could not be renewed: {exc}") from exc

    async def release(self) -> None:
        """Release if still ours; a lost or unreachable lock expires by itself."""
        try:
            await self._lock.release()
        except (LockError, RedisError):
            pass
