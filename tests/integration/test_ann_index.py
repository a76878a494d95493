"""Issue 31: vectors enter the HNSW index behind the commits (the ANN job), and vector search
above the exact threshold (HNSW over ``ann`` rows merged with an exact scan of the rest) gives
what exact search gives."""

from __future__ import annotations

import asyncpg
import pytest

from knowledge_service.search.retrieval import SearchParams, vector_ranking
from shared.adapters.postgres.pg_store import PgMaintenance
from shared.adapters.postgres.reads import PgSearch
from shared.adapters.postgres.repo.search import _HNSW
from task_service.jobs import ann_indexer
from tests.integration.test_retrieval import _doc, _kb, _unit


async def _ann(conn: asyncpg.Connection, kb: int) -> tuple[int, int]:
    r = await conn.fetchrow("SELECT count(*) FILTER (WHERE ann) AS a, count(*) FILTER (WHERE NOT ann) AS n"
                            " FROM document_vector WHERE kb_id = $1", kb)
    return int(r["a"]), int(r["n"])


@pytest.mark.parametrize("indexed", [0, 30, 60])
async def test_search_over_ann_and_not_yet_indexed_rows_equals_exact(db: asyncpg.Connection, indexed: int) -> None:
    kb = await _kb(db)
    vecs = _unit(60, 11)
    ids = await _doc(db, kb, [f"text {i}" for i in range(60)], vecs)
    await db.execute("UPDATE document_vector SET ann = true WHERE chunk_id = ANY($1::bigint[])", ids[:indexed])
    for seed in range(5):
        q = vecs[seed * 7] + 0.2 * _unit(1, 100 + seed)[0]
        async with db.transaction():
            exact = await vector_ranking(PgSearch(db), kb, q, 10, SearchParams(exact_max_chunks=1000))
        async with db.transaction():
            merged = await vector_ranking(PgSearch(db), kb, q, 10, SearchParams(exact_max_chunks=0, ef_search=400))
        assert [c for c, _ in merged] == [c for c, _ in exact]
        assert [s for _, s in merged] == pytest.approx([s for _, s in exact], abs=1e-5)


async def test_the_ann_rows_are_read_through_the_hnsw_index(db: asyncpg.Connection) -> None:
    kb = await _kb(db)
    vecs = _unit(20, 12)
    await _doc(db, kb, [f"t {i}" for i in range(20)], vecs)
    await db.execute("UPDATE document_vector SET ann = true WHERE kb_id = $1", kb)
    async with db.transaction():  # a small table: only with the scans a big KB makes too costly disabled
        await db.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off")
        plan = "\n".join(r[0] for r in await db.fetch(f"EXPLAIN {_HNSW}", vecs[0], kb, 5))
    assert "document_vector_embedding_hnsw" in plan


async def test_the_job_indexes_only_the_kbs_above_the_threshold(pool: asyncpg.Pool, db: asyncpg.Connection) -> None:
    small, big = await _kb(db), await _kb(db)
    await _doc(db, small, [f"s {i}" for i in range(5)], _unit(5, 13))
    await _doc(db, big, [f"b {i}" for i in range(25)], _unit(25, 14))
    assert await _ann(db, big) == (0, 25)  # a commit inserts outside the index
    added = await ann_indexer.once(PgMaintenance(pool), batch=10, exact_max_chunks=10)  # three batches: 10 + 10 + 5
    assert added >= 25
    assert await _ann(db, big) == (25, 0)
    assert await _ann(db, small) == (0, 5)
