"""Retrieval benchmark (issue 9): recall and latency of vector, keyword and hybrid search.

``python -m bench.retrieval [--smoke | --small] [--runs N] [--chunks N] [--script-chunks N]`` creates its own database
(``rag_bench_retrieval_<pid>``, migrated with shared.adapters.postgres.migrate, dropped at the end) and measures,
through ``knowledge_service.search.retrieval`` (the SQL the API runs):

1. a table of ``--chunks`` chunks (default 100,000) in KBs of skewed sizes: real text (windows
   of the corpus novel) with synthetic embeddings (clustered unit vectors: embedding 100k texts
   with MiniLM on this CPU takes ~1.5 h). Vector recall@10 against exact search (numpy) and
   p50/p99 latency per KB size, for exact scan and HNSW at several ef_search; keyword and hybrid
   latency on 8-word corpus sentences;
2. identifier recall@5: a unique token planted in 1,000 chunks, queried alone and inside a sentence;
3. self-retrieval@5 on ../shared/corpus: every file parsed and chunked as the worker does, real
   MiniLM embeddings (cached under .data/bench-cache), 12-word passages, hit = the passage's
   document in the top 5;
4. script recall@5 (issue 17, ``bench/scripts.py``): keyword search for words inside runs of
   Thai, Lao, Khmer, Myanmar, Hangul, Chinese, Japanese and English, per segmentation candidate.

Times are medians over ``--runs`` runs (each run: every query once), with min–max across runs.
Writes the ``retrieval`` section of bench/RESULTS.md (``--smoke`` prints only).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from bench import scripts
from knowledge_service.search.ranking import RRF_K, fuse_hybrid, rrf
from knowledge_service.search.retrieval import Mode, SearchParams, rank
from shared.adapters.postgres.reads import PgSearch
from shared.adapters.postgres.repo.search import _EXACT, _HNSW

ROOT = Path(__file__).resolve().parents[1]
# RAG_CORPUS: another corpus folder (absolute, or relative to the checkout's parent; a worktree: /work/shared/corpus)
CORPUS = ROOT.parent.joinpath(os.environ.get("RAG_CORPUS", "shared/corpus"))
CACHE = ROOT / ".data" / "bench-cache"
DIM = 384
ADMIN_DSN = os.environ.get("BENCH_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
#: KB shares of the table, largest first (skewed); the last KB takes the remainder.
SHARES = (0.40, 0.20, 0.12, 0.08, 0.06, 0.04, 0.03, 0.02, 0.015, 0.01, 0.005, 0.003)
SENTENCES = (
    "where is {} mentioned in the letters",
    "what happened to {} after the battle",
    "please find the record for {} from last year",
    "the prince asked about {} before dinner",
)


@dataclass(frozen=True)
class Size:
    chunks: int
    queries_per_kb: int
    tokens: int
    passages: int
    max_corpus_file: int
    lookalikes: int
    script_chunks: int = 200  # per script (bench/scripts.py)


FULL = Size(chunks=100_000, queries_per_kb=20, tokens=1000, passages=400, max_corpus_file=10**9, lookalikes=120)
#: A bounded run for a shared machine (written to RESULTS.md like the full one, with its sizes).
SMALL = Size(chunks=20_000, queries_per_kb=10, tokens=300, passages=100, max_corpus_file=200_000, lookalikes=40)
SMOKE = Size(chunks=3000, queries_per_kb=5, tokens=40, passages=20, max_corpus_file=200_000, lookalikes=12,
             script_chunks=40)


# ------------------------------------------------------------------ data


def corpus_words(max_file: int) -> list[str]:
    """Words of the corpus' plain-text files (the novel), or of the bundled sample."""
    files = [p for p in sorted(CORPUS.glob("*.txt")) if 1000 < p.stat().st_size <= max_file] if CORPUS.exists() else []
    files = files or [ROOT / "samples" / "indexing-primer.md"]
    words: list[str] = []
    for p in files:
        words.extend(p.read_bytes().decode("utf-8", "replace").split())
    return words


def chunk_texts(words: list[str], n: int, rng: np.random.Generator, length: int = 150) -> list[str]:
    starts = rng.integers(0, max(1, len(words) - length), n)
    return [" ".join(words[s:s + length]) for s in starts]


def clustered_vectors(n: int, rng: np.random.Generator, clusters: int = 500, noise: float = 0.06) -> np.ndarray:
    """Unit vectors around ``clusters`` random centres (mean cosine to the centre ≈ 0.6)."""
    centres = rng.standard_normal((clusters, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    v = centres[rng.integers(0, clusters, n)] + noise * rng.standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


def token(i: int, rng: np.random.Generator) -> str:
    """A unique identifier in one of three shapes: hex id, invoice number, part number."""
    kind = i % 3
    if kind == 0:
        return f"{int(rng.integers(0, 2**32)):08x}{i:x}"
    if kind == 1:
        return f"INV-{2015 + i % 10}-{100000 + i:06d}"
    return f"PN-{i:04d}{chr(65 + i % 26)}{chr(65 + (i // 26) % 26)}"


@dataclass
class Table:
    kb_ids: list[int]
    kb_of: np.ndarray  # kb index per chunk
    chunk_ids: np.ndarray
    vecs: np.ndarray
    texts: list[str]
    planted: dict[str, int]  # token -> chunk row


def kb_sizes(total: int) -> list[int]:
    sizes = [int(total * s) for s in SHARES]
    sizes[-1] += total - sum(sizes)
    return sizes


async def load(conn: asyncpg.Connection, size: Size, rng: np.random.Generator) -> Table:
    words = corpus_words(FULL.max_corpus_file)  # the novel in every size: its vocabulary sets keyword costs
    texts = chunk_texts(words, size.chunks, rng)
    planted: dict[str, int] = {}
    for i, row in enumerate(rng.choice(size.chunks, size.tokens, replace=False)):
        t = token(i, rng)
        w = texts[int(row)].split()
        w.insert(int(rng.integers(0, len(w))), t)
        texts[int(row)] = " ".join(w)
        planted[t] = int(row)
    vecs = clustered_vectors(size.chunks, rng)
    sizes = kb_sizes(size.chunks)
    kb_of = np.repeat(np.arange(len(sizes)), sizes)
    user = await conn.fetchval("INSERT INTO app_user (name) VALUES ('bench') RETURNING id")
    kb_ids = [await conn.fetchval("INSERT INTO knowledge_base (user_id, name, embedding_model, embedding_dim)"
                                  " VALUES ($1, $2, 'synthetic', 384) RETURNING id", user, f"kb{i}")
              for i in range(len(sizes))]
    doc_of = np.zeros(size.chunks, dtype=np.int64)
    doc_rows: list[list[Any]] = []
    for i in range(size.chunks):  # a new document every 100 chunks and at each KB boundary
        if i == 0 or i % 100 == 0 or kb_of[i] != kb_of[i - 1]:
            n = len(doc_rows) + 1  # a distinct content hash each: search collapses equal (hash, chunk_index)
            doc_rows.append([n, kb_ids[int(kb_of[i])], user, f"doc{n - 1}.txt", 1, f"{n:064x}",
                             f"k/{len(doc_rows)}", "INDEXED", 0])
        doc_of[i] = len(doc_rows)
        doc_rows[-1][-1] += 1
    await conn.copy_records_to_table(
        "document_info", records=doc_rows,
        columns=["id", "kb_id", "user_id", "filename", "size_bytes", "sha256", "object_key", "status", "chunk_count"])
    chunk_ids = np.arange(1, size.chunks + 1)
    counters: dict[int, int] = {}
    chunk_rows = []
    for i in range(size.chunks):
        d = int(doc_of[i])
        counters[d] = counters.get(d, -1) + 1
        chunk_rows.append((int(chunk_ids[i]), d, counters[d], texts[i], 150))
    await conn.copy_records_to_table("document_chunk", records=chunk_rows,
                                     columns=["id", "document_id", "chunk_index", "content", "token_count"])
    await conn.execute("DROP INDEX document_vector_embedding_hnsw")
    await conn.copy_records_to_table(
        "document_vector", records=[(int(chunk_ids[i]), int(doc_of[i]), kb_ids[int(kb_of[i])], vecs[i], True)
                                    for i in range(size.chunks)],
        columns=["chunk_id", "document_id", "kb_id", "embedding", "ann"])  # as after the ANN job (sql/0017)
    await conn.execute("SELECT setval('document_info_id_seq', $1)", len(doc_rows))
    await conn.execute("SELECT setval('document_chunk_id_seq', $1)", size.chunks)
    await conn.execute("SET maintenance_work_mem = '1GB'")
    await conn.execute("CREATE INDEX document_vector_embedding_hnsw ON document_vector"
                       " USING hnsw (embedding vector_cosine_ops) WHERE ann")
    await conn.execute("VACUUM ANALYZE document_chunk")
    await conn.execute("VACUUM ANALYZE document_vector")
    await conn.execute("VACUUM ANALYZE document_info")
    return Table(kb_ids, kb_of, chunk_ids, vecs, texts, planted)


# ------------------------------------------------------------------ measuring


@dataclass
class Timing:
    p50: list[float]  # per run, ms
    p99: list[float]

    def cell(self) -> str:
        return f"{statistics.median(self.p50):.1f} ({min(self.p50):.1f}–{max(self.p50):.1f})"

    def cell99(self) -> str:
        return f"{statistics.median(self.p99):.1f} ({min(self.p99):.1f}–{max(self.p99):.1f})"


async def timed(calls: Sequence[Callable[[], Awaitable[object]]], runs: int) -> tuple[Timing, list[object]]:
    """Run every call once per run; per-run p50/p99 in ms; results of the last run."""
    p50: list[float] = []
    p99: list[float] = []
    out: list[object] = []
    for _ in range(runs):
        times: list[float] = []
        out = []
        for call in calls:
            t0 = time.perf_counter()
            out.append(await call())
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        p50.append(statistics.median(times))
        p99.append(times[min(len(times) - 1, int(0.99 * len(times)))])
    return Timing(p50, p99), out


def recall(got: list[int], truth: list[int]) -> float:
    return len(set(got) & set(truth)) / max(1, len(truth))


@dataclass
class VectorRow:
    kb_chunks: int
    config: str
    recall: float
    timing: Timing
    plan: str


async def plan_of(conn: asyncpg.Connection, kb: int, q: np.ndarray, params: SearchParams) -> str:
    """Which access path PostgreSQL takes for this KB and configuration: "hnsw" or "scan"."""
    async with conn.transaction():
        if params.exact_max_chunks == 0:
            await conn.execute(f"SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = "
                               f"{params.ef_search}")
        sql = _HNSW if params.exact_max_chunks == 0 else _EXACT
        lines = await conn.fetch("EXPLAIN " + sql, q, kb, 10)
    return "hnsw" if any("embedding_hnsw" in r[0] for r in lines) else "scan"


async def vector_bench(conn: asyncpg.Connection, t: Table, size: Size, runs: int,
                       rng: np.random.Generator) -> list[VectorRow]:
    configs = {
        "exact": SearchParams(exact_max_chunks=10**9),
        "hnsw ef 40": SearchParams(exact_max_chunks=0, ef_search=40),
        "hnsw ef 400": SearchParams(exact_max_chunks=0, ef_search=400),
    }
    rows = []
    for k, kb in enumerate(t.kb_ids):
        members = np.flatnonzero(t.kb_of == k)
        picks = rng.choice(members, size.queries_per_kb)
        queries = t.vecs[picks] + 0.1 * rng.standard_normal((len(picks), DIM)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        sims = queries @ t.vecs[members].T
        truth = [[int(t.chunk_ids[members[j]]) for j in np.argsort(-s)[:10]] for s in sims]
        for name, params in configs.items():
            calls = [lambda q=q, p=params, kb=kb: rank(PgSearch(conn), kb, Mode.VECTOR, "", q, 10, p) for q in queries]
            timing, out = await timed(calls, runs)
            r = statistics.mean(recall([c for c, _, _ in got], tr) for got, tr in zip(out, truth, strict=True))  # type: ignore[attr-defined]
            rows.append(VectorRow(len(members), name, r, timing, await plan_of(conn, kb, queries[0], params)))
    return rows


async def mode_bench(conn: asyncpg.Connection, pool: asyncpg.Pool, t: Table, size: Size, runs: int,
                     params: SearchParams, rng: np.random.Generator) -> dict[str, tuple[float, Timing]]:
    """Recall@10 (against the same mode with exact vector search) and latency per mode, every KB."""
    cases = []
    for k, kb in enumerate(t.kb_ids):
        members = np.flatnonzero(t.kb_of == k)
        for j in rng.choice(members, size.queries_per_kb):
            w = t.texts[int(j)].split()
            s = int(rng.integers(0, max(1, len(w) - 8)))
            q = t.vecs[int(j)] + 0.05 * rng.standard_normal(DIM).astype(np.float32)
            cases.append((kb, " ".join(w[s:s + 8]), (q / np.linalg.norm(q)).astype(np.float32)))
    exact = replace(params, exact_max_chunks=10**9)
    out: dict[str, tuple[float, Timing]] = {}
    for mode in Mode:
        calls = [lambda c=c, m=mode: rank(PgSearch(pool), c[0], m, c[1], c[2], 10, params) for c in cases]
        timing, got = await timed(calls, runs)
        truth = [await rank(PgSearch(conn), kb, mode, text, q, 10, exact) for kb, text, q in cases]
        r = statistics.mean(recall([x[0] for x in g], [x[0] for x in tr])  # type: ignore[attr-defined]
                            for g, tr in zip(got, truth, strict=True))
        out[mode.value] = (r, timing)
    return out


async def identifier_bench(conn: asyncpg.Pool, t: Table, params: SearchParams,
                           rng: np.random.Generator) -> dict[tuple[str, str], float]:
    """Recall@5 of the planted chunk, per mode and query form (token alone / in a sentence)."""
    found: dict[tuple[str, str], list[bool]] = {}
    noise = clustered_vectors(len(t.planted), rng)  # no embedding knows these tokens: the vector list is noise
    for i, (tok, row) in enumerate(t.planted.items()):
        kb = t.kb_ids[int(t.kb_of[row])]
        for form, text in (("alone", tok), ("in a sentence", SENTENCES[i % len(SENTENCES)].format(tok))):
            for mode in Mode:
                got = await rank(PgSearch(conn), kb, mode, text, noise[i], 5, params)
                found.setdefault((mode.value, form), []).append(int(t.chunk_ids[row]) in [g[0] for g in got])
    return {k: sum(v) / len(v) for k, v in found.items()}


# ------------------------------------------------------------------ self-retrieval on the real corpus


async def corpus_chunks(max_file: int) -> tuple[list[tuple[str, list[str]]], np.ndarray]:
    """``[(file, chunk texts)]`` of every corpus file the worker indexes, and their MiniLM vectors
    (cached by content hash)."""
    from shared.adapters.embedding import build_embedder
    from shared.domain.errors import PermanentError
    from task_service.pipeline.chunk import Chunker, load_minilm_tokenizer
    from task_service.pipeline.parse import parse_text

    chunker = Chunker(load_minilm_tokenizer(), 250, 32)
    docs = []
    files = sorted(p for p in CORPUS.iterdir() if p.is_file() and p.stat().st_size <= max_file) \
        if CORPUS.exists() else [ROOT / "samples" / "indexing-primer.md"]
    for p in files:
        if p.name in ("README.md", "SOURCES.md"):
            continue
        try:
            text = parse_text(p.read_bytes(), p.name)
        except PermanentError:
            continue
        chunks = [c.content for c in chunker.split(text)]
        if chunks:
            docs.append((p.name, chunks))
    texts = [c for _, cs in docs for c in cs]
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    cached = CACHE / f"corpus-{key}.npy"
    if cached.exists():
        return docs, np.load(cached)
    vecs = np.asarray(await build_embedder("sentence-transformers").embed(texts), dtype=np.float32)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(cached, vecs)
    return docs, vecs


@dataclass
class SelfRetrieval:
    docs: int
    chunks: int
    recall: dict[str, float]  # mode -> self-retrieval@5
    kb: int
    passages: list[tuple[int, str]]  # (document id, passage)
    qvecs: np.ndarray


async def self_retrieval(conn: asyncpg.Connection, size: Size, params: SearchParams,
                         rng: np.random.Generator) -> SelfRetrieval:
    from shared.adapters.embedding import build_embedder

    docs, vecs = await corpus_chunks(size.max_corpus_file)
    user = await conn.fetchval("SELECT id FROM app_user LIMIT 1")
    kb = await conn.fetchval("INSERT INTO knowledge_base (user_id, name, embedding_model, embedding_dim)"
                             " VALUES ($1, 'corpus', 'all-MiniLM-L6-v2', 384) RETURNING id", user)
    doc_ids, passages, i = [], [], 0
    for name, chunks in docs:
        d = await conn.fetchval("INSERT INTO document_info (kb_id, user_id, filename, size_bytes, sha256, object_key,"
                                " status, chunk_count) VALUES ($1, $2, $3, 1, $6, $4, 'INDEXED', $5) RETURNING id",
                                kb, user, name, f"corpus/{name}", len(chunks),
                                hashlib.sha256(name.encode()).hexdigest())
        doc_ids.append(d)
        for ci, c in enumerate(chunks):
            cid = await conn.fetchval("INSERT INTO document_chunk (document_id, chunk_index, content, token_count)"
                                      " VALUES ($1, $2, $3, 1) RETURNING id", d, ci, c)
            await conn.execute("INSERT INTO document_vector VALUES ($1, $2, $3, $4)", cid, d, kb, vecs[i])
            i += 1
    for _ in range(size.passages):  # a passage: 12 consecutive words of a random chunk
        di = int(rng.integers(0, len(docs)))
        words = docs[di][1][int(rng.integers(0, len(docs[di][1])))].split()
        s = int(rng.integers(0, max(1, len(words) - 12)))
        passages.append((doc_ids[di], " ".join(words[s:s + 12])))
    await conn.execute("ANALYZE document_chunk")
    qvecs = await build_embedder("sentence-transformers").embed([p for _, p in passages])
    result = {}
    for mode in Mode:
        hits = 0
        for (doc, text), q in zip(passages, qvecs, strict=True):
            got = await rank(PgSearch(conn), kb, mode, text, q, 5, params)
            owners = await conn.fetch("SELECT document_id FROM document_chunk WHERE id = ANY($1::bigint[])",
                                      [g[0] for g in got])
            hits += doc in {r["document_id"] for r in owners}
        result[mode.value] = hits / len(passages)
    return SelfRetrieval(len(docs), i, result, kb, passages, np.asarray(qvecs))


# ------------------------------------------------------------------ fusion options (issue 20, item 4)

Pairs = list[tuple[int, float]]


def _ids(ranked: Pairs) -> list[int]:
    return [cid for cid, _ in ranked]


def _weighted_rrf(w: float) -> Callable[[Pairs, Pairs], list[int]]:
    def fuse(vector: Pairs, keyword: Pairs) -> list[int]:
        score: dict[int, float] = {}
        for weight, ranked in ((1.0, vector), (w, keyword)):
            for r, cid in enumerate(_ids(ranked), start=1):
                score[cid] = score.get(cid, 0.0) + weight / (RRF_K + r)
        return sorted(score, key=lambda c: -score[c])
    return fuse


def _convex(alpha: float) -> Callable[[Pairs, Pairs], list[int]]:
    """Both lists' scores min-max normalised over the list, absent = 0, ``alpha·vector + (1-alpha)·keyword``."""
    def norm(ranked: Pairs) -> dict[int, float]:
        if not ranked:
            return {}
        lo, hi = min(s for _, s in ranked), max(s for _, s in ranked)
        return {c: (s - lo) / (hi - lo) if hi > lo else 1.0 for c, s in ranked}

    def fuse(vector: Pairs, keyword: Pairs) -> list[int]:
        v, k = norm(vector), norm(keyword)
        union = list(dict.fromkeys(_ids(vector) + _ids(keyword)))
        return sorted(union, key=lambda c: -(alpha * v.get(c, 0.0) + (1 - alpha) * k.get(c, 0.0)))
    return fuse


#: The fusions measured; the last is the one search uses (knowledge_service.search.ranking.fuse_hybrid).
FUSIONS: dict[str, Callable[[Pairs, Pairs], list[int]]] = {
    "RRF k=60 (before)": lambda v, k: [f.key for f in rrf({"vector": _ids(v), "keyword": _ids(k)})],
    "weighted RRF, keyword x2": _weighted_rrf(2.0),
    "weighted RRF, keyword x3": _weighted_rrf(3.0),
    "convex, min-max, alpha 0.5": _convex(0.5),
    "RRF + decisive exact hit, 2x ratio only (before)": lambda v, k: [
        f.key for f in fuse_hybrid(v, k, max_group=5, gap=float("inf"))],
    "RRF + decisive exact hit, 2x ratio or 0.3 gap (used)": lambda v, k: [
        f.key for f in fuse_hybrid(v, k, max_group=5)],
}


async def _both_lists(conn: asyncpg.Connection, kb: int, text: str, q: np.ndarray, params: SearchParams
                      ) -> tuple[Pairs, Pairs]:
    depth = params.candidate_depth
    got = [await rank(PgSearch(conn), kb, m, text, q, depth, params) for m in (Mode.VECTOR, Mode.KEYWORD)]
    return [(c, s) for c, s, _ in got[0]], [(c, s) for c, s, _ in got[1]]


async def lookalike_kb(conn: asyncpg.Connection, n: int) -> tuple[int, list[tuple[int, dict[str, str]]]]:
    """A KB of ``n`` look-alike documents (one chunk each, MiniLM vectors): (kb id, [(chunk id, queries)])."""
    from bench.lookalike import lookalike_docs
    from shared.adapters.embedding import build_embedder

    docs = lookalike_docs(n)
    vecs = await build_embedder("sentence-transformers").embed([d.text for d in docs])
    user = await conn.fetchval("SELECT id FROM app_user LIMIT 1")
    kb = await conn.fetchval("INSERT INTO knowledge_base (user_id, name, embedding_model, embedding_dim)"
                             " VALUES ($1, 'lookalike', 'all-MiniLM-L6-v2', 384) RETURNING id", user)
    out = []
    for i, (d, v) in enumerate(zip(docs, vecs, strict=True)):
        doc = await conn.fetchval("INSERT INTO document_info (kb_id, user_id, filename, size_bytes, sha256, object_key,"
                                  " status, chunk_count) VALUES ($1, $2, $3, 1, $4, $3, 'INDEXED', 1) RETURNING id",
                                  kb, user, d.name, hashlib.sha256(d.text.encode()).hexdigest())
        cid = await conn.fetchval("INSERT INTO document_chunk (document_id, chunk_index, content, token_count)"
                                  " VALUES ($1, 0, $2, 1) RETURNING id", doc, d.text)
        await conn.execute("INSERT INTO document_vector VALUES ($1, $2, $3, $4)", cid, doc, kb, v)
        out.append((cid, d.queries(i)))
    await conn.execute("ANALYZE document_chunk")
    return kb, out


async def fusion_bench(conn: asyncpg.Connection, size: Size, params: SearchParams, corpus_kb: int,
                       passages: list[tuple[int, str]], qvecs: np.ndarray) -> dict[str, dict[str, float]]:
    """Recall@5 per fusion option: look-alike codes alone and in a question, corpus self-retrieval."""
    from shared.adapters.embedding import build_embedder

    embedder = build_embedder("sentence-transformers")
    kb, cases = await lookalike_kb(conn, size.lookalikes)
    hits: dict[str, dict[str, list[bool]]] = {name: {} for name in FUSIONS}
    for form in ("alone", "in a question"):
        texts = [qs[form] for _, qs in cases]
        for (cid, _), text, q in zip(cases, texts, await embedder.embed(texts), strict=True):
            v, k = await _both_lists(conn, kb, text, q, params)
            for name, fuse in FUSIONS.items():
                hits[name].setdefault(form, []).append(cid in fuse(v, k)[:5])
    owner = {r["id"]: r["document_id"] for r in await conn.fetch(
        "SELECT c.id, c.document_id FROM document_chunk c JOIN document_info d ON d.id = c.document_id"
        " WHERE d.kb_id = $1", corpus_kb)}
    for (doc, text), q in zip(passages, qvecs, strict=True):
        v, k = await _both_lists(conn, corpus_kb, text, q, params)
        for name, fuse in FUSIONS.items():
            hits[name].setdefault("self-retrieval", []).append(doc in {owner[c] for c in fuse(v, k)[:5]})
    return {name: {m: sum(x) / len(x) for m, x in got.items()} for name, got in hits.items()}


def fusion_report(fusion: dict[str, dict[str, float]], size: Size) -> str:
    lines = [f"**Fusion** (issue 20): recall@5 of {size.lookalikes} look-alike documents (bench/lookalike.py: one "
             "template, a unique code each; MiniLM vectors) asked by code alone and inside a question, and corpus "
             f"self-retrieval@5 ({size.passages} passages), per way of fusing the same vector and keyword lists "
             "(depth 50).", "",
             "| fusion | code alone | code in a question | self-retrieval@5 |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {m['alone']:.3f} | {m['in a question']:.3f} | {m['self-retrieval']:.3f} |"
              for name, m in fusion.items()]
    return "\n".join(lines)


# ------------------------------------------------------------------ report


def report(size: Size, vec: list[VectorRow], modes: dict[str, tuple[float, Timing]],
           ident: dict[tuple[str, str], float], selfr: SelfRetrieval, params: SearchParams,
           runs: int, load_s: float, script_lines: Sequence[str] = ()) -> str:
    lines = [
        f"`python -m bench.retrieval`: {size.chunks:,} chunks in {len(SHARES)} KBs (skewed: "
        f"{', '.join(str(n) for n in kb_sizes(size.chunks))}), corpus text, synthetic clustered 384-d vectors; "
        f"loaded + indexed in {load_s:.0f} s. Latency = SQL of `knowledge_service.search.retrieval.rank` "
        "(no embedding; modes through a 2-connection pool as the API: hybrid runs both lists at once), ms, "
        f"median over {runs} runs (min–max of the run values).",
        "",
        "**Vector search per KB size** (recall@10 against exact numpy search)",
        "",
        "| KB chunks | config | plan | recall@10 | p50 ms | p99 ms |",
        "|---:|---|---|---:|---:|---:|",
    ]
    lines += [f"| {r.kb_chunks:,} | {r.config} | {r.plan} | {r.recall:.3f} | {r.timing.cell()} | {r.timing.cell99()} |"
              for r in vec]
    lines += [
        "",
        f"**Modes, API settings** (exact ≤ {params.exact_max_chunks:,} vectors, else HNSW ef {params.ef_search}; "
        f"depth {params.candidate_depth}; 8-word corpus sentences, every KB; recall@10 against the same mode with "
        "exact vector search)",
        "",
        "| mode | recall@10 | p50 ms | p99 ms |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {m} | {r:.3f} | {t.cell()} | {t.cell99()} |" for m, (r, t) in modes.items()]
    lines += ["", f"**Identifier recall@5** ({size.tokens} unique tokens planted; vector list = noise)", "",
              "| mode | alone | in a sentence |", "|---|---:|---:|"]
    lines += [f"| {m.value} | {ident[(m.value, 'alone')]:.3f} | {ident[(m.value, 'in a sentence')]:.3f} |"
              for m in Mode]
    ndocs, nchunks, sr = selfr.docs, selfr.chunks, selfr.recall
    lines += ["", f"**Self-retrieval@5** on the corpus ({ndocs} documents, {nchunks} chunks, MiniLM; "
              f"{size.passages} 12-word passages; hit = own document in top 5)", "",
              "| mode | self-retrieval@5 |", "|---|---:|"]
    lines += [f"| {m} | {v:.3f} |" for m, v in sr.items()]
    lines += script_lines
    return "\n".join(lines)


async def run_fusion(size: Size, params: SearchParams, seed: int) -> str:
    """Only the fusion options (``--fusion-only``): the corpus and the look-alike set, nothing else."""
    from shared.adapters.postgres.migrate import migrate

    db = f"rag_bench_fusion_{os.getpid()}"
    dsn = ADMIN_DSN.rsplit("/", 1)[0] + f"/{db}"
    await migrate(dsn)
    try:
        conn = await asyncpg.connect(dsn)
        await register_vector(conn)
        try:
            await conn.execute("INSERT INTO app_user (name) VALUES ('bench')")
            sr = await self_retrieval(conn, size, params, np.random.default_rng(seed))
            return fusion_report(await fusion_bench(conn, size, params, sr.kb, sr.passages, sr.qvecs), size)
        finally:
            await conn.close()
    finally:
        admin = await asyncpg.connect(ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        finally:
            await admin.close()


async def run(size: Size, runs: int, params: SearchParams, seed: int, keep: bool = False) -> tuple[str, str]:
    """(the retrieval section, the fusion section); empty strings with ``keep``."""
    from shared.adapters.postgres.migrate import migrate

    db = f"rag_bench_retrieval_{os.getpid()}"
    dsn = ADMIN_DSN.rsplit("/", 1)[0] + f"/{db}"
    rng = np.random.default_rng(seed)
    await migrate(dsn)
    try:
        conn = await asyncpg.connect(dsn)
        await register_vector(conn)
        try:
            t0 = time.perf_counter()
            table = await load(conn, size, rng)
            load_s = time.perf_counter() - t0
            print(f"loaded {size.chunks} chunks in {load_s:.0f} s", flush=True)
            vec = await vector_bench(conn, table, size, runs, rng)
            print("vector done", flush=True)
            pool = await asyncpg.create_pool(dsn, min_size=2, max_size=2, init=register_vector)
            try:  # as the API: a pool, hybrid runs its two lists at once
                modes = await mode_bench(conn, pool, table, size, runs, params, rng)
                print("modes done", flush=True)
                ident = await identifier_bench(pool, table, params, rng)
            finally:
                await pool.close()
            print("identifiers done", flush=True)
            selfr = await self_retrieval(conn, size, params, rng)
            print("self-retrieval done", flush=True)
            script_lines = scripts.report(await scripts.script_recall(conn, size.script_chunks, params, rng),
                                          size.script_chunks)
            fusion = await fusion_bench(conn, size, params, selfr.kb, selfr.passages, selfr.qvecs)
        finally:
            await conn.close()
    finally:
        if not keep:
            admin = await asyncpg.connect(ADMIN_DSN)
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            finally:
                await admin.close()
    if keep:
        print(f"kept database {db}")
        return "", ""
    return report(size, vec, modes, ident, selfr, params, runs, load_s, script_lines), fusion_report(fusion, size)


def main() -> None:
    from shared.settings import KnowledgeSettings

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, print only (CI)")
    ap.add_argument("--small", action="store_true", help="bounded sizes (20,000 chunks; corpus files <= 200 KB)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--chunks", type=int, default=None)
    ap.add_argument("--script-chunks", type=int, default=None, help="generated chunks per script (script recall)")
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--keep", action="store_true", help="keep the database (to explore); no report")
    ap.add_argument("--fusion-only", action="store_true", help="only the fusion options (corpus + look-alikes)")
    args = ap.parse_args()
    size = SMOKE if args.smoke else SMALL if args.small else FULL
    if args.chunks:
        size = replace(size, chunks=args.chunks)
    if args.script_chunks:
        size = replace(size, script_chunks=args.script_chunks)
    runs = 2 if args.smoke else max(5, args.runs)
    s = KnowledgeSettings()
    params = SearchParams(candidate_depth=s.search_candidate_depth, rrf_k=s.search_rrf_k,
                          exact_max_chunks=s.search_exact_max_chunks, ef_search=s.search_ef_search,
                          keyword_budget=s.search_keyword_budget,
                          keyword_max_candidates=s.search_keyword_max_candidates)
    os.environ.setdefault("DO_NOT_TRACK", "1")
    if args.fusion_only:
        text, fusion = "", asyncio.run(run_fusion(size, params, args.seed))
    else:
        text, fusion = asyncio.run(run(size, runs, params, args.seed, args.keep))
    print(text, fusion, sep="\n\n")
    if not args.smoke:
        from bench.report import write_section

        if text:
            write_section("retrieval", text)
        if fusion:
            write_section("fusion", fusion)


if __name__ == "__main__":
    main()
