"""Keyword and hybrid search on the peer's data, idle and beside a fixed CPU load (issue 30, item 4).

``python -m bench.search_load [--smoke] [--load N] [--explain] [--before DIR] [--with-worker]``: an isolated
stack (:mod:`bench.stack`), the files :mod:`bench.peer` indexes (the shared corpus, the novel included) in one KB
and a look-alike set (:mod:`bench.lookalike`) in another, indexed by one worker whose embeddings come from the
stand-in (:mod:`bench.fake_embeddings`, no latency: the keyword side needs no model; the API embeds queries with
its own model, so hybrid pays the real query embedding); the worker is stopped before the timings, or
(``--with-worker``) left running idle beside them, as beside a production API. Queries as :mod:`bench.peer`
makes them: 12-word passages of the corpus' chunks and the look-alike codes, alone and in a question. Each
query is timed, in turn in the same loop, as:

- HTTP ``POST .../search`` keyword and hybrid (the whole request), on today's API and (``--before DIR``) on the
  API of another checkout started on the same stack;
- the keyword statement alone on one held connection: today's (:data:`KEYWORD_SQL`) and the one before
  issue 30 (:data:`BEFORE_SQL`, kept here to measure against), with their results compared;

idle, then beside ``--load`` busy processes (``while True: pass``, not niced). p50 / p99 in ms. Writes the
``search-load`` section of bench/RESULTS.md (``--smoke``: a few queries, print only). ``--explain`` prints
``EXPLAIN (ANALYZE, BUFFERS)`` of both statements for the query whose old statement was slowest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import asyncpg
import httpx

from bench.lookalike import LookAlike, lookalike_docs
from bench.peer import input_files
from bench.stack import Stack, free_port, percentile, upload_all
from bench.workers import fake_server

#: The keyword statement before issue 30 item 4 (for the before/after rows of the same run).
BEFORE_SQL = r"""
WITH lexemes AS (
    SELECT t.lexeme, '''' || replace(replace(t.lexeme, '\', '\\'), '''', '''''') || '''' AS lit
      FROM unnest(to_tsvector('rag_simple', rag_search_text($1))) t
), keys AS (
    SELECT array_agg(lexeme) || ''::text AS terms FROM lexemes
), counts AS MATERIALIZED (
    SELECT s.term, sum(s.df)::float8 AS df FROM (
        SELECT k.term, k.df FROM kb_term k WHERE k.kb_id = $2 AND k.term = ANY((SELECT terms FROM keys)::text[])
        UNION ALL
        SELECT k.term, k.d FROM kb_term_delta k WHERE k.kb_id = $2 AND k.term = ANY((SELECT terms FROM keys)::text[])
    ) s GROUP BY s.term
), n AS (
    SELECT greatest(coalesce((SELECT df FROM counts WHERE term = ''), 0), 1) AS rows
), terms AS MATERIALIZED (
    SELECT x.lexeme, x.lit, greatest(coalesce(c.df, 0), 0) / (SELECT rows FROM n) AS freq
      FROM lexemes x LEFT JOIN counts c ON c.term = x.lexeme
), weighted AS (
    SELECT lit, lit::tsquery AS q, power(ln(1 + 1 / greatest(freq, 1e-7)), 2) AS w, freq,
           sum(freq) OVER (ORDER BY freq, lit) - freq AS rarer
      FROM terms
), sel AS (
    SELECT string_agg(lit, ' | ')::tsquery AS q
      FROM weighted, n
     WHERE rarer = 0 OR (rarer + freq) * n.rows <= $4
), cand AS MATERIALIZED (
    SELECT c.id, c.content_tsv
      FROM document_chunk c
     WHERE c.kb_id = $2 AND c.content_tsv @@ (SELECT q FROM sel)
     LIMIT $5
), copied AS MATERIALIZED (
    SELECT id, content_tsv || ''::tsvector AS tsv FROM cand
)
SELECT c.id AS chunk_id,
       (SELECT sum(t.w) FROM weighted t WHERE c.tsv @@ t.q) / (SELECT nullif(sum(w), 0) FROM weighted WHERE freq > 0)
       + CASE WHEN c.tsv @@ phraseto_tsquery('rag_simple', rag_search_text($1)) THEN 1 ELSE 0 END AS score
  FROM copied c
 ORDER BY score DESC, c.id
 LIMIT $3
"""
LOOKALIKES = 120
PASSAGES = 100
SMOKE_PASSAGES, SMOKE_LOOKALIKES = 6, 3


def busy(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` processes spinning on a core each (the fixed CPU load)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def pcts(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{percentile(ms, 0.5):.1f} / {percentile(ms, 0.99):.1f}"


def make_queries(texts: list[str], kb_self: int, kb_look: int, passages: int,
                 looks: list[LookAlike]) -> list[tuple[int, str]]:
    """(kb, query): 12-word passages of ``texts`` (as bench/peer.py draws them) and the look-alike codes."""
    rng = random.Random(20)
    pool_words = [t.split() for t in texts if len(t.split()) >= 12]
    out: list[tuple[int, str]] = []
    for words in rng.sample(pool_words, min(len(pool_words), passages)):
        s = rng.randrange(0, len(words) - 11)
        out.append((kb_self, " ".join(words[s:s + 12])))
    for i, d in enumerate(looks):
        out += [(kb_look, q) for q in d.queries(i).values()]
    return out


Call = Callable[[int, str], Awaitable[tuple[float, object]]]  # (kb, query) -> (seconds, result)


def layers(http: httpx.AsyncClient, pool: asyncpg.Pool, before: httpx.AsyncClient | None) -> dict[str, Call]:
    """The timed layers: two HTTP modes (also on the API of ``before``, when given), and the keyword statement
    before and now."""
    from knowledge_service.search import retrieval
    from shared.adapters.postgres.repo import search as search_repo

    params = retrieval.SearchParams()

    def post(mode: str, client: httpx.AsyncClient = http) -> Call:
        async def call(kb: int, q: str) -> tuple[float, object]:
            t0 = time.perf_counter()
            r = await client.post(f"/api/v1/knowledge-bases/{kb}/search", json={"query": q, "mode": mode, "top_k": 5})
            r.raise_for_status()
            return time.perf_counter() - t0, None
        return call

    def statement(sql: str, tx: Callable[[asyncpg.Connection], AbstractAsyncContextManager[object]]) -> Call:
        async def call(kb: int, q: str) -> tuple[float, object]:
            async with pool.acquire() as conn, tx(conn):
                t0 = time.perf_counter()
                rows = await conn.fetch(sql, q, kb, 5, params.keyword_budget, params.keyword_max_candidates)
                return time.perf_counter() - t0, [(r["chunk_id"], float(r["score"])) for r in rows]
        return call

    http_layers = {"HTTP `POST .../search` keyword, now": post("keyword"),
                   "HTTP `POST .../search` hybrid, now": post("hybrid")}
    if before is not None:
        http_layers = {"HTTP `POST .../search` keyword, before": post("keyword", before),
                       "HTTP `POST .../search` hybrid, before": post("hybrid", before), **http_layers}
    return {
        **http_layers,
        "keyword statement, before": statement(BEFORE_SQL, search_repo.ranking_transaction),
        "keyword statement, now": statement(search_repo.KEYWORD_SQL, search_repo.keyword_transaction),
    }


async def timed(calls: dict[str, Call], queries: list[tuple[int, str]], load: int
                ) -> tuple[dict[str, list[float]], int, tuple[float, int, str]]:
    """Per layer the seconds of every query, beside ``load`` busy processes; how many queries' statements
    differ (before / now); the query the old statement was slowest on (seconds, kb, query)."""
    procs = busy(load)
    times: dict[str, list[float]] = {name: [] for name in calls}
    differ, slowest = 0, (0.0, 0, "")
    try:
        for kb, q in queries[:3]:  # warm
            for call in calls.values():
                await call(kb, q)
        for kb, q in queries:
            got: dict[str, object] = {}
            for name, call in calls.items():
                elapsed, got[name] = await call(kb, q)
                times[name].append(elapsed)
            differ += got["keyword statement, before"] != got["keyword statement, now"]
            slowest = max(slowest, (times["keyword statement, before"][-1], kb, q))
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return times, differ, slowest


async def explain(pool: asyncpg.Pool, kb: int, q: str) -> None:
    """Print EXPLAIN (ANALYZE, BUFFERS) of the statement before and now for one query."""
    from knowledge_service.search import retrieval
    from shared.adapters.postgres.repo import search as search_repo

    params = retrieval.SearchParams()
    for sql, tx in ((BEFORE_SQL, search_repo.ranking_transaction),
                    (search_repo.KEYWORD_SQL, search_repo.keyword_transaction)):
        async with pool.acquire() as conn, tx(conn):
            plan = await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", q, kb, 5, params.keyword_budget,
                                    params.keyword_max_candidates)
        print(f"--- {q!r}\n" + "\n".join(r[0] for r in plan), flush=True)


@contextlib.asynccontextmanager
async def indexed(stack: Stack, http: httpx.AsyncClient, paths: list[Path], looks: list[LookAlike],
                  keep_worker: bool) -> AsyncIterator[tuple[int, int]]:
    """The two KBs (peer's files, look-alikes), indexed by a worker on the stand-in embeddings; their ids.
    The worker is stopped before the timings unless ``keep_worker`` (then it runs idle beside them, as it
    does beside a production API and in :mod:`bench.peer`, and is stopped after)."""
    port = free_port()
    fake = await fake_server(port)
    try:
        worker = await stack.start_worker(embedding_provider="openai", embedding_base_url=f"http://127.0.0.1:{port}",
                                          embedding_cache_max_rows="0")
        kb_self, kb_look = await stack.create_kb(http, "self"), await stack.create_kb(http, "lookalike")
        docs = await upload_all(http, kb_self, [(p.name, p.read_bytes()) for p in paths])
        docs += await upload_all(http, kb_look, [(d.name, d.text.encode()) for d in looks])
        await stack.wait_indexed(docs)
        if not keep_worker:
            await stack.stop(worker)
        await stack.fetch("ANALYZE")
        yield kb_self, kb_look
        if keep_worker:
            await stack.stop(worker)
    finally:
        fake.terminate()
        fake.wait(10)


def _commit_of(root: Path) -> str:
    """The short commit of the checkout at ``root`` (its path if it is no git checkout)."""
    got = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return got.stdout.strip() or str(root)


def _spawn(root: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "knowledge_service"], cwd=root, env=env, stdout=log.open("ab"),
                            stderr=subprocess.STDOUT)


async def start_before_api(stack: Stack, root: Path) -> str:
    """The API of another checkout (``root``: the code before) on the same stack; its base URL once ready."""
    from bench.stack import LOGS, poll
    from tests.support import Proc

    port = free_port()
    log = LOGS / f"{stack.db}-api-before.log"
    proc = Proc("api-before", _spawn(root, stack.child_env(ks_port=str(port), pythonpath=str(root)), log), log,
                log_start=0)
    stack.procs.append(proc)
    url = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(timeout=2) as c:
        async def ready() -> bool:
            try:
                return (await c.get(f"{url}/readyz")).status_code == 200
            except httpx.HTTPError:
                return False

        await poll(ready, 300, "the API before ready", 0.2, proc)
    return url


async def run(smoke: bool, load: int, show_plan: bool, before_root: Path | None, keep_worker: bool = False) -> str:
    from shared.adapters.postgres.pool import PoolConfig, create_pool
    from shared.settings import KnowledgeSettings

    n_pass, n_look = (SMOKE_PASSAGES, SMOKE_LOOKALIKES) if smoke else (PASSAGES, LOOKALIKES)
    paths = input_files(smoke)
    looks = lookalike_docs(n_look)
    phases = [("idle", 0)] + ([(f"beside {load} busy processes", load)] if load else [])
    async with Stack("searchload") as stack:
        os.environ.update(stack.env)
        url = await stack.start_api(max_in_flight_tasks_per_user="1000")
        _, token = await stack.create_user()
        pool = await create_pool(PoolConfig.from_settings(KnowledgeSettings()), app_name="bench-search-load")
        auth = {"Authorization": f"Bearer {token}"}
        before_url = await start_before_api(stack, before_root) if before_root else url
        async with httpx.AsyncClient(base_url=url, headers=auth, timeout=600) as http, \
                httpx.AsyncClient(base_url=before_url, headers=auth, timeout=600) as before:
            async with indexed(stack, http, paths, looks, keep_worker) as (kb_self, kb_look):
                texts = [r["content"] for r in await stack.fetch(
                    "SELECT content FROM document_chunk WHERE kb_id = $1 ORDER BY id", kb_self)]
                queries = make_queries(texts, kb_self, kb_look, n_pass, looks)
                calls = layers(http, pool, before if before_root else None)
                results = [await timed(calls, queries, n) for _, n in phases]
                if show_plan:
                    _, kb, q = max(r[2] for r in results)
                    await explain(pool, kb, q)
        await pool.close()
    before_name = _commit_of(before_root) if before_root else ""
    http_of = (f"('now': today's API; 'before': the API of {before_name}; one stack, one database)" if before_name
               else "(today's API)")
    side = "API and an idle worker" if keep_worker else "API only"
    lines = [
        "Keyword and hybrid search on the peer's data (issue 30, item 4): `python -m bench.search_load`. "
        f"Isolated stack, {side}; one KB of the {len(paths)} files bench/peer.py indexes ({len(texts)} chunks), "
        f"one of {n_look} look-alike documents; {len(queries)} queries (12-word passages of the chunks, the codes "
        f"alone and in a question), top 5, each timed in turn in the same loop as an HTTP request {http_of} and as "
        "the keyword statement alone (the one before issue 30 item 4 and today's, on one held connection); "
        "idle, then beside "
        f"{load} busy processes (`while True: pass`, not niced). Load average {os.getloadavg()[0]:.1f} at the end. "
        f"Queries whose statements' results (ids and scores) differ, before / now: {sum(r[1] for r in results)}. "
        "p50 / p99 ms:",
        "",
        "| layer | " + " | ".join(p for p, _ in phases) + " |",
        "|---|" + "---:|" * len(phases),
    ]
    for name in calls:
        lines.append(f"| {name} | " + " | ".join(pcts(r[0][name]) for r in results) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="two small files, a few queries, print only")
    ap.add_argument("--load", type=int, default=2, help="busy processes beside the second phase (0: idle only)")
    ap.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE of the slowest query")
    ap.add_argument("--with-worker", action="store_true",
                    help="keep the indexing worker running, idle, beside the timings (as beside a production API)")
    ap.add_argument("--before", type=Path, metavar="DIR",
                    help="also time the API of this checkout (e.g. `git worktree add DIR <commit>`) on the same data")
    args = ap.parse_args()
    text = asyncio.run(run(args.smoke, args.load, args.explain, args.before, args.with_worker))
    print(text)
    if not args.smoke:
        from bench.report import write_section

        write_section("search-load", text)


if __name__ == "__main__":
    main()
