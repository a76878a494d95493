"""Issue 28, item 1: every frequency a keyword score uses is the searched KB's own (sql/0018).

Two tenants: tenant B's keyword results and scores are the same whether tenant A holds none, one
or hundreds of chunks with B's words, before and after the fold, and after an ANALYZE (the old
global ``pg_stats`` path). The per-KB counts stay exact through inserts, deletes, updates and
folds, and the migration backfills the chunks written before it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from knowledge_service.search.retrieval import Mode, SearchParams, search
from shared.adapters.postgres.migrate import migrate
from shared.adapters.postgres.pg_store import PgMaintenance
from shared.adapters.postgres.reads import PgSearch
from shared.adapters.postgres.repo import term_stats as term_stats_repo
from shared.adapters.postgres.repo import users as users_repo
from task_service.jobs import term_stats as term_stats_job

ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
TERM_STATS_VERSION = 18

B_TEXTS = [
    "the harbour ledger of the north depot",
    "ledger entries for pallets and crates",
    "harbour pilots and tug boats",
    "a note on crates stacked at the harbour",
    "ferry timetable with departures every hour",
]
QUERIES = [
    "ledger zyxquor",  # B's word + a word only A holds (the attack of issue 28)
    "ledger qqqabsent",  # B's word + a word nobody holds: must score as the one above
    "harbour common",  # B's word + a word frequent in A (many chunks)
    "ledger",  # a word frequent in A too
    "crates harbour ledger",
    "common",  # only A holds it: B finds nothing
]


async def _kb(conn: asyncpg.Connection) -> int:
    user_id = await users_repo.create_user(conn, f"it-{uuid.uuid4().hex}")
    return int((await users_repo.create_kb(conn, user_id, "kb", "all-MiniLM-L6-v2", 384))["kb_id"])


async def _doc(conn: asyncpg.Connection, kb_id: int, texts: list[str]) -> int:
    """A document of ``texts`` chunks written in ONE statement (as the worker's COPY)."""
    doc_id = await conn.fetchval(
        "INSERT INTO document_info (kb_id, user_id, filename, size_bytes, sha256, object_key, status, chunk_count)"
        " SELECT $1, user_id, 'd.txt', 1, $3, $2, 'INDEXED', 1 FROM knowledge_base WHERE id = $1 RETURNING id",
        kb_id, f"k/{uuid.uuid4()}", uuid.uuid4().hex,
    )
    await conn.execute(
        "INSERT INTO document_chunk (document_id, chunk_index, content, token_count)"
        " SELECT $1, i - 1, t, 1 FROM unnest($2::text[]) WITH ORDINALITY AS u(t, i)", doc_id, texts,
    )
    return int(doc_id)


async def _fold_all(conn: asyncpg.Connection) -> None:
    while (done := await term_stats_repo.fold(conn, 100_000)) is None or done.moved == 100_000:
        pass


async def _answers(conn: asyncpg.Connection, kb: int) -> dict[str, list[tuple[int, float]]]:
    reads = PgSearch(conn)
    return {q: [(h.chunk_id, h.score) for h in await search(reads, kb, Mode.KEYWORD, q, None, 10, SearchParams())]
            for q in QUERIES}


async def _true_df(conn: asyncpg.Connection, kb: int, term: str) -> int:
    if term == "":
        return int(await conn.fetchval("SELECT count(*) FROM document_chunk WHERE kb_id = $1", kb))
    return int(await conn.fetchval(
        "SELECT count(*) FROM document_chunk WHERE kb_id = $1 AND content_tsv @@ to_tsquery('rag_simple', $2)",
        kb, term))


async def test_tenant_b_scores_do_not_depend_on_tenant_a_words(db: asyncpg.Connection) -> None:
    b = await _kb(db)
    await _doc(db, b, B_TEXTS)
    alone = await _answers(db, b)
    assert alone["ledger zyxquor"] and alone["ledger zyxquor"][0][1] == 1.0  # "zyxquor" is nowhere in B
    assert alone["ledger zyxquor"] == alone["ledger qqqabsent"]
    assert alone["common"] == []

    a = await _kb(db)
    rare = await _doc(db, a, ["zyxquor ledger"])  # one chunk: the rare word
    frequent = await _doc(db, a, [f"common ledger harbour crates filler {i}" for i in range(400)])
    assert await _answers(db, b) == alone, "A's words changed B's scores (deltas pending)"
    await _fold_all(db)
    assert await _answers(db, b) == alone, "A's words changed B's scores (folded)"
    await db.execute("ANALYZE document_chunk")  # the old path read the table's global pg_stats
    assert await _answers(db, b) == alone, "A's words changed B's scores (after ANALYZE)"
    await db.execute("DELETE FROM document_info WHERE id = ANY($1::bigint[])", [rare, frequent])
    assert await _answers(db, b) == alone

    # and the other way round: A sees its own frequencies, not B's
    hits = await search(PgSearch(db), a, Mode.KEYWORD, "ledger", None, 3, SearchParams())
    assert hits == []


async def test_tenant_a_frequencies_count_for_a_only(db: asyncpg.Connection) -> None:
    """A word frequent in KB A weighs little in A's scores and fully in B's, at once."""
    a, b = await _kb(db), await _kb(db)
    await _doc(db, a, [f"common word {i}" for i in range(50)] + ["common rarity"])
    await _doc(db, b, ["common rarity"])
    [hit_a] = [h for h in await search(PgSearch(db), a, Mode.KEYWORD, "common rarity zzz", None, 5, SearchParams())
               if h.content == "common rarity"]
    [hit_b] = await search(PgSearch(db), b, Mode.KEYWORD, "common rarity zzz", None, 5, SearchParams())
    assert hit_b.score == 1.0  # both words in B's one chunk: the whole weight held
    assert hit_a.score == 1.0  # in A too (its chunk holds both)
    only_common_a = await search(PgSearch(db), a, Mode.KEYWORD, "common rarity", None, 60, SearchParams())
    partial = next(h for h in only_common_a if h.content == "common word 0")
    assert partial.score < 0.1  # "common" is in every chunk of A: it carries almost no weight there


async def test_counts_stay_exact_through_writes_and_folds(db: asyncpg.Connection) -> None:
    kb, other = await _kb(db), await _kb(db)
    terms = ["", "harbour", "ledger", "crates", "ferry", "nothing"]

    async def check() -> None:
        got = await term_stats_repo.kb_document_frequencies(db, kb, terms)
        want = {t: await _true_df(db, kb, t) for t in terms}
        assert {t: got.get(t, 0) for t in terms} == want

    first = await _doc(db, kb, B_TEXTS)
    await _doc(db, other, B_TEXTS * 3)
    await check()
    await _fold_all(db)
    await check()
    second = await _doc(db, kb, ["harbour harbour harbour", "ledger crates"])
    await db.execute("UPDATE document_chunk SET content = 'ferry only' WHERE document_id = $1 AND chunk_index = 0",
                     first)
    await check()
    await db.execute("DELETE FROM document_chunk WHERE document_id = $1", second)
    await check()
    await _fold_all(db)
    await check()
    await db.execute("DELETE FROM document_info WHERE kb_id = $1", kb)
    await _fold_all(db)
    assert await db.fetchval("SELECT count(*) FROM kb_term WHERE kb_id = $1", kb) == 0  # zeros dropped
    assert await db.fetchval("SELECT df FROM kb_term WHERE kb_id = $1 AND term = ''", other) == 3 * len(B_TEXTS)


async def test_a_fold_waits_for_no_one_and_one_runs_at_a_time(db: asyncpg.Connection,
                                                              pool: asyncpg.Pool) -> None:
    kb = await _kb(db)
    await _doc(db, kb, ["one two"])
    async with pool.acquire() as holder, holder.transaction():
        await holder.execute("SELECT pg_advisory_xact_lock($1)", 0x4B425446)
        assert await term_stats_repo.fold(db, 10) is None
    done = await term_stats_repo.fold(db, 100_000)
    assert done is not None and done.moved >= 3
    with pytest.raises(ValueError):
        await term_stats_repo.fold(db, 0)


@pytest.fixture
async def scratch() -> AsyncIterator[str]:
    name = f"rag_mig_{uuid.uuid4().hex[:12]}"
    yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def test_migration_backfills_the_counts_of_existing_chunks(scratch: str) -> None:
    await migrate(scratch, target=TERM_STATS_VERSION - 1)
    conn = await asyncpg.connect(scratch)
    try:
        kbs = [await _kb(conn) for _ in range(2)]
        await _doc(conn, kbs[0], B_TEXTS)
        await _doc(conn, kbs[1], B_TEXTS[:2])
        assert TERM_STATS_VERSION in await migrate(scratch)
        for kb in kbs:
            got = await term_stats_repo.kb_document_frequencies(conn, kb, ["", "ledger", "harbour"])
            assert got == {t: await _true_df(conn, kb, t) for t in ["", "ledger", "harbour"]
                           if await _true_df(conn, kb, t)}
        assert await term_stats_repo.pending(conn) == 0
    finally:
        await conn.close()


async def test_the_job_folds_everything_pending(db: asyncpg.Connection, pool: asyncpg.Pool) -> None:
    kb = await _kb(db)
    await _doc(db, kb, B_TEXTS)
    before = await term_stats_repo.kb_document_frequencies(db, kb, ["", "ledger"])
    report = await term_stats_job.fold_all(PgMaintenance(pool), batch=7)  # several passes of 7 deltas
    assert report["folded"] is not None and report["folded"] > 7 and report["pending"] == 0
    assert await term_stats_repo.kb_document_frequencies(db, kb, ["", "ledger"]) == before == {"": 5, "ledger": 2}
