"""P4 (issue 13): indexing throughput with 1 vs 2 workers when the model is a remote endpoint.

``python -m bench.workers [--smoke] [--runs N]`` starts a stand-in OpenAI-compatible embeddings
server with a fixed 200 ms latency (:mod:`bench.fake_embeddings`), the API, and per run first one
worker, then a second joins (``EMBEDDING_PROVIDER=openai``, default batch size and prefetch, embedding
cache off), each time on a fresh KB with distinct documents: ``DOCS`` plain-text files of words
drawn from the corpus novel (``CHUNKS`` chunks each, so each document makes several 200 ms
requests). Throughput = chunks / seconds from the first claim to the last SUCCESS. Figure:
chunks/s with 1 and 2 workers, median over ``--runs`` runs (min–max), and the ratio within a
run. Goal ≥ 1.9. Writes the ``workers`` section of bench/RESULTS.md (``--smoke``: 2 small
documents, one run, print only).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

import httpx
import numpy as np

from bench.stack import LOGS, NO_CACHE, NOVEL, ROOT, Stack, indexing_span, median_spread, upload_all
from tests.support import free_port

LATENCY_MS = 200


def words() -> list[str]:
    src = NOVEL if NOVEL.exists() else ROOT / "samples" / "indexing-primer.md"
    return src.read_bytes().decode("utf-8", "replace").split()


def documents(vocab: list[str], n: int, words_each: int, seed: int) -> list[tuple[str, bytes]]:
    """``n`` distinct plain-text files of ``words_each`` words (paragraphs of 80)."""
    rng = np.random.default_rng(seed)
    out = []
    for d in range(n):
        picks = rng.integers(0, len(vocab), words_each)
        paras = [" ".join(vocab[int(i)] for i in picks[p:p + 80]) for p in range(0, words_each, 80)]
        out.append((f"w{seed}-{d}.txt", "\n\n".join(paras).encode()))
    return out


def _spawn_fake(port: int) -> subprocess.Popen[bytes]:
    LOGS.mkdir(parents=True, exist_ok=True)
    log = open(LOGS / f"fake-embeddings-{os.getpid()}.log", "ab")
    return subprocess.Popen([sys.executable, "-m", "bench.fake_embeddings", "--port", str(port), "--latency-ms",
                             str(LATENCY_MS)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


async def fake_server(port: int) -> subprocess.Popen[bytes]:
    proc = _spawn_fake(port)
    async with httpx.AsyncClient(timeout=2) as c:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if (await c.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    return proc
            except httpx.HTTPError:
                await asyncio.sleep(0.2)
    proc.kill()
    raise RuntimeError("fake embeddings server did not start")


async def one_run(stack: Stack, http: httpx.AsyncClient, files: list[tuple[str, bytes]], tag: str) -> float:
    """Index ``files`` in a fresh KB with the workers running now; chunks/s."""
    kb = await stack.create_kb(http, tag)
    ids = await upload_all(http, kb, files)
    by = await stack.wait_indexed(ids)
    if by.get("FAILED"):
        raise RuntimeError(f"{by['FAILED']} documents FAILED; see {LOGS}")
    span, chunks = await indexing_span(stack.dsn, ids)
    return chunks / span


async def run(docs: int, words_each: int, runs: int) -> str:
    port = free_port()
    server = await fake_server(port)
    one: list[float] = []
    two: list[float] = []
    try:
        env = {"embedding_provider": "openai", "embedding_base_url": f"http://127.0.0.1:{port}",
               "embedding_model": "all-MiniLM-L6-v2", **NO_CACHE}
        async with Stack("workers") as stack:
            os.environ.update(stack.env)
            url = await stack.start_api(embedding_provider="openai", max_in_flight_tasks_per_user="1000")
            _, token = await stack.create_user()
            vocab = words()
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                         timeout=120) as http:
                for r in range(runs):  # one worker, then a second one joins (one start each)
                    first = await stack.start_worker(**env)
                    rates = {1: await one_run(stack, http, documents(vocab, docs, words_each, 100 * r + 1), f"{r}a")}
                    second = await stack.start_worker(**env)
                    rates[2] = await one_run(stack, http, documents(vocab, docs, words_each, 100 * r + 2), f"{r}b")
                    for p in (first, second):
                        await stack.stop(p)
                    one.append(rates[1])
                    two.append(rates[2])
                    print(f"run {r + 1}: 1 worker {rates[1]:.1f} chunks/s, 2 workers {rates[2]:.1f} chunks/s, "
                          f"ratio {rates[2] / rates[1]:.2f}", flush=True)
    finally:
        server.terminate()
        server.wait(10)
    ratios = [b / a for a, b in zip(one, two, strict=True)]
    ok = "met" if sorted(ratios)[len(ratios) // 2] >= 1.9 else "**not met**"
    return "\n".join([
        f"`python -m bench.workers` (P4): {docs} distinct plain-text documents of {words_each:,} words per run, "
        f"embedded through an OpenAI-compatible endpoint answering after a fixed {LATENCY_MS} ms (a stand-in "
        "the bench starts), default batch size and prefetch, embedding cache off; chunks/s from the first claim "
        f"to the last SUCCESS, median over {runs} runs (min–max).",
        "",
        "| 1 worker chunks/s | 2 workers chunks/s | ratio | goal ≥ 1.9 |",
        "|---:|---:|---:|---|",
        f"| {median_spread(one, '{:.1f}')} | {median_spread(two, '{:.1f}')} | {median_spread(ratios)} | {ok} |",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="2 small documents, one run, print only (CI)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--docs", type=int, default=12)
    args = ap.parse_args()
    docs, words_each, runs = (2, 400, 1) if args.smoke else (args.docs, 40_000, max(5, args.runs))
    text = asyncio.run(run(docs, words_each, runs))
    print(text)
    if not args.smoke:
        from bench.report import write_section

        write_section("workers", text)


if __name__ == "__main__":
    main()
