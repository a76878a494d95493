"""Issue 9: the search SQL (knowledge_service.search.retrieval) on the real database: exact and HNSW vector search
agree, keyword search finds identifiers, CJK and accented text, and hybrid reports both ranks."""

from __future__ import annotations

import uuid

import asyncpg
import numpy as np
import pytest

from knowledge_service.search.retrieval import Mode, SearchParams, keyword_ranking, search, vector_ranking
from shared.adapters.postgres.reads import PgSearch
from shared.adapters.postgres.repo import users as users_repo

DIM = 384


async def _kb(conn: asyncpg.Connection) -> int:
    user_id = await users_repo.create_user(conn, f"it-{uuid.uuid4().hex}")
    return int((await users_repo.create_kb(conn, user_id, "kb", "all-MiniLM-L6-v2", DIM))["kb_id"])


async def _doc(conn: asyncpg.Connection, kb_id: int, texts: list[str], vecs: np.ndarray,
               page: int | None = None, section: str | None = None, sha256: str | None = None) -> list[int]:
    """One document holding ``texts`` as chunks (with ``vecs``); returns the chunk ids.
    ``sha256``: its content hash (default: a fresh one; equal hashes are copies of one file)."""
    user_id = await conn.fetchval("SELECT user_id FROM knowledge_base WHERE id = $1", kb_id)
    doc_id = await conn.fetchval(
        "INSERT INTO document_info (kb_id, user_id, filename, size_bytes, sha256, object_key, status, chunk_count)"
        " VALUES ($1, $2, 'd.txt', 1, $5, $3, 'INDEXED', $4) RETURNING id",
        kb_id, user_id, f"k/{uuid.uuid4()}", len(texts), sha256 or uuid.uuid4().hex,
    )
    ids = []
    for i, (text, vec) in enumerate(zip(texts, vecs, strict=True)):
        cid = await conn.fetchval(
            "INSERT INTO document_chunk (document_id, chunk_index, content, token_count, page, section)"
            " VALUES ($1, $2, $3, 1, $4, $5) RETURNING id", doc_id, i, text, page, section,
        )
        await conn.execute("INSERT INTO document_vector VALUES ($1, $2, $3, $4)", cid, doc_id, kb_id, vec)
        ids.append(cid)
    return ids


def _unit(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


async def test_exact_and_hnsw_vector_search_agree_on_a_small_kb(db: asyncpg.Connection) -> None:
    kb = await _kb(db)
    vecs = _unit(60, 1)
    ids = await _doc(db, kb, [f"text {i}" for i in range(60)], vecs)
    q = vecs[7] + 0.1 * _unit(1, 2)[0]
    truth = [ids[int(i)] for i in np.argsort(-(vecs @ (q / np.linalg.norm(q))))[:10]]
    async with db.transaction():
        exact = await vector_ranking(PgSearch(db), kb, q, 10, SearchParams(exact_max_chunks=1000))
    async with db.transaction():
        hnsw = await vector_ranking(PgSearch(db), kb, q, 10, SearchParams(exact_max_chunks=0, ef_search=400))
    assert [cid for cid, _ in exact] == truth
    assert set(cid for cid, _ in hnsw) == set(truth)
    assert exact[0][1] == pytest.approx(float(vecs[7] @ q / np.linalg.norm(q)), abs=1e-4)


async def test_keyword_finds_identifiers_cjk_and_accents(db: asyncpg.Connection) -> None:
    kb = await _kb(db)
    other = await _kb(db)
    texts = [
        "the harbour ferry leaves at noon every day",
        "error code XK-4471 means the pump lost pressure",
        "人人生而自由，在尊严和权利上一律平等。",
        "Le café crème était délicieux à Paris",
        "chaos marker 7 saffron basalt harbor orchard willow cd32d136",
    ]
    ids = await _doc(db, kb, texts, _unit(len(texts), 3), page=4, section="A > B")
    await _doc(db, other, ["error code XK-4471 in another KB"], _unit(1, 4))
    p = SearchParams()

    async def top(q: str) -> int:
        return (await keyword_ranking(PgSearch(db), kb, q, 5, p))[0][0]

    assert await top("XK-4471") == ids[1]
    assert await top("4471") == ids[1]
    assert await top("what does cd32d136 mean") == ids[4]
    assert await top("自由") == ids[2]
    assert await top("尊严") == ids[2]
    assert await top("cafe creme") == ids[3]
    assert await top("café") == ids[3]
    got = await keyword_ranking(PgSearch(db), kb, "XK-4471", 5, p)
    assert [cid for cid, _ in got] == [ids[1]]  # the other KB's chunk is not returned
    assert 1.0 < got[0][1] <= 2.0  # all terms (1) + the whole query as a phrase (1)
    assert await keyword_ranking(PgSearch(db), kb, "nothing here matches", 5, p) == []
    assert await keyword_ranking(PgSearch(db), kb, "!!!", 5, p) == []


async def test_hybrid_reports_both_ranks_page_and_section(db: asyncpg.Connection) -> None:
    kb = await _kb(db)
    vecs = _unit(3, 5)
    ids = await _doc(db, kb, ["alpha beta", "gamma delta PN-88A1", "epsilon"], vecs, page=2, section="Intro")
    hits = await search(PgSearch(db), kb, Mode.HYBRID, "PN-88A1", vecs[1], 3, SearchParams())
    assert hits[0].chunk_id == ids[1]
    assert hits[0].sources == {"vector": 1, "keyword": 1}
    assert hits[0].score == pytest.approx(1 + 2 / 61)  # RRF + 1: the only chunk holding the code (decisive)
    assert (hits[0].page, hits[0].section) == (2, "Intro")
    assert all(h.sources.keys() == {"vector"} for h in hits[1:])
    only_kw = await search(PgSearch(db), kb, Mode.KEYWORD, "gamma", None, 3, SearchParams())
    assert [(h.chunk_id, h.sources) for h in only_kw] == [(ids[1], {"keyword": 1})]
    with pytest.raises(ValueError):
        await search(PgSearch(db), kb, Mode.VECTOR, "x", None, 3, SearchParams())


async def test_hybrid_through_a_pool_runs_both_lists_and_agrees(db: asyncpg.Connection, pool: asyncpg.Pool) -> None:
    kb = await _kb(db)
    vecs = _unit(4, 6)
    ids = await _doc(db, kb, ["alpha", "beta ZX-9", "gamma", "delta"], vecs)
    one = await search(PgSearch(db), kb, Mode.HYBRID, "ZX-9", vecs[2], 4, SearchParams())
    two = await search(PgSearch(pool), kb, Mode.HYBRID, "ZX-9", vecs[2], 4, SearchParams())
    assert [(h.chunk_id, h.sources) for h in one] == [(h.chunk_id, h.sources) for h in two]
    assert {h.chunk_id: h.sources for h in two}[ids[1]]["keyword"] == 1


async def test_copies_of_a_file_never_show_the_same_chunk_twice(db: asyncpg.Connection, pool: asyncpg.Pool) -> None:
    """Issue 13: three copies of one file (uploaded with allow_duplicate) and one other file; every
    mode returns one hit per (content hash, chunk index), the best copy's, and still fills top_k."""
    kb = await _kb(db)
    texts = [f"harbour ferry timetable part {i} QW-{i}7" for i in range(6)]
    vecs = _unit(6, 7)
    copies = [await _doc(db, kb, texts, vecs, sha256="c" * 64) for _ in range(3)]
    other = await _doc(db, kb, [f"harbour ferry notes {i}" for i in range(3)], _unit(3, 8))
    content = {cid: ("c", i) for ids in copies for i, cid in enumerate(ids)} | {cid: ("o", i)
                                                                               for i, cid in enumerate(other)}
    for mode in Mode:
        for db_or_pool in (db, pool):
            hits = await search(PgSearch(db_or_pool), kb, mode, "harbour ferry", vecs[2], 9,
                                SearchParams(candidate_depth=4))
            keys = [content[h.chunk_id] for h in hits]
            assert len(keys) == len(set(keys)), (mode, keys)
            assert len(hits) == 9, (mode, keys)  # 6 distinct chunks of the copies + 3 of the other file
            assert all(h.chunk_id in copies[0] for h in hits if content[h.chunk_id][0] == "c"), mode  # oldest copy
    top = await search(PgSearch(db), kb, Mode.VECTOR, "x", vecs[2], 1, SearchParams())
    assert top[0].chunk_id == copies[0][2] and top[0].score == pytest.approx(1.0, abs=1e-5)
