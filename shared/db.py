"""PostgreSQL adapter: the asyncpg pool (pgvector codec on every connection) and error mapping."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import asyncpg
from pgvector.asyncpg import register_vector

from shared.errors import DatabaseUnavailableError
from shared.settings import CommonSettings

# Errors meaning "the database or our connection to it failed", worth a retry.
_TRANSIENT = (
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.QueryCanceledError,  # statement_timeout
    asyncpg.exceptions.AdminShutdownError,  # pg_terminate_backend, server shutdown
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.SerializationError,
    asyncpg.exceptions.DeadlockDetectedError,
    ConnectionError,
    OSError,
    TimeoutError,
)


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool ``reset``: nothing beyond asyncpg's own (an open transaction is rolled back).

    asyncpg's default sends ``RESET ALL; UNLISTEN *; CLOSE ALL; pg_advisory_unlock_all()`` on
    every release: one more round trip per acquire (4 per upload). Our pooled connections hold
    no session state: settings are ``SET LOCAL``, advisory locks ``_xact_``, no LISTEN, and
    cursors live inside transactions.
    """


async def create_pool(settings: CommonSettings, *, max_size: int | None = None, app_name: str = "rag") -> asyncpg.Pool:
    """Open a pool; every connection gets the pgvector codec and a statement timeout.

    Raises DatabaseUnavailableError when PostgreSQL cannot be reached.
    """
    timeout_ms = str(int(settings.db_statement_timeout_s * 1000))
    try:
        pool = await asyncpg.create_pool(
            settings.database_url,
            min_size=settings.db_pool_min,
            max_size=max_size or settings.db_pool_max,
            init=_init_connection,
            reset=_keep_session,
            timeout=settings.db_connect_timeout_s,
            command_timeout=settings.db_statement_timeout_s + 5,
            server_settings={"statement_timeout": timeout_ms, "application_name": app_name[:63]},
        )
    except _TRANSIENT as exc:
        raise DatabaseUnavailableError(f"database unreachable: {exc}") from exc
    assert pool is not None
    return pool


@contextlib.asynccontextmanager
async def translate_errors() -> AsyncIterator[None]:
    """Re-raise asyncpg's connection-level failures as DatabaseUnavailableError."""
    try:
        yield
    except _TRANSIENT as exc:
        raise DatabaseUnavailableError(f"database error: {type(exc).__name__}: {exc}") from exc
