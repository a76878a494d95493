"""``shared.adapters.postgres.pool``: which driver and socket errors mean "the database is unavailable" (offline: the
errors are built, never provoked; the pool is a stand-in with asyncpg's ``acquire`` shape)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from asyncpg.exceptions._base import DataError as ArgumentError  # asyncpg's bad-argument error

from shared.adapters.postgres.pool import connection, translate_errors, unavailable
from shared.domain.errors import DatabaseUnavailableError, TransientError

OUTAGES: list[BaseException] = [
    ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)"),
    ConnectionResetError(104, "Connection reset by peer"),
    TimeoutError(),  # pool acquire / connect timed out (asyncio.TimeoutError is TimeoutError)
    OSError(113, "No route to host"),
    asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    asyncpg.exceptions.ConnectionFailureError("connection failure"),
    asyncpg.exceptions.PostgresConnectionError("lost"),
    asyncpg.exceptions.TooManyConnectionsError("sorry, too many clients already"),
    asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
    asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.exceptions.CrashShutdownError("terminating connection because of crash of another server process"),
    asyncpg.exceptions.QueryCanceledError("canceling statement due to statement timeout"),
    asyncpg.exceptions.InterfaceError("connection is closed"),
    asyncpg.exceptions.InterfaceError("cannot perform operation: connection is closed"),
    asyncpg.exceptions.InterfaceError("pool is closing"),
]

NOT_OUTAGES: list[BaseException] = [
    asyncpg.exceptions.UniqueViolationError("duplicate key value violates unique constraint"),
    asyncpg.exceptions.ForeignKeyViolationError("insert or update violates foreign key constraint"),
    asyncpg.exceptions.UndefinedTableError('relation "nope" does not exist'),
    asyncpg.exceptions.PostgresSyntaxError('syntax error at or near "SELEC"'),
    asyncpg.exceptions.DataError("invalid input syntax for type integer"),  # SQLSTATE 22xxx
    ArgumentError("invalid input for query argument $1: 'x' (an integer is required)"),
    asyncpg.exceptions.ClientConfigurationError("bad sslmode"),
    asyncpg.exceptions.InterfaceError("cannot perform operation: another operation is in progress"),
    asyncpg.exceptions.InterfaceError("the server expects 2 arguments for this query, 1 was passed"),
    ValueError("a bug of ours"),
    KeyError("task_id"),
]


@pytest.mark.parametrize("exc", OUTAGES, ids=lambda e: f"{type(e).__name__}:{e}"[:60])
def test_connection_level_failures_mean_the_database_is_unavailable(exc: BaseException) -> None:
    got = unavailable(exc)
    assert isinstance(got, DatabaseUnavailableError) and isinstance(got, TransientError)
    assert got.error_code == "database_unavailable"
    assert type(exc).__name__ in str(got)


@pytest.mark.parametrize("exc", NOT_OUTAGES, ids=lambda e: f"{type(e).__name__}:{e}"[:60])
def test_sql_errors_and_bugs_are_not_outages(exc: BaseException) -> None:
    assert unavailable(exc) is None


async def test_translate_errors_raises_the_domain_error_from_the_driver_error() -> None:
    cause = asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
    with pytest.raises(DatabaseUnavailableError) as info:
        async with translate_errors():
            raise cause
    assert info.value.__cause__ is cause


@pytest.mark.parametrize("exc", [asyncpg.exceptions.UniqueViolationError("dup"), asyncio.CancelledError(),
                                 DatabaseUnavailableError("already translated")],
                         ids=lambda e: type(e).__name__)
async def test_translate_errors_leaves_everything_else_as_raised(exc: BaseException) -> None:
    with pytest.raises(type(exc)) as info:
        async with translate_errors():
            raise exc
    assert info.value is exc


class _Pool:
    """asyncpg.Pool's ``acquire()`` shape: fails to connect, or hands out ``conn``."""

    def __init__(self, *, connect_error: BaseException | None = None, conn: Any = None) -> None:
        self.connect_error = connect_error
        self.conn = conn

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        if self.connect_error is not None:
            raise self.connect_error
        yield self.conn


class _DroppedConnection:
    async def fetchval(self, query: str) -> Any:
        raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")


async def test_connection_translates_a_failed_acquire() -> None:
    with pytest.raises(DatabaseUnavailableError):
        async with connection(_Pool(connect_error=ConnectionRefusedError(111, "refused"))):  # type: ignore[arg-type]
            pytest.fail("no connection to run the block with")


async def test_connection_translates_a_connection_dropped_mid_query() -> None:
    with pytest.raises(DatabaseUnavailableError) as info:
        async with connection(_Pool(conn=_DroppedConnection())) as conn:  # type: ignore[arg-type]
            await conn.fetchval("SELECT 1")
    assert isinstance(info.value.__cause__, asyncpg.exceptions.ConnectionDoesNotExistError)


async def test_connection_leaves_an_sql_error_of_the_block_alone() -> None:
    with pytest.raises(asyncpg.exceptions.UniqueViolationError):
        async with connection(_Pool(conn=object())):  # type: ignore[arg-type]
            raise asyncpg.exceptions.UniqueViolationError("dup")
