"""PostgreSQL adapter: the asyncpg pool (pgvector codec on every connection) and error mapping.

Every caller reaches the database through :func:`connection` (or :func:`translate_errors` around
its own ``pool.acquire()``): a connection-level failure (refused, reset, dropped mid-query, pool
cannot connect in time, server shutting down or out of connection slots) leaves as
``DatabaseUnavailableError`` (:func:`unavailable`), which the worker retries and the API answers
with 503. SQL errors, constraint violations and misuse of the driver are bugs or answers, not
outages: they leave as raised.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

import asyncpg
from pgvector.asyncpg import register_vector

from shared.adapters.keepalive import Keepalive
from shared.domain.errors import DatabaseUnavailableError
from shared.settings import CommonSettings

# Errors meaning "the database or our connection to it failed", worth a retry.
_TRANSIENT = (
    asyncpg.exceptions.PostgresConnectionError,  # ConnectionDoesNotExistError, ConnectionFailureError, ...
    asyncpg.exceptions.QueryCanceledError,  # statement_timeout
    asyncpg.exceptions.AdminShutdownError,  # pg_terminate_backend, server shutdown
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.CannotConnectNowError,  # starting up, recovery
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.SerializationError,
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.LockNotAvailableError,  # lock_timeout: a row another session holds (row_locked)
    asyncpg.exceptions.IdleInTransactionSessionTimeoutError,  # our own session ended by the server
    OSError,  # ConnectionRefusedError, ConnectionResetError, TimeoutError (pool acquire / connect)...
)
# A bare InterfaceError is mostly misuse of the driver (another operation in progress, a released
# connection used, too many arguments): only these messages mean the connection or pool is gone.
_GONE = re.compile(r"connection is closed|pool is clos(?:ed|ing)")


def unavailable(exc: BaseException) -> DatabaseUnavailableError | None:
    """The ``DatabaseUnavailableError`` that a driver or socket error means, or None when it is
    not a connection-level failure (SQL error, constraint violation, bad argument: a bug or an
    answer, raised as is). Pure."""
    if isinstance(exc, _TRANSIENT):
        return DatabaseUnavailableError(f"database unavailable: {type(exc).__name__}: {exc}")
    # asyncpg's argument/config errors (DataError, ClientConfigurationError) are also ValueErrors
    if (isinstance(exc, asyncpg.exceptions.InterfaceError) and not isinstance(exc, ValueError)
            and _GONE.search(str(exc))):
        return DatabaseUnavailableError(f"database unavailable: {type(exc).__name__}: {exc}")
    return None


def row_locked(exc: BaseException) -> bool:
    """Whether ``exc`` (a ``DatabaseUnavailableError`` from :func:`unavailable`, or the driver's
    error) is a lock wait that ran out (``DB_LOCK_TIMEOUT_S``): the row is busy, the database is
    fine, so a job over many rows goes on with the next one."""
    cause = exc.__cause__ if isinstance(exc, DatabaseUnavailableError) else exc
    return isinstance(cause, asyncpg.exceptions.LockNotAvailableError)


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool ``reset``: nothing beyond asyncpg's own (an open transaction is rolled back).

    asyncpg's default sends ``RESET ALL; UNLISTEN *; CLOSE ALL; pg_advisory_unlock_all()`` on
    every release: one more round trip per acquire (4 per upload). Our pooled connections hold
    no session state: settings are ``SET LOCAL``, advisory locks ``_xact_``, no LISTEN, and
    cursors live inside transactions.
    """


@dataclass(frozen=True)
class PoolConfig:
    """What a pool needs (``DATABASE_URL``, ``DB_POOL_MIN`` / ``DB_POOL_MAX`` connections,
    ``DB_STATEMENT_TIMEOUT_S`` / ``DB_CONNECT_TIMEOUT_S`` seconds; issue 19, partitions:
    ``DB_IDLE_IN_TRANSACTION_TIMEOUT_S``, ``DB_LOCK_TIMEOUT_S`` seconds, 0 = off, and the TCP
    :class:`Keepalive`); built by the composition root."""

    dsn: str
    min_size: int
    max_size: int
    statement_timeout_s: float
    connect_timeout_s: float
    idle_in_transaction_timeout_s: float
    lock_timeout_s: float
    keepalive: Keepalive

    @classmethod
    def from_settings(cls, s: CommonSettings, *, max_size: int | None = None) -> PoolConfig:
        """``max_size``: a smaller pool than ``DB_POOL_MAX`` (one-pass commands)."""
        size = max_size or s.db_pool_max
        keepalive = Keepalive.from_settings(s)
        return cls(dsn=s.database_url, min_size=min(s.db_pool_min, size), max_size=size,
                   statement_timeout_s=s.db_statement_timeout_s, connect_timeout_s=s.db_connect_timeout_s,
                   idle_in_transaction_timeout_s=s.db_idle_in_transaction_timeout_s,
                   lock_timeout_s=s.db_lock_timeout_s, keepalive=keepalive)

    def server_settings(self, app_name: str) -> dict[str, str]:
        """Every session's parameters: the timeouts (ms; 0 = none) and the server's TCP keepalive."""
        def ms(seconds: float) -> str:
            return str(int(seconds * 1000))

        return {"statement_timeout": ms(self.statement_timeout_s),
                "idle_in_transaction_session_timeout": ms(self.idle_in_transaction_timeout_s),
                "lock_timeout": ms(self.lock_timeout_s), "application_name": app_name[:63],
                **self.keepalive.server_settings()}


async def create_pool(config: PoolConfig, *, app_name: str = "rag") -> asyncpg.Pool:
    """Open a pool; every connection gets the pgvector codec, the session timeouts
    (:meth:`PoolConfig.server_settings`) and TCP keepalive on our end too.

    Raises DatabaseUnavailableError when PostgreSQL cannot be reached.
    """
    async def init(conn: asyncpg.Connection) -> None:
        _keep_alive(conn, config.keepalive)
        await _init_connection(conn)

    async with translate_errors():
        pool = await asyncpg.create_pool(
            config.dsn,
            min_size=config.min_size,
            max_size=config.max_size,
            init=init,
            reset=_keep_session,
            timeout=config.connect_timeout_s,
            command_timeout=config.statement_timeout_s + 5,
            server_settings=config.server_settings(app_name),
        )
    assert pool is not None
    return pool


def _keep_alive(conn: asyncpg.Connection, keepalive: Keepalive) -> None:
    """TCP keepalive on our end of ``conn``: asyncpg has no option for it (0.32), so on its
    transport's socket (asyncpg keeps the transport in ``_transport``; absent: nothing done)."""
    transport = getattr(conn, "_transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            keepalive.apply(sock)


@contextlib.asynccontextmanager
async def session(config: PoolConfig, *, app_name: str) -> AsyncIterator[asyncpg.Connection]:
    """One connection for a short command (the CLI's): a pool of one, closed after the block, so
    it gets the codec, the statement timeout and the error mapping of the services' pools."""
    pool = await create_pool(replace(config, min_size=1, max_size=1), app_name=app_name)
    try:
        async with connection(pool) as conn:
            yield conn
    finally:
        await pool.close()


@contextlib.asynccontextmanager
async def translate_errors() -> AsyncIterator[None]:
    """Re-raise connection-level failures inside the block as DatabaseUnavailableError
    (:func:`unavailable`); anything else leaves unchanged."""
    try:
        yield
    except Exception as exc:
        translated = unavailable(exc)
        if translated is None:
            raise
        raise translated from exc


@contextlib.asynccontextmanager
async def connection(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """A pooled connection for the block; a connection-level failure, on acquire or mid-query,
    leaves as DatabaseUnavailableError. Opening a new connection is bounded by
    ``DB_CONNECT_TIMEOUT_S``; waiting for a busy pool to free one is not."""
    async with translate_errors(), pool.acquire() as conn:
        yield conn


P = ParamSpec("P")
R = TypeVar("R")


class _HasPool(Protocol):
    @property
    def pool(self) -> asyncpg.Pool: ...


class Pooled(Generic[P, R]):
    """A repository function (``fn(conn, *args)``) as a method of an object with a ``pool``:
    each call runs on its own pooled connection (:func:`connection`), so an adapter that only
    forwards to the repository states the binding once per method instead of a pass-through::

        class PgWorkerStore:
            heartbeat = Pooled(tasks_repo.heartbeat)   # store.heartbeat(claim) -> bool
    """

    def __init__(self, fn: Callable[Concatenate[asyncpg.Connection, P], Coroutine[Any, Any, R]]) -> None:
        self._fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, owner: _HasPool, owner_type: type | None = None) -> Callable[P, Coroutine[Any, Any, R]]:
        fn = self._fn

        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            async with connection(owner.pool) as conn:
                return await fn(conn, *args, **kwargs)

        call.__name__ = call.__qualname__ = fn.__name__
        call.__doc__ = fn.__doc__
        return call
