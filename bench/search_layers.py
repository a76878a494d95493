"""Where a search's time goes in our API, layer by layer (issue 20, item 3).

``python -m bench.search_layers [--smoke] [--rounds N]``: an isolated stack (:mod:`bench.stack`:
the real API, one worker to index, then stopped), one KB of 150 look-alike documents
(:mod:`bench.lookalike`), the question "which depot filed reference <code>?". Each layer is timed
in turn inside the same loop (``--rounds`` rounds, interleaved, so every layer sees the same
machine), from the outside in:

- HTTP ``GET /healthz`` (no auth, no database): the HTTP server and client;
- HTTP ``GET /knowledge-bases/{kb}/documents?limit=1``: + the bearer-token and KB-ownership look-ups
  and one small statement;
- HTTP ``POST .../search``, keyword / vector / hybrid: the whole request;
- in-process ``retrieval.search(PgSearch(pool), ...)``, keyword: the search's round
  trips (pool, ``BEGIN; SET LOCAL``, statement, ``COMMIT``, the chunks' details) without HTTP and auth;
- the keyword statement alone on one held connection;
- in-process query embedding (the API's embedder on its ``SEARCH_EMBED_THREADS`` threads).

Latency p50 / p90 in ms. Writes the ``search-layers`` section of bench/RESULTS.md (``--smoke``: 10
rounds, print only).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable

import httpx

from bench.lookalike import lookalike_docs
from bench.stack import Stack, percentile, upload_all

DOCS = 150


async def run(rounds: int) -> str:
    from knowledge_service.search import retrieval
    from shared.adapters.embedding.configured import EmbedderConfig, build_configured
    from shared.adapters.postgres.pool import PoolConfig, create_pool
    from shared.adapters.postgres.reads import PgSearch
    from shared.adapters.postgres.repo import search as search_repo
    from shared.settings import KnowledgeSettings

    looks = lookalike_docs(DOCS)
    question = looks[3].queries(3)["in a question"]
    async with Stack("layers") as stack:
        os.environ.update(stack.env)
        url, worker = await asyncio.gather(stack.start_api(), stack.start_worker(embedding_cache_max_rows="0"))
        _, token = await stack.create_user()
        settings = KnowledgeSettings()
        pool = await create_pool(PoolConfig.from_settings(settings), app_name="bench-layers")
        embedder = build_configured(EmbedderConfig.from_settings(settings, threads=settings.search_embed_threads))
        params = retrieval.SearchParams()
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            kb = await stack.create_kb(http, "layers")
            await stack.wait_indexed(await upload_all(http, kb, [(d.name, d.text.encode()) for d in looks]))
            await stack.stop(worker)
            await stack.fetch("ANALYZE document_chunk")

            def post(mode: str) -> Callable[[], Awaitable[object]]:
                async def call() -> object:
                    r = await http.post(f"/api/v1/knowledge-bases/{kb}/search",
                                        json={"query": question, "mode": mode, "top_k": 5})
                    r.raise_for_status()
                    return r
                return call

            async def statement() -> object:
                async with pool.acquire() as conn, search_repo.keyword_transaction(conn):
                    t0 = time.perf_counter()
                    await search_repo.keyword_ranking(conn, kb, question, 5, budget=params.keyword_budget,
                                                      max_candidates=params.keyword_max_candidates)
                    return time.perf_counter() - t0  # the statement's own time, not the pool's

            layers: dict[str, Callable[[], Awaitable[object]]] = {
                "HTTP `GET /healthz` (no auth, no database)": lambda: http.get("/healthz"),
                "HTTP `GET /knowledge-bases/{kb}/documents?limit=1` (auth + KB check + a small list)":
                    lambda: http.get(f"/api/v1/knowledge-bases/{kb}/documents", params={"limit": 1}),
                "HTTP `POST .../search`, keyword (the whole request)": post("keyword"),
                "HTTP `POST .../search`, vector (the whole request)": post("vector"),
                "HTTP `POST .../search`, hybrid (the whole request)": post("hybrid"),
                "in-process `retrieval.search(PgSearch(pool), keyword)`": lambda: retrieval.search(
                    PgSearch(pool), kb, retrieval.Mode.KEYWORD, question, None, 5, params),
                "the keyword statement alone": statement,
                "in-process query embedding (the API's embedder)": lambda: embedder.embed([question]),
            }
            times: dict[str, list[float]] = {name: [] for name in layers}
            for call in layers.values():  # warm every path once
                await call()
            for _ in range(rounds):
                for name, call in layers.items():
                    t0 = time.perf_counter()
                    got = await call()
                    elapsed = time.perf_counter() - t0
                    times[name].append(got if isinstance(got, float) else elapsed)
        await pool.close()
    load = os.getloadavg()[0]
    lines = [
        "Where a search's time goes in our API (issue 20, item 3): `python -m bench.search_layers`. Isolated stack "
        f"(bench/stack.py), API only, one KB of {DOCS} look-alike documents, the question \"{question}\", each "
        f"layer timed in turn in the same loop ({rounds} rounds, interleaved; load average {load:.1f} at the end), ms:",
        "",
        "| layer | p50 | p90 |",
        "|---|---:|---:|",
    ]
    for name, values in times.items():
        ms = [v * 1000 for v in values]
        lines.append(f"| {name} | {statistics.median(ms):.2f} | {percentile(ms, 0.9):.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="10 rounds, print only (CI)")
    ap.add_argument("--rounds", type=int, default=300)
    args = ap.parse_args()
    text = asyncio.run(run(10 if args.smoke else args.rounds))
    print(text)
    if not args.smoke:
        from bench.report import write_section

        write_section("search-layers", text)


if __name__ == "__main__":
    main()
