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
    ``DB_STATEMENT_TIMEOUT_S`` / ``DB_CONNECT_TIMEOUT_S`` seconds); built by the composition root."""

    dsn: str
    min_size: int
    max_size: int
    statement_timeout_s: float
    connect_timeout_s: float

    @classmethod
    def from_settings(cls, s: CommonSettings, *, max_size: int | None = None) -> PoolConfig:
        """``max_size``: a smaller pool than ``DB_POOL_MAX`` (one-pass commands)."""
        size = max_size or s.db_pool_max
        return cls(dsn=s.database_url, min_size=min(s.db_pool_min, size), max_size=size,
                   statement_timeout_s=s.db_statement_timeout_s, connect_timeout_s=s.db_connect_timeout_s)


async def create_pool(config: PoolConfig, *, app_name: str = "rag") -> asyncpg.Pool:
    """Open a pool; every connection gets the pgvector codec and a statement timeout.

    Raises DatabaseUnavailableError when PostgreSQL cannot be reached.
    """
    timeout_ms = str(int(config.statement_timeout_s * 1000))
    async with translate_errors():
        pool = await asyncpg.create_pool(
            config.dsn,
            min_size=config.min_size,
            max_size=config.max_size,
            init=_init_connection,
            reset=_keep_session,
            timeout=config.connect_timeout_s,
            command_timeout=config.statement_timeout_s + 5,
            server_settings={"statement_timeout": timeout_ms, "application_name": app_name[:63]},
        )
    assert pool is not None
    return pool


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
