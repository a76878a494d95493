"""Issue 19 item 1: every PostgreSQL session carries the timeouts that end it after its client's
partition, and both ends of a connection (PostgreSQL, Redis) use TCP keepalive (offline: the
settings and socket options are built, nothing connects)."""

from __future__ import annotations

import socket

import asyncpg
import pytest

from shared.adapters.keepalive import Keepalive
from shared.adapters.postgres.pool import PoolConfig, row_locked, unavailable
from shared.adapters.redis_lock import RedisConfig
from shared.adapters.redis_lock import connect as redis_connect
from shared.domain.errors import DatabaseUnavailableError
from shared.settings import WorkerSettings

DEFAULTS = WorkerSettings.model_construct()


def test_every_session_gets_the_partition_timeouts_and_server_keepalive() -> None:
    got = PoolConfig.from_settings(DEFAULTS).server_settings("worker-1")
    assert got == {
        "statement_timeout": "60000", "idle_in_transaction_session_timeout": "30000", "lock_timeout": "10000",
        "application_name": "worker-1", "tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10",
        "tcp_keepalives_count": "3", "tcp_user_timeout": "60000",
    }


def test_a_zero_keepalive_setting_leaves_the_server_default() -> None:
    ka = Keepalive(idle_s=0, interval_s=5, count=0, user_timeout_s=0)
    assert ka.server_settings() == {"tcp_keepalives_interval": "5"}
    assert ka.socket_options() == {socket.TCP_KEEPINTVL: 5}


def test_the_defaults_end_a_stuck_session_before_the_lock_ttl() -> None:
    """The timing argument (README "Guarantees"): a partitioned worker's row locks are gone before
    its Redis lock expires and a rival can claim, and a waiter gives up well before that."""
    s = DEFAULTS
    assert s.db_idle_in_transaction_timeout_s < s.lock_ttl_s
    assert s.db_lock_timeout_s < s.db_statement_timeout_s
    assert s.tcp_keepalive_idle_s + s.tcp_keepalive_interval_s * s.tcp_keepalive_count <= s.lock_ttl_s
    assert s.tcp_user_timeout_s <= s.lock_ttl_s


def test_keepalive_is_set_on_our_end_of_a_socket() -> None:
    ka = Keepalive(idle_s=7, interval_s=2, count=4, user_timeout_s=9.5)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        ka.apply(sock)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 7
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 2
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 4
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 9500


def test_the_redis_client_uses_keepalive_and_health_checks() -> None:
    client = redis_connect(RedisConfig.from_settings(DEFAULTS))
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["socket_keepalive"] is True
    assert kwargs["socket_keepalive_options"][socket.TCP_KEEPIDLE] == DEFAULTS.tcp_keepalive_idle_s
    assert kwargs["health_check_interval"] == DEFAULTS.redis_health_check_interval_s
    assert kwargs["socket_timeout"] == DEFAULTS.redis_timeout_s


@pytest.mark.parametrize("exc, locked", [
    (asyncpg.exceptions.LockNotAvailableError("canceling statement due to lock timeout"), True),
    (asyncpg.exceptions.QueryCanceledError("canceling statement due to statement timeout"), False),
    (ConnectionResetError(104, "Connection reset by peer"), False),
])
def test_a_lock_timeout_is_transient_and_told_apart(exc: BaseException, locked: bool) -> None:
    translated = unavailable(exc)
    assert isinstance(translated, DatabaseUnavailableError)
    translated.__cause__ = exc
    assert row_locked(translated) is locked
    assert row_locked(exc) is locked
