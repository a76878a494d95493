"""Issue 13 on the real database: the embedding cache's statements (store, lookup, touch, LRU
eviction), the KB content slot that lets PostgreSQL decide between concurrent identical uploads, and
the batched ``delivery_skip`` insert of the drain path."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import numpy as np

from shared.adapters.postgres.repo import cache as cache_repo
from shared.adapters.postgres.repo import documents as documents_repo
from shared.adapters.postgres.repo import knowledge_bases as kb_repo
from shared.adapters.postgres.repo import runs as runs_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.domain import records
from shared.domain.fencing import Action, EnqueueDecision
from shared.domain.states import TaskStatus
from task_service.indexing.embedding_cache import text_key
from tests.integration.helpers import DIM, chunk_set, claim_attempt, commit, new_document


def NS(model: str, revision: str) -> records.CacheNamespace:
    return records.CacheNamespace(model, revision, DIM)


def _vecs(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


async def _owner(conn: asyncpg.Connection) -> tuple[int, int]:
    """``(user_id, document_id)``: a fresh user's document, the owner of the entries a test writes."""
    msg, _ = await new_document(conn)
    return msg.user_id, msg.document_id


async def test_store_then_lookup_by_namespace_first_writer_wins(db: asyncpg.Connection) -> None:
    model = f"m-{uuid.uuid4().hex}"
    user, doc = await _owner(db)
    keys = [text_key(f"chunk {i}") for i in range(5)]
    vecs = _vecs(5, 1)
    assert await cache_repo.cache_lookup(db, user, NS(model, "dim384"), keys) == {}
    assert await cache_repo.cache_store(db, user, doc, NS(model, "dim384"), keys[:3], vecs[:3]) == 3
    # ON CONFLICT DO NOTHING: a second writer of the same texts adds only what is new
    assert await cache_repo.cache_store(db, user, doc, NS(model, "dim384"), keys[1:], _vecs(4, 2)) == 2
    got = await cache_repo.cache_lookup(db, user, NS(model, "dim384"), keys + keys[:1])
    assert set(got) == set(keys)
    np.testing.assert_allclose(got[keys[1]], vecs[1], atol=1e-6)  # the first writer's vector
    assert got[keys[0]].dtype == np.float32 and got[keys[0]].shape == (DIM,)
    # another revision (or model) never reads these vectors
    assert await cache_repo.cache_lookup(db, user, NS(model, "rev-2"), keys) == {}
    assert await cache_repo.cache_lookup(db, user, NS(model + "x", "dim384"), keys) == {}


async def test_another_user_neither_reads_nor_touches_the_entries(db: asyncpg.Connection) -> None:
    """Issue 18: the cache is per user; another tenant's lookup of the same texts misses."""
    model = f"m-{uuid.uuid4().hex}"
    (alice, alice_doc), (bob, bob_doc) = await _owner(db), await _owner(db)
    keys = [text_key(f"secret {i}") for i in range(3)]
    assert await cache_repo.cache_store(db, alice, alice_doc, NS(model, "r"), keys, _vecs(3, 7)) == 3
    assert await cache_repo.cache_lookup(db, bob, NS(model, "r"), keys) == {}
    assert await cache_repo.cache_touch(db, bob, NS(model, "r"), keys, 0) == 0
    # a document that is not the owner's writes nothing
    assert await cache_repo.cache_store(db, bob, alice_doc, NS(model, "r"), keys, _vecs(3, 8)) == 0
    # Bob's own copy is his: the same texts, a second set of rows
    assert await cache_repo.cache_store(db, bob, bob_doc, NS(model, "r"), keys, _vecs(3, 8)) == 3
    assert await db.fetchval("SELECT count(DISTINCT user_id) FROM embedding_cache WHERE model = $1", model) == 2


async def test_concurrent_writers_of_overlapping_keys_neither_deadlock_nor_duplicate(
    pool: asyncpg.Pool,
) -> None:
    model = f"m-{uuid.uuid4().hex}"
    keys = [text_key(f"shared {i}") for i in range(50)]
    vecs = _vecs(50, 3)
    async with pool.acquire() as conn:
        user, doc = await _owner(conn)

    async def write(order: list[int]) -> int:
        async with pool.acquire() as conn:
            return await cache_repo.cache_store(conn, user, doc, NS(model, "r"), [keys[i] for i in order],
                                                vecs[order])

    added = await asyncio.gather(*(write(list(range(50))[::step]) for step in (1, -1, 1, -1)))
    assert sum(added) == 50
    async with pool.acquire() as conn:
        assert len(await cache_repo.cache_lookup(conn, user, NS(model, "r"), keys)) == 50


async def test_a_hit_touches_last_used_at_most_once_per_interval(db: asyncpg.Connection) -> None:
    model = f"m-{uuid.uuid4().hex}"
    user, doc = await _owner(db)
    keys = [text_key("hot"), text_key("cold")]
    await cache_repo.cache_store(db, user, doc, NS(model, "r"), keys, _vecs(2, 4))
    assert await cache_repo.cache_touch(db, user, NS(model, "r"), keys, 3600) == 0  # just written: fresh enough
    await db.execute("UPDATE embedding_cache SET last_used = now() - interval '2 hours' WHERE model = $1", model)
    assert await cache_repo.cache_touch(db, user, NS(model, "r"), keys[:1], 3600) == 1
    assert await cache_repo.cache_touch(db, user, NS(model, "r"), keys[:1], 3600) == 0  # second hit: no write
    ages = dict(await db.fetch("SELECT text_sha256, now() - last_used > interval '1 hour' FROM embedding_cache"
                               " WHERE model = $1", model))
    assert ages == {keys[0]: False, keys[1]: True}


async def test_eviction_deletes_the_least_recently_used_above_the_bound(db: asyncpg.Connection) -> None:
    model = f"m-{uuid.uuid4().hex}"
    user, doc = await _owner(db)
    before = int(await db.fetchval("SELECT count(*) FROM embedding_cache"))
    keys = [text_key(f"lru {i}") for i in range(20)]
    await cache_repo.cache_store(db, user, doc, NS(model, "r"), keys, _vecs(20, 5))
    # older than anything else in the table: key i last used at 2000-01-01 + i s
    for i, k in enumerate(keys):
        await db.execute("UPDATE embedding_cache SET last_used = timestamptz '2000-01-01' + make_interval(secs => $2)"
                         " WHERE model = $1 AND text_sha256 = $3", model, i, k)
    assert await cache_repo.cache_evict(db, before + 20, 0.9) == 0  # within the bound
    assert await cache_repo.cache_evict(db, before + 10, 1.0) == 10
    left = await cache_repo.cache_lookup(db, user, NS(model, "r"), keys)
    assert set(left) == set(keys[10:])


async def _cached(conn: asyncpg.Connection, user: int, model: str, texts: list[str]) -> set[str]:
    got = await cache_repo.cache_lookup(conn, user, NS(model, "r"), [text_key(t) for t in texts])
    return {t for t in texts if text_key(t) in got}


async def test_a_document_delete_releases_the_texts_no_chunk_of_the_owner_has(db: asyncpg.Connection) -> None:
    """Issue 18: a deleted document takes its entries along, except those a remaining chunk of the
    same user still has; a store after the delete adds nothing. A version swap keeps the old
    version's entries (P3: going back costs no model call); a knowledge-base delete drops every
    entry of the owner no chunk of theirs has."""
    model = f"m-{uuid.uuid4().hex}"
    first, _ = await new_document(db)
    second, _ = await new_document(db, (first.user_id, first.kb_id))
    user = first.user_id
    a, vecs = chunk_set(3, "a")  # "a chunk 0..2"
    shared_text = a[0].content
    for msg, chunks in ((first, a), (second, [records.Chunk(0, shared_text, 1)])):
        assert await claim_attempt(db, msg.task_id, 1) == 1
        assert await commit(db, msg, 1, 1, chunks, vecs[:len(chunks)])
    texts = [c.content for c in a]
    await cache_repo.cache_store(db, user, first.document_id, NS(model, "r"), [text_key(t) for t in texts], vecs)
    assert await _cached(db, user, model, texts) == set(texts)
    # stored keys match what the database computes for a chunk (the trigger's formula)
    assert await db.fetchval("SELECT bool_and(text_sha256 = sha256(convert_to(content, 'UTF8')))"
                             " FROM document_chunk WHERE document_id = $1", first.document_id)
    assert await documents_repo.delete_document(db, first.document_id)
    assert await _cached(db, user, model, texts) == {shared_text}  # the second document still has it
    assert await cache_repo.cache_store(db, user, first.document_id, NS(model, "r"),
                                        [text_key(texts[1])], vecs[1:2]) == 0  # deleted: nothing added
    # a version swap keeps what the old version had
    snap = await tasks_repo.load_task_snapshot(db, second.task_id)
    assert snap is not None
    decision = EnqueueDecision(Action.ISSUE, new_status=TaskStatus.WAITING, reason="reindex")
    assert await tasks_repo.try_issue_generation(db, snap, decision, None) is not None
    attempt = await claim_attempt(db, second.task_id, 2)
    assert attempt is not None
    assert await commit(db, second, 2, attempt, [records.Chunk(0, "brand new text", 1)], vecs[:1])
    assert await _cached(db, user, model, texts) == {shared_text}
    # the knowledge base's delete: nothing of the owner's is left that no chunk has
    assert await kb_repo.delete_knowledge_base(db, user, first.kb_id) == 1
    assert await db.fetchval("SELECT count(*) FROM embedding_cache WHERE user_id = $1", user) == 0


async def test_one_evictor_at_a_time(connect: object, db: asyncpg.Connection) -> None:
    other: asyncpg.Connection = await connect()  # type: ignore[operator]
    async with other.transaction():
        await other.execute("SELECT pg_advisory_xact_lock($1)", cache_repo._EVICT_LOCK_KEY)
        assert await cache_repo.cache_evict(db, 0, 0.9) is None  # skipped, not waiting


async def test_concurrent_identical_uploads_create_one_document(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        first, _ = await new_document(conn)
    sha = uuid.uuid4().hex * 2

    async def upload(i: int, slot: bool) -> int | str:
        async with pool.acquire() as conn:
            try:
                content = records.NewContent(f"same-{i}.txt", "text/plain", 5, sha, f"k/{uuid.uuid4()}")
                msg, _ = await documents_repo.create_document_with_task(
                    conn, kb_id=first.kb_id, user_id=first.user_id, content=content, dedup_slot=slot,
                )
            except asyncpg.UniqueViolationError as exc:
                assert documents_repo.is_content_conflict(exc)
                return "conflict"
            return msg.document_id

    got = await asyncio.gather(*(upload(i, True) for i in range(8)))
    winners = [g for g in got if g != "conflict"]
    assert len(winners) == 1, got
    async with pool.acquire() as conn:
        same = await documents_repo.find_same_content(conn, first.kb_id, sha)
        assert same is not None and same["document_id"] == winners[0]
        assert same["task_status"] == "WAITING"
    # allow_duplicate uploads hold no slot: they coexist with the winner
    copies = await asyncio.gather(*(upload(10 + i, False) for i in range(2)))
    assert "conflict" not in copies
    # new content equal to the winner's never collides (a replaced document holds no slot)
    async with pool.acquire() as conn:
        snap = await tasks_repo.load_task_snapshot(conn, first.task_id)
        assert snap is not None and snap.status is TaskStatus.WAITING
        decision = EnqueueDecision(Action.ISSUE, new_status=TaskStatus.WAITING, reason="new_content")
        content = records.NewContent("v2.txt", "text/plain", 5, sha, f"k/{uuid.uuid4()}")
        assert await tasks_repo.try_issue_generation(conn, snap, decision, content) is not None
        n = await conn.fetchval("SELECT count(*) FROM document_info WHERE kb_id = $1 AND sha256 = $2",
                                first.kb_id, sha)
        assert n == 4


async def test_skip_rows_are_written_in_one_statement(db: asyncpg.Connection) -> None:
    worker = f"w-{uuid.uuid4().hex}"
    skips = [records.SkipRecord("not_runnable", 10 + i, 20 + i, 1) for i in range(300)]
    skips.append(records.SkipRecord("invalid_message", None, None, None))
    await runs_repo.record_skips(db, skips, worker)
    rows = await db.fetch("SELECT reason, task_id, document_id, generation FROM delivery_skip WHERE worker = $1"
                          " ORDER BY id", worker)
    assert [(r["reason"], r["task_id"], r["document_id"], r["generation"]) for r in rows] == [
        (s.reason, s.task_id, s.document_id, s.generation) for s in skips]
