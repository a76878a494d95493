"""Issue 20: sql/0015 (document_chunk.kb_id, backfilled and filled by a trigger; the (kb_id, content_tsv)
GIN index), keyword search served by that index with the KB's own term statistics (sql/0018), and hybrid
search keeping a decisive exact keyword hit on top among look-alike chunks."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import numpy as np
import pytest

from knowledge_service.search.retrieval import Mode, SearchParams, keyword_ranking, search
from shared.adapters.postgres.migrate import migrate
from shared.adapters.postgres.reads import PgSearch
from shared.adapters.postgres.repo import term_stats as term_stats_repo
from shared.adapters.postgres.repo import users as users_repo
from shared.adapters.postgres.repo.search import KEYWORD_SQL, keyword_transaction, ranking_transaction

ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
DIM = 384
KB_INDEX_VERSION = 15


async def _kb(conn: asyncpg.Connection) -> int:
    user_id = await users_repo.create_user(conn, f"it-{uuid.uuid4().hex}")
    return int((await users_repo.create_kb(conn, user_id, "kb", "all-MiniLM-L6-v2", DIM))["kb_id"])


async def _doc(conn: asyncpg.Connection, kb_id: int, texts: list[str], vecs: np.ndarray) -> list[int]:
    user_id = await conn.fetchval("SELECT user_id FROM knowledge_base WHERE id = $1", kb_id)
    doc_id = await conn.fetchval(
        "INSERT INTO document_info (kb_id, user_id, filename, size_bytes, sha256, object_key, status, chunk_count)"
        " VALUES ($1, $2, 'd.txt', 1, $4, $3, 'INDEXED', 1) RETURNING id",
        kb_id, user_id, f"k/{uuid.uuid4()}", uuid.uuid4().hex,
    )
    ids = []
    for i, (text, vec) in enumerate(zip(texts, vecs, strict=True)):
        cid = await conn.fetchval("INSERT INTO document_chunk (document_id, chunk_index, content, token_count)"
                                  " VALUES ($1, $2, $3, 1) RETURNING id", doc_id, i, text)
        await conn.execute("INSERT INTO document_vector VALUES ($1, $2, $3, $4)", cid, doc_id, kb_id, vec)
        ids.append(cid)
    return ids


def _unit(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


@pytest.fixture
async def scratch() -> AsyncIterator[str]:
    name = f"rag_mig_{uuid.uuid4().hex[:12]}"
    yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def test_migration_backfills_kb_id_and_the_trigger_fills_new_rows(scratch: str) -> None:
    await migrate(scratch, target=KB_INDEX_VERSION - 1)
    conn = await asyncpg.connect(scratch)
    try:
        kbs = [await _kb(conn) for _ in range(2)]
        for kb in kbs:  # chunks written before 0015 (no kb_id column yet)
            doc = await conn.fetchval(
                "INSERT INTO document_info (kb_id, user_id, filename, size_bytes, sha256, object_key)"
                " SELECT $1, user_id, 'd', 1, $2, $2 FROM knowledge_base WHERE id = $1 RETURNING id",
                kb, uuid.uuid4().hex)
            await conn.execute("INSERT INTO document_chunk (document_id, chunk_index, content, token_count)"
                               " VALUES ($1, 0, 'old words', 1)", doc)
        assert KB_INDEX_VERSION in await migrate(scratch)
        rows = await conn.fetch("SELECT c.kb_id, d.kb_id AS doc_kb FROM document_chunk c"
                                " JOIN document_info d ON d.id = c.document_id")
        assert sorted(r["kb_id"] for r in rows) == sorted(kbs)
        assert all(r["kb_id"] == r["doc_kb"] for r in rows)
        doc = await conn.fetchval("SELECT id FROM document_info WHERE kb_id = $1", kbs[1])
        new_kb = await conn.fetchval("INSERT INTO document_chunk (document_id, chunk_index, content, token_count)"
                                     " VALUES ($1, 1, 'new words', 1) RETURNING kb_id", doc)
        assert new_kb == kbs[1]
        indexes = {r["indexname"] for r in await conn.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'document_chunk'")}
        assert "document_chunk_kb_tsv_idx" in indexes and "document_chunk_content_tsv_idx" not in indexes
    finally:
        await conn.close()


async def test_keyword_candidates_come_from_the_kb_index_and_stay_in_the_kb(db: asyncpg.Connection) -> None:
    mine, other = await _kb(db), await _kb(db)
    ids = await _doc(db, mine, ["the freight ledger QX-7731", "an unrelated note"], _unit(2, 1))
    await _doc(db, other, ["the freight ledger QX-7731 copied elsewhere"], _unit(1, 2))
    got = await keyword_ranking(PgSearch(db), mine, "QX-7731 ledger", 5, SearchParams())
    assert [cid for cid, _ in got] == [ids[0]]
    async with keyword_transaction(db):  # as the search runs it: no sequential scan, the generic plan
        plan = "\n".join(r[0] for r in await db.fetch("EXPLAIN " + KEYWORD_SQL, "QX-7731 ledger", mine, 5, 2000, 5000))
    assert "document_chunk_kb_tsv_idx" in plan
    assert "Seq Scan on document_chunk" not in plan
    assert "document_info" not in plan  # the KB filter is inside the index, no join per candidate


async def test_folded_term_stats_rank_as_pending_ones(db: asyncpg.Connection) -> None:
    kb = await _kb(db)
    await _doc(db, kb, [f"harbour ferry timetable {i} ZQ-{i}9" for i in range(5)], _unit(5, 3))
    pending = await search(PgSearch(db), kb, Mode.KEYWORD, "ferry ZQ-39", None, 3, SearchParams())
    assert pending and pending[0].content == "harbour ferry timetable 3 ZQ-39"
    while (done := await term_stats_repo.fold(db, 1000)) is None or done.moved:
        pass
    assert await db.fetchval("SELECT count(*) FROM kb_term_delta WHERE kb_id = $1", kb) == 0
    folded = await search(PgSearch(db), kb, Mode.KEYWORD, "ferry ZQ-39", None, 3, SearchParams())
    assert [(h.chunk_id, h.score) for h in folded] == [(h.chunk_id, h.score) for h in pending]


async def test_hybrid_keeps_a_code_only_the_keyword_list_finds(db: asyncpg.Connection, pool: asyncpg.Pool) -> None:
    """Look-alike chunks: the vector list (random here, as MiniLM among look-alikes) never holds the
    code's chunk near the top; plain RRF would rank it below chunks middling in both lists."""
    kb = await _kb(db)
    texts = [f"Depot report {i}: reference INV-{4000 + i}-{i:06x} filed by the north depot, pallets checked"
             for i in range(30)]
    vecs = _unit(30, 4)
    ids = await _doc(db, kb, texts, vecs)
    await db.execute("ANALYZE document_chunk")  # as autovacuum does: the term weights need the row count
    query_vec = _unit(1, 5)[0]
    for i in (3, 17, 28):
        for text in (f"INV-{4000 + i}-{i:06x}", f"which depot filed reference INV-{4000 + i}-{i:06x}?"):
            hits = await search(PgSearch(pool), kb, Mode.HYBRID, text, query_vec, 5, SearchParams())
            assert hits[0].chunk_id == ids[i], text
            assert hits[0].score > 1  # decisive exact hit


async def test_ranking_transactions_set_local_settings_and_end(db: asyncpg.Connection) -> None:
    """BEGIN and SET LOCAL in one round trip: the settings hold inside only; an error rolls back; inside an
    open transaction it is a savepoint that leaves the outer transaction open."""
    async with keyword_transaction(db):
        assert await db.fetchval("SHOW enable_seqscan") == "off"
        assert await db.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
    assert not db.is_in_transaction()
    assert await db.fetchval("SHOW enable_seqscan") == "on"
    with pytest.raises(asyncpg.DivisionByZeroError):
        async with ranking_transaction(db):
            assert await db.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
            await db.fetchval("SELECT 1 / 0")
    assert not db.is_in_transaction()
    async with db.transaction():
        await db.execute("CREATE TEMP TABLE kept (x int)")
        async with keyword_transaction(db):
            assert await db.fetchval("SHOW jit") == "off"
        assert db.is_in_transaction()
        assert await db.fetchval("SELECT count(*) FROM kept") == 0
