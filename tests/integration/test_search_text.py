"""Issue 17 on the real database: identical chunk texts are one hit, keyword search finds words
inside runs of scripts written without spaces (Thai, Lao, Khmer, Myanmar) and Hangul words with
attached particles, and words whose document text held invisible characters."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import asyncpg
import numpy as np
import pytest
from pgvector.asyncpg import register_vector

from knowledge_service.schemas import SearchRequest
from knowledge_service.search.retrieval import Mode, SearchParams, keyword_ranking, search
from shared.adapters.postgres.migrate import migrate
from shared.adapters.postgres.reads import PgSearch
from shared.adapters.postgres.repo import users as users_repo
from task_service.pipeline.parse import parse_text

DIM = 384


async def _kb(conn: asyncpg.Connection) -> int:
    user_id = await users_repo.create_user(conn, f"it-{uuid.uuid4().hex}")
    return int((await users_repo.create_kb(conn, user_id, "kb", "all-MiniLM-L6-v2", DIM))["kb_id"])


def _unit(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


async def _doc(conn: asyncpg.Connection, kb_id: int, texts: list[str], vecs: np.ndarray | None = None) -> list[int]:
    """One document (a fresh content hash) holding ``texts`` as chunks; returns the chunk ids."""
    vecs = _unit(len(texts), len(texts)) if vecs is None else vecs
    user_id = await conn.fetchval("SELECT user_id FROM knowledge_base WHERE id = $1", kb_id)
    doc_id = await conn.fetchval(
        "INSERT INTO document_info (kb_id, user_id, filename, size_bytes, sha256, object_key, status, chunk_count)"
        " VALUES ($1, $2, 'd.txt', 1, $5, $3, 'INDEXED', $4) RETURNING id",
        kb_id, user_id, f"k/{uuid.uuid4()}", len(texts), uuid.uuid4().hex,
    )
    ids = []
    for i, (text, vec) in enumerate(zip(texts, vecs, strict=True)):
        cid = await conn.fetchval(
            "INSERT INTO document_chunk (document_id, chunk_index, content, token_count)"
            " VALUES ($1, $2, $3, 1) RETURNING id", doc_id, i, text,
        )
        await conn.execute("INSERT INTO document_vector VALUES ($1, $2, $3, $4)", cid, doc_id, kb_id, vec)
        ids.append(cid)
    return ids


# ---------------------------------------------------------------- item 5: identical texts, one hit


async def test_identical_chunk_texts_are_one_hit_within_and_across_documents(
    db: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    """A document repeating one paragraph, and another document holding it too: every mode returns
    the paragraph once (its best-ranked chunk) and fills top_k with the other texts."""
    kb = await _kb(db)
    para = "The harbour ferry leaves at noon; tickets QW-77 are sold on board."
    vecs = _unit(6, 11)
    same = vecs[0]
    first = await _doc(db, kb, [para, "harbour ferry notes one", para, "harbour ferry notes two", para],
                       np.stack([same, vecs[1], same, vecs[2], same]))
    second = await _doc(db, kb, ["harbour ferry notes three", para], np.stack([vecs[3], same]))
    for mode in Mode:
        for db_or_pool in (db, pool):
            hits = await search(PgSearch(db_or_pool), kb, mode, "harbour ferry QW-77", same, 5,
                                SearchParams(candidate_depth=3))
            texts = [h.content for h in hits]
            assert texts.count(para) == 1, (mode, texts)
            assert len(hits) == 4, (mode, texts)  # the paragraph + three distinct notes
            assert next(h.chunk_id for h in hits if h.content == para) in (first[0], first[2], first[4], second[1])
    top = await search(PgSearch(db), kb, Mode.KEYWORD, "QW-77", None, 5, SearchParams())
    assert [h.chunk_id for h in top] == [first[0]]  # equal scores: the first chunk is kept


async def test_a_collapsed_hit_names_every_other_chunk_holding_its_text(
    db: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    """Issue 29: the passage two documents share is one hit, and the hit names the other document
    (and the repeats within its own) in every mode; a text held once names none."""
    kb = await _kb(db)
    para = "The Tamberlyn depot closes at six; ask for Mr Ostrowick at the gate."
    vecs = _unit(4, 12)
    first = await _doc(db, kb, [para, "depot notes one", para], np.stack([vecs[0], vecs[1], vecs[0]]))
    second = await _doc(db, kb, ["depot notes two", para], np.stack([vecs[2], vecs[0]]))
    second_doc = await db.fetchval("SELECT document_id FROM document_chunk WHERE id = $1", second[1])
    for mode in Mode:
        for db_or_pool in (db, pool):
            hits = await search(PgSearch(db_or_pool), kb, mode, "Tamberlyn depot Ostrowick", vecs[0], 5,
                                SearchParams())
            [hit] = [h for h in hits if h.content == para]
            held = {hit.chunk_id, *(c.chunk_id for c in hit.also_in)}
            assert held == {first[0], first[2], second[1]}, (mode, hit)
            assert hit.also_in_total == 2 and second_doc in {c.document_id for c in hit.also_in}
            assert all(h.also_in == () and h.also_in_total == 0 for h in hits if h.content != para)
    details = await PgSearch(db).details([*first, *second])
    assert {cid for cid, d in details.items() if d.has_copies} == {first[0], first[2], second[1]}


# ---------------------------------------------------------------- item 4: every script by keyword

_RUNS = {
    # (chunk text holding the word inside a run, the word, a chunk without it)
    "thai": ("เมื่อวานฉันไปตลาดและซื้อทุเรียนมาสองลูก", "ทุเรียน", "วันนี้อากาศดีมากและฉันไปโรงเรียน"),
    "lao": ("ມື້ວານນີ້ຂ້ອຍໄປຕະຫຼາດແລະຊື້ໝາກມ່ວງ", "ຕະຫຼາດ", "ມື້ນີ້ອາກາດດີຫຼາຍ"),
    "khmer": ("ខ្ញុំចូលចិត្តរៀនភាសាខ្មែរនៅសាលារៀន", "ភាសា", "ថ្ងៃនេះអាកាសធាតុល្អណាស់"),
    "myanmar": ("ကျွန်တော်မနေ့ကဈေးကိုသွားပြီးသစ်သီးဝယ်ခဲ့တယ်", "ဈေး", "ဒီနေ့ရာသီဥတုကောင်းတယ်"),
    "hangul": ("저는 어제 서울에서 친구를 만났어요", "서울", "오늘은 날씨가 아주 좋아요"),
    "hangul one syllable": ("우리는 집에서 책을 읽었어요", "책", "오늘은 날씨가 아주 좋아요"),
}


@pytest.mark.parametrize("script", sorted(_RUNS))
async def test_keyword_finds_a_word_inside_a_run(db: asyncpg.Connection, script: str) -> None:
    kb = await _kb(db)
    text, word, other = _RUNS[script]
    ids = await _doc(db, kb, [other, text, other + " " + other])
    got = await keyword_ranking(PgSearch(db), kb, word, 5, SearchParams())
    assert [cid for cid, _ in got][:1] == [ids[1]], script
    assert got[0][1] > 1.0  # the whole word matched as a phrase


async def test_cjk_and_latin_keyword_search_still_work(db: asyncpg.Connection) -> None:
    kb = await _kb(db)
    ids = await _doc(db, kb, ["人人生而自由，在尊严和权利上一律平等。",
                              "すべての人間は、生まれながらにして自由である。",
                              "error code XK-4471 means the pump lost pressure", "Le café crème était délicieux"])
    p = SearchParams()
    for query, want in (("尊严", ids[0]), ("人", ids[0]), ("人間", ids[1]), ("4471", ids[2]), ("cafe creme", ids[3])):
        assert (await keyword_ranking(PgSearch(db), kb, query, 5, p))[0][0] == want, query


# ---------------------------------------------------------------- item 3: invisible characters


async def test_words_split_by_invisible_characters_are_found_by_the_visible_word(db: asyncpg.Connection) -> None:
    kb = await _kb(db)
    content = parse_text(b"<p>An in&shy;visible mark&#8203;er and a word&#x2060;joiner.</p>", "page.html")
    ids = await _doc(db, kb, [content, "nothing to see here"])
    for typed in ("invisible", "marker", "wordjoiner", "mark\u200ber"):
        query = SearchRequest(query=typed).query
        assert [cid for cid, _ in await keyword_ranking(PgSearch(db), kb, query, 5, SearchParams())] == [ids[0]], typed


# ---------------------------------------------------------------- the migration recomputes old rows

ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
_SQL_0006 = Path(__file__).resolve().parents[2] / "sql" / "0006_keyword_search.sql"


async def test_migration_0014_recomputes_the_keyword_index_of_existing_chunks() -> None:
    name = f"rag_mig_{uuid.uuid4().hex[:12]}"
    dsn = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        await migrate(dsn, target=13)
        conn = await asyncpg.connect(dsn)
        await register_vector(conn)
        try:
            kb = await _kb(conn)
            ids = await _doc(conn, kb, [_RUNS["thai"][0], _RUNS["hangul"][0]])
            matches = ("SELECT content_tsv @@ phraseto_tsquery('rag_simple', rag_search_text($2))"
                       " FROM document_chunk WHERE id = $1")
            assert await conn.fetchval(matches, ids[0], "ทุเรียน") is False  # before: one token per run
            assert await migrate(dsn, target=14) == [14]
            assert await conn.fetchval(matches, ids[0], "ทุเรียน") is True
            assert await conn.fetchval(  # the GIN index is back
                "SELECT count(*) FROM pg_indexes WHERE indexname = 'document_chunk_content_tsv_idx'") == 1
            assert 15 in await migrate(dsn)  # then the KB's own keyword index (issue 20) serves the ranking
            assert [c for c, _ in await keyword_ranking(PgSearch(conn), kb, "ทุเรียน", 5, SearchParams())] == [ids[0]]
            assert [c for c, _ in await keyword_ranking(PgSearch(conn), kb, "서울", 5, SearchParams())] == [ids[1]]
        finally:
            await conn.close()
    finally:
        admin = await asyncpg.connect(ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def test_text_without_these_scripts_is_indexed_exactly_as_before(db: asyncpg.Connection) -> None:
    """No change for Latin, Cyrillic, Greek, Arabic... text: sql/0014's rag_search_text gives what
    0006's gave (so their tsvectors, and keyword results, are the same)."""
    old = _SQL_0006.read_text()
    body = re.search(r"CREATE FUNCTION rag_search_text\(t text\).*?;[ \t]*$", old, re.S | re.M)
    assert body is not None
    texts = ["error code XK-4471 means the pump lost pressure", "Le café crème était délicieux à Paris",
             "Война и мир — роман Льва Толстого.", "Όλοι οι άνθρωποι γεννιούνται ελεύθεροι", "مرحبا بالعالم",
             "INV-2019-100042 and PN-0042AB, a-1 b-2 --3", "", "emoji 👨‍👩‍👧 and tabs\tand\nlines"]
    async with db.transaction():
        await db.execute(body.group(0).replace("CREATE FUNCTION rag_search_text", "CREATE FUNCTION pg_temp.old_text"))
        rows = await db.fetch("SELECT t, rag_search_text(t) AS new, pg_temp.old_text(t) AS old"
                              " FROM unnest($1::text[]) t", texts)
    assert [(r["t"], r["new"]) for r in rows] == [(r["t"], r["old"]) for r in rows]


# ---------------------------------------------------------------- issue 29: every token type of the parser

#: A sample of each token type of PostgreSQL's default text parser (``ts_token_type('default')``) and
#: the words a user types to find it. ``blank`` (spaces, punctuation) holds no word; ``protocol``
#: ("https://") is indexed within its ``url``.
TOKEN_SAMPLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "asciiword": ("Quillmoor", ("Quillmoor", "quillmoor")),
    "word": ("Brückenwärter", ("Brückenwärter", "bruckenwarter")),
    "numword": ("rev2b7", ("rev2b7",)),
    "asciihword": ("gantry-crane", ("gantry-crane", "gantry", "crane")),
    "hword_asciipart": ("gantry-crane", ("crane",)),
    "hword": ("über-brücke", ("über-brücke", "brücke")),
    "hword_part": ("über-brücke", ("über",)),
    "numhword": ("tank-4b", ("tank-4b", "4b")),
    "hword_numpart": ("x2-y3", ("x2-y3", "y3")),
    "email": ("dora@pumpworks.example", ("dora@pumpworks.example",)),
    "protocol": ("https://pumpworks.example/docs/pump.html", ("https://pumpworks.example/docs/pump.html",)),
    "url": ("https://pumpworks.example/docs/pump.html", ("pumpworks.example/docs/pump.html",)),
    "host": ("pumpworks.example", ("pumpworks.example",)),
    "url_path": ("https://pumpworks.example/docs/pump.html", ("/docs/pump.html",)),
    "file": ("/etc/pump/valve.conf", ("/etc/pump/valve.conf",)),
    "sfloat": ("6.02e23", ("6.02e23",)),
    "float": ("3.1415", ("3.1415",)),
    "int": ("-4471", ("-4471",)),
    "uint": ("4471", ("4471",)),
    "version": ("2.13.0", ("2.13.0",)),
    "tag": ("<placeholder>", ("placeholder", "<placeholder>")),
    "entity": ("&amp;", ("amp", "&amp;")),
}
_NO_WORD = {"blank"}


async def test_the_samples_cover_every_token_type_of_the_default_parser(db: asyncpg.Connection) -> None:
    aliases = {r["alias"] for r in await db.fetch("SELECT alias FROM ts_token_type('default')")}
    assert set(TOKEN_SAMPLES) == aliases - _NO_WORD  # a new type of a newer PostgreSQL fails here
    for alias, (sample, _) in TOKEN_SAMPLES.items():
        seen = {r["alias"] for r in await db.fetch("SELECT alias FROM ts_debug('rag_simple', $1)", sample)}
        assert alias in seen, (alias, sample, seen)


async def test_every_word_of_every_token_type_has_a_lexeme(db: asyncpg.Connection) -> None:
    """What ``rag_search_text`` hands the parser leaves no word without a lexeme (tags and entities
    gave none: "List<Order>" was indexed as "list" alone)."""
    for alias, (sample, _) in TOKEN_SAMPLES.items():
        text = f"List<Order> code, then {sample} here"
        rows = await db.fetch("SELECT alias, token, lexemes FROM ts_debug('rag_simple', rag_search_text($1))", text)
        lost = [(r["alias"], r["token"]) for r in rows
                if r["alias"] not in _NO_WORD | {"protocol"} and not r["lexemes"]]
        assert lost == [], (alias, lost)
        assert {"list", "order", "code"} <= set(await db.fetchval(
            "SELECT tsvector_to_array(to_tsvector('rag_simple', rag_search_text($1)))", text))


async def test_every_word_of_every_token_type_is_found_by_keyword(db: asyncpg.Connection) -> None:
    kb = await _kb(db)
    texts = [f"The pump notice {i} mentions {sample} among other things." for i, (sample, _) in
             enumerate(TOKEN_SAMPLES.values())]
    texts.append("How to call List<Order> from a template: replace <username> and <inline-image> first.")
    ids = await _doc(db, kb, texts)
    for (alias, (_, words)), chunk_id in zip(TOKEN_SAMPLES.items(), ids, strict=False):
        for word in words:
            found = [cid for cid, _ in await keyword_ranking(PgSearch(db), kb, word, 5, SearchParams())]
            assert chunk_id in found, (alias, word, found)
    for word in ("Order", "username", "inline-image", "<username>", "List<Order>"):
        found = [cid for cid, _ in await keyword_ranking(PgSearch(db), kb, word, 5, SearchParams())]
        assert found[:1] == [ids[-1]], (word, found)


async def test_migration_0019_recomputes_the_keyword_index_and_the_term_statistics() -> None:
    name = f"rag_mig_{uuid.uuid4().hex[:12]}"
    dsn = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        await migrate(dsn, target=18)
        conn = await asyncpg.connect(dsn)
        await register_vector(conn)
        try:
            kb = await _kb(conn)
            [chunk] = await _doc(conn, kb, ["Replace <placeholder> with the Quillmoor depot's name."])
            assert await keyword_ranking(PgSearch(conn), kb, "placeholder", 5, SearchParams()) == []  # before: a tag
            assert await migrate(dsn, target=19) == [19]
            found = await keyword_ranking(PgSearch(conn), kb, "placeholder", 5, SearchParams())
            assert [c for c, _ in found] == [chunk]
            terms = {r["term"]: r["df"] for r in await conn.fetch(
                "SELECT term, df FROM kb_term WHERE kb_id = $1", kb)}
            assert terms["placeholder"] == 1 and terms["quillmoor"] == 1 and terms[""] == 1
            assert await conn.fetchval("SELECT count(*) FROM kb_term_delta") == 0
            assert await conn.fetchval(
                "SELECT count(*) FROM pg_indexes WHERE indexname = 'document_chunk_kb_tsv_idx'") == 1
        finally:
            await conn.close()
    finally:
        admin = await asyncpg.connect(ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()
