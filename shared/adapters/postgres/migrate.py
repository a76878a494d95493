"""Forward-only migration runner for ``sql/NNNN_name.sql``.

``rag migrate [--target N]`` (``python -m shared.adapters.postgres.migrate`` is an alias of it)
creates the database if it is missing, then applies every migration above the recorded version,
each in its own transaction, under an advisory lock so that several processes starting at once
apply each file exactly once.

Checksums: ``schema_migration.checksum`` holds the SHA-256 of each applied file (its text with
line ends made ``\n``). A run first compares every applied migration still on disk with its
recorded checksum and refuses (:class:`MigrationChangedError`, nothing applied) when one was
edited after it was applied: the database did not run the new text, and forward-only means a
change is a new file. A row recorded before checksums existed (``NULL``) takes the file's
checksum on the first run (trusted once). An applied version with no file is left alone (a
newer checkout applied it).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from shared.domain.errors import ConfigurationError

SQL_DIR = Path(__file__).resolve().parents[3] / "sql"
_LOCK_KEY = 0x5241474D  # "RAGM"
_NAME = re.compile(r"^(\d{4})_[\w-]+\.sql$")


class MigrationChangedError(ConfigurationError):
    """An applied migration's file differs from what was applied (its checksum); nothing was
    applied. Restore the file and put the change in a new migration."""


def checksum(path: Path) -> str:
    """SHA-256 (hex) of a migration's text, line ends normalised to ``\n``."""
    text = path.read_bytes().replace(b"\r\n", b"\n")
    return hashlib.sha256(text).hexdigest()


def migration_files(sql_dir: Path = SQL_DIR) -> list[tuple[int, Path]]:
    """``[(version, path)]`` sorted by version; raises ValueError on a duplicate version."""
    found: dict[int, Path] = {}
    for path in sorted(sql_dir.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            continue
        version = int(m.group(1))
        if version in found:
            raise ValueError(f"duplicate migration version {version}: {path.name}")
        found[version] = path
    return sorted(found.items())


async def ensure_database(dsn: str) -> None:
    """Create the database named in ``dsn`` if it does not exist (connects to ``postgres``)."""
    parts = urlsplit(dsn)
    dbname = parts.path.lstrip("/") or "postgres"
    admin = urlunsplit(parts._replace(path="/postgres"))
    # A single raw connection, not the pool helper: it targets another database (``postgres``),
    # runs before our database exists, and CREATE DATABASE cannot run in a pool's transaction/timeouts.
    conn = await asyncpg.connect(admin)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", dbname)
        if not exists:
            try:
                await conn.execute(f'CREATE DATABASE "{dbname}"')
            except (asyncpg.exceptions.DuplicateDatabaseError, asyncpg.exceptions.UniqueViolationError):
                # a concurrent CREATE DATABASE won the race (PostgreSQL reports either error)
                pass
    finally:
        await conn.close()


async def migrate(dsn: str, *, target: int | None = None, sql_dir: Path = SQL_DIR) -> list[int]:
    """Apply pending migrations up to ``target`` (all by default); returns the versions applied."""
    await ensure_database(dsn)
    # A single raw connection, not the pool helper: the session-level advisory lock below must be
    # held by this one session for the whole run, and a migration must not hit the pool's
    # statement timeout (an index build on a large table takes longer).
    conn = await asyncpg.connect(dsn)
    applied: list[int] = []
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
        files = migration_files(sql_dir)
        done = await _verified(conn, files)
        for version, path in files:
            if version in done or (target is not None and version > target):
                continue
            async with conn.transaction():
                await conn.execute(path.read_text(encoding="utf-8"))
                await conn.execute(
                    "INSERT INTO schema_migration (version, name, checksum) VALUES ($1, $2, $3)",
                    version, path.name, checksum(path),
                )
            applied.append(version)
    finally:
        try:
            await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
        finally:
            await conn.close()
    return applied


async def _verified(conn: asyncpg.Connection, files: list[tuple[int, Path]]) -> set[int]:
    """The applied versions, after checking their files (module docstring); records the
    checksum of rows that have none. Raises MigrationChangedError."""
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migration ("
        " version INT PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )
    await conn.execute("ALTER TABLE schema_migration ADD COLUMN IF NOT EXISTS checksum TEXT")
    recorded = {r["version"]: r["checksum"] for r in await conn.fetch("SELECT version, checksum FROM schema_migration")}
    on_disk = dict(files)
    changed = [on_disk[v].name for v, sum_ in sorted(recorded.items())
               if v in on_disk and sum_ is not None and sum_ != checksum(on_disk[v])]
    if changed:
        raise MigrationChangedError(
            f"applied migration(s) edited since they were applied: {', '.join(changed)}; the database ran"
            " the earlier text. Restore the file(s) and put the change in a new migration (forward-only)"
        )
    for version in sorted(v for v, sum_ in recorded.items() if sum_ is None and v in on_disk):
        await conn.execute("UPDATE schema_migration SET checksum = $2 WHERE version = $1 AND checksum IS NULL",
                           version, checksum(on_disk[version]))
    return set(recorded)


def run(target: int | None = None) -> list[int]:
    """Migrate the database of the settings (``DATABASE_URL``); the versions applied."""
    from shared.settings import CommonSettings

    return asyncio.run(migrate(CommonSettings().database_url, target=target))


if __name__ == "__main__":  # an alias of `rag migrate`
    from rag_cli import main

    sys.argv = ["rag", "migrate", *sys.argv[1:]]
    main()
