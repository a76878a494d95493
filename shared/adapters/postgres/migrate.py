"""Forward-only migration runner for ``sql/NNNN_name.sql``.

``python -m shared.adapters.postgres.migrate [--target N]`` creates the database if it is missing, then applies
every migration above the recorded version, each in its own transaction, under an advisory lock
so that several processes starting at once apply each file exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

SQL_DIR = Path(__file__).resolve().parents[3] / "sql"
_LOCK_KEY = 0x5241474D  # "RAGM"
_NAME = re.compile(r"^(\d{4})_[\w-]+\.sql$")


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
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migration ("
            " version INT PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migration")}
        for version, path in migration_files(sql_dir):
            if version in done or (target is not None and version > target):
                continue
            async with conn.transaction():
                await conn.execute(path.read_text(encoding="utf-8"))
                await conn.execute(
                    "INSERT INTO schema_migration (version, name) VALUES ($1, $2)", version, path.name
                )
            applied.append(version)
    finally:
        try:
            await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
        finally:
            await conn.close()
    return applied


def main() -> None:
    from shared.settings import CommonSettings

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", type=int, default=None)
    args = parser.parse_args()
    settings = CommonSettings()
    applied = asyncio.run(migrate(settings.database_url, target=args.target))
    print(f"migrations applied: {applied or 'none (up to date)'}")


if __name__ == "__main__":
    main()
