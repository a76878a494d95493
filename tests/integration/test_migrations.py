"""Migrations on scratch databases: the 0002 backfill of 0001 data, constraints, idempotence, the lock."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg
import numpy as np
import pytest
from pgvector.asyncpg import register_vector

from shared.adapters.postgres.migrate import MigrationChangedError, checksum, migrate, migration_files

ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
ALL_VERSIONS = [v for v, _ in migration_files()]


def _dsn(name: str) -> str:
    return f"postgresql://postgres@127.0.0.1:5432/{name}"


@pytest.fixture
async def scratch_dsn() -> AsyncIterator[Callable[[], str]]:
    """Factory of DSNs naming not-yet-existing databases ``rag_mig_<random>``; all dropped afterwards."""
    names: list[str] = []

    def make() -> str:
        names.append(f"rag_mig_{uuid.uuid4().hex[:12]}")
        return _dsn(names[-1])

    yield make
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        for name in names:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def _create_empty(dsn: str) -> None:
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        await admin.execute(f'CREATE DATABASE "{dsn.rsplit("/", 1)[1]}"')
    finally:
        await admin.close()


async def _seed_v1(dsn: str) -> dict[int, int]:
    """Rows as schema version 1 allows them; returns ``{document_id: chunk count}``."""
    conn = await asyncpg.connect(dsn)
    await register_vector(conn)
    try:
        user_id = await conn.fetchval("INSERT INTO app_user (name) VALUES ('old') RETURNING id")
        kb_id = await conn.fetchval(
            "INSERT INTO knowledge_base (user_id, name, embedding_model, embedding_dim)"
            " VALUES ($1, 'kb', 'all-MiniLM-L6-v2', 384) RETURNING id", user_id,
        )
        counts: dict[int, int] = {}
        for i, n in enumerate((2, 0, 1)):
            doc_id = await conn.fetchval(
                "INSERT INTO document_info (kb_id, user_id, filename, size_bytes, sha256, object_key)"
                " VALUES ($1, $2, $3, 10, $4, $5) RETURNING id", kb_id, user_id, f"d{i}.txt", "0" * 64, f"k/{i}",
            )
            for j in range(n):
                chunk_id = await conn.fetchval(
                    "INSERT INTO document_chunk (document_id, chunk_index, content, token_count)"
                    " VALUES ($1, $2, 'text', 1) RETURNING id", doc_id, j,
                )
                await conn.execute(
                    "INSERT INTO document_vector (chunk_id, document_id, kb_id, embedding) VALUES ($1, $2, $3, $4)",
                    chunk_id, doc_id, kb_id, np.ones(384, dtype=np.float32),
                )
            counts[doc_id] = n
        return counts
    finally:
        await conn.close()


async def test_backfill_gives_every_old_document_a_defined_state(scratch_dsn: Callable[[], str]) -> None:
    dsn = scratch_dsn()
    assert await migrate(dsn, target=1) == [1]
    counts = await _seed_v1(dsn)
    assert await migrate(dsn) == ALL_VERSIONS[1:]

    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT id, status, index_generation, chunk_count FROM document_info")
        state = {r["id"]: (r["status"], r["index_generation"], r["chunk_count"]) for r in rows}
        assert state == {
            doc_id: ("INDEXED", 1, n) if n else ("UPLOADED", 0, 0) for doc_id, n in counts.items()
        }
        assert await conn.fetchval("SELECT count(*) FROM document_vector") == 3  # data kept
    finally:
        await conn.close()


async def test_constraints_hold_after_migration(scratch_dsn: Callable[[], str]) -> None:
    dsn = scratch_dsn()
    await migrate(dsn, target=1)
    doc_id = next(iter(await _seed_v1(dsn)))
    await migrate(dsn)

    conn = await asyncpg.connect(dsn)
    try:
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute("UPDATE document_info SET status = 'DONE' WHERE id = $1", doc_id)
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute("UPDATE document_info SET index_generation = -1 WHERE id = $1", doc_id)
        with pytest.raises(asyncpg.NotNullViolationError):
            await conn.execute("UPDATE document_info SET status = NULL WHERE id = $1", doc_id)
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute(
                "INSERT INTO index_task (document_id, kb_id, user_id, generation, status)"
                " VALUES ($1, 1, 1, 1, 'DONE')", doc_id,
            )
    finally:
        await conn.close()


async def test_0016_gives_cache_entries_the_users_whose_chunks_have_their_text(
    scratch_dsn: Callable[[], str],
) -> None:
    """Issue 18: an entry of 0011 (no owner) is kept for each user with a chunk of its text;
    an entry no chunk has is dropped; old chunks get their text key."""
    dsn = scratch_dsn()
    await migrate(dsn, target=1)
    await _seed_v1(dsn)  # one user, chunks whose content is 'text'
    await migrate(dsn, target=12)
    conn = await asyncpg.connect(dsn)
    await register_vector(conn)
    try:
        for text in ("text", "nobody has this"):
            await conn.execute(
                "INSERT INTO embedding_cache (model, revision, text_sha256, dim, embedding)"
                " VALUES ('m', 'r', $1, 384, $2)", hashlib.sha256(text.encode()).digest(), np.ones(384, np.float32))
        await migrate(dsn)
        rows = await conn.fetch("SELECT user_id, text_sha256 FROM embedding_cache")
        user = await conn.fetchval("SELECT id FROM app_user")
        assert [(r["user_id"], bytes(r["text_sha256"])) for r in rows] == [(user, hashlib.sha256(b"text").digest())]
        assert await conn.fetchval("SELECT bool_and(text_sha256 = $1) FROM document_chunk",
                                   hashlib.sha256(b"text").digest())
    finally:
        await conn.close()


async def test_second_run_applies_nothing(scratch_dsn: Callable[[], str]) -> None:
    dsn = scratch_dsn()
    assert await migrate(dsn) == ALL_VERSIONS
    assert await migrate(dsn) == []
    conn = await asyncpg.connect(dsn)
    try:
        assert [r[0] for r in await conn.fetch("SELECT version FROM schema_migration ORDER BY 1")] == ALL_VERSIONS
    finally:
        await conn.close()


async def test_concurrent_runs_apply_each_file_once(scratch_dsn: Callable[[], str]) -> None:
    dsn = scratch_dsn()
    await _create_empty(dsn)
    results = await asyncio.gather(*(migrate(dsn) for _ in range(4)))
    assert sorted(v for applied in results for v in applied) == ALL_VERSIONS
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM schema_migration") == len(ALL_VERSIONS)
    finally:
        await conn.close()


async def test_concurrent_runs_on_a_missing_database(scratch_dsn: Callable[[], str]) -> None:
    for _ in range(3):
        dsn = scratch_dsn()
        results = await asyncio.gather(*(migrate(dsn) for _ in range(4)))
        assert sorted(v for applied in results for v in applied) == ALL_VERSIONS


def _copy_sql(tmp_path: Path) -> Path:
    folder = tmp_path / "sql"
    folder.mkdir()
    for _, path in migration_files():
        shutil.copy(path, folder / path.name)
    return folder


async def _recorded(dsn: str) -> dict[int, str | None]:
    conn = await asyncpg.connect(dsn)
    try:
        return {r["version"]: r["checksum"] for r in await conn.fetch("SELECT version, checksum FROM schema_migration")}
    finally:
        await conn.close()


async def test_an_edited_applied_migration_is_refused(scratch_dsn: Callable[[], str], tmp_path: Path) -> None:
    """Every applied file is recorded with its checksum; editing one afterwards makes the next run
    refuse before it applies anything (a new migration beside it stays unapplied)."""
    dsn, folder = scratch_dsn(), _copy_sql(tmp_path)
    assert await migrate(dsn, sql_dir=folder) == ALL_VERSIONS
    before = await _recorded(dsn)
    assert before == {v: checksum(p) for v, p in migration_files(folder)}
    edited = folder / migration_files(folder)[2][1].name
    edited.write_text(edited.read_text(encoding="utf-8") + "\n-- an afterthought\n", encoding="utf-8")
    (folder / "9999_next.sql").write_text("CREATE TABLE next_one (id INT);\n", encoding="utf-8")
    with pytest.raises(MigrationChangedError, match=edited.name):
        await migrate(dsn, sql_dir=folder)
    assert await _recorded(dsn) == before  # 9999 not applied
    edited.write_text(edited.read_text(encoding="utf-8").replace("\n-- an afterthought\n", ""), encoding="utf-8")
    assert await migrate(dsn, sql_dir=folder) == [9999]  # restored: the run goes on


async def test_rows_from_before_checksums_take_the_file_s_checksum_once(
        scratch_dsn: Callable[[], str], tmp_path: Path) -> None:
    dsn, folder = scratch_dsn(), _copy_sql(tmp_path)
    await migrate(dsn, sql_dir=folder)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("UPDATE schema_migration SET checksum = NULL WHERE version = $1", ALL_VERSIONS[0])
    finally:
        await conn.close()
    assert await migrate(dsn, sql_dir=folder) == []
    first = migration_files(folder)[0][1]
    assert (await _recorded(dsn))[ALL_VERSIONS[0]] == checksum(first)
    first.write_text(first.read_text(encoding="utf-8") + "-- edited\n", encoding="utf-8")
    with pytest.raises(MigrationChangedError):
        await migrate(dsn, sql_dir=folder)


def test_checksums_ignore_line_ends(tmp_path: Path) -> None:
    unix, dos = tmp_path / "a.sql", tmp_path / "b.sql"
    unix.write_bytes(b"SELECT 1;\nSELECT 2;\n")
    dos.write_bytes(b"SELECT 1;\r\nSELECT 2;\r\n")
    other = tmp_path / "c.sql"
    other.write_bytes(b"SELECT 1;\nSELECT 3;\n")
    assert checksum(unix) == checksum(dos) != checksum(other)
