"""Issue 31 item 4: one big document with 1, 2, 4 and 8 workers, and small-document latency.

``python -m bench.parts [--smoke] [--mode standin|real|busy|small] [--words N] [--workers N] [--threads N]``

* ``standin`` (default): every worker on a simulated host of its own (:mod:`bench.hosts`: a network
  namespace, services reached over a veth pair) against the OpenAI-compatible embedding stand-in
  (:mod:`bench.fake_embeddings`, a fixed 200 ms per batch, batch size ``BATCH``). Per step a fresh
  KB gets one plain-text document of ``WORDS`` words (about 19,400 chunks, under the 20,000 allowed);
  the time is its task's claim → SUCCESS (split, every part, the swap). Goal: 4 workers ≤ 0.3× and
  8 workers ≤ 0.17× the one-worker time.
* ``real``: the real model (the default ONNX runtime) on this machine, same document: today's single
  path (``SPLIT_MIN_CHUNKS`` above the document, so one delivery embeds it all) with 1 worker, then
  the parts with 1 and 2 workers, in one run. Goal: the parts no slower than the single path.
* ``busy``: the real model beside ``HOGS`` CPU-bound processes (``while True``) on this machine, one
  worker: a document of about 6,400 chunks and one of the largest allowed size (about 19,400), each
  must end INDEXED (before: TIMEOUT at 850 s, 74 % embedded). Figure: seconds, chunks/s, status.
* ``small``: upload → INDEXED of ``SMALL_DOCS`` small documents one after the other (one worker,
  real model, cache off), p50 / p90. Run it on the checkout before and after a change: the figure
  is compared across the two runs (small documents never split, so no setting stands in for "before").

Writes the ``parts-<mode>`` section of bench/RESULTS.md (``--smoke``: a small document and 1-2
workers, print only). ``standin`` needs root, ``ip`` and ``socat`` (``make netns-tools``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import time
from dataclasses import dataclass

import httpx

from bench.hosts import Host, cpu_busy, service_ports, start_worker, wait_consuming
from bench.stack import LOGS, NO_CACHE, Stack, poll, upload_all
from bench.workers import documents, fake_server, words
from shared.settings import KnowledgeSettings
from tests.support import Proc, free_port

LATENCY_MS = 200
BATCH = 8
WORDS = 3_100_000  # ~160 words per chunk of 250 tokens with 32 of overlap: ~19,400 chunks
SMALL_DOCS = 30
HOST_BASE = 16
HOGS = 4
BUSY_WORDS = (1_020_000, WORDS)  # ~6,400 and ~19,400 chunks
SMALL_WORDS = 300
#: the single path in ``real`` mode: never split, and a per-chunk budget that keeps the start-up
#: guard (PREFETCH x (base + 20,000 x per chunk) < CONSUMER_TIMEOUT_S) satisfied
SINGLE_PATH = {"split_min_chunks": "20001", "task_budget_per_chunk_s": "0.07"}
#: ``--smoke``: a document of a few hundred chunks, split into parts of 64 (the harness, not a figure)
SMOKE_SPLIT = {"split_min_chunks": "64", "part_chunks": "64"}


@dataclass
class Step:
    label: str
    workers: int
    chunks: int
    parts: int
    seconds: float  # claim of the document -> SUCCESS
    cpu_busy: float  # share of all cores busy, whole machine


async def task_figures(stack: Stack, document_id: int) -> tuple[float, int, int]:
    """(claim → SUCCESS seconds, chunks, parts) of the document's task (parts: embedding_run rows
    with a part, 0 on the single path)."""
    row = (await stack.fetch(
        "SELECT extract(epoch FROM t.end_time - t.start_time) AS s, d.chunk_count AS chunks"
        " FROM index_task t JOIN document_info d ON d.id = t.document_id WHERE t.document_id = $1", document_id))[0]
    parts = await stack.fetchval(
        "SELECT count(DISTINCT part) FROM embedding_run WHERE document_id = $1 AND part IS NOT NULL", document_id)
    return float(row["s"]), int(row["chunks"]), int(parts or 0)


async def index_one(stack: Stack, http: httpx.AsyncClient, tag: str, doc: tuple[str, bytes], label: str,
                    workers: int) -> Step:
    kb = await stack.create_kb(http, tag)
    busy0, total0 = cpu_busy()
    ids = await upload_all(http, kb, [doc])
    by = await stack.wait_indexed(ids)
    busy1, total1 = cpu_busy()
    if by.get("FAILED"):
        err = await stack.fetchval("SELECT error_message FROM index_task WHERE document_id = $1", ids[0])
        raise RuntimeError(f"{label}: FAILED ({err}); see {LOGS}")
    seconds, chunks, parts = await task_figures(stack, ids[0])
    step = Step(label, workers, chunks, parts, seconds, (busy1 - busy0) / max(1.0, total1 - total0))
    print(f"{label}, {workers} worker(s): {seconds:.1f} s, {chunks} chunks, {parts} parts, "
          f"CPU {step.cpu_busy:.0%} busy", flush=True)
    return step


async def standin(counts: list[int], words_each: int, split: dict[str, str]) -> list[Step]:
    port = free_port()
    server = await fake_server(port)
    tag = str(os.getpid() % 100000)
    # hosts 17.. (10.213.17.x ...): bench.hosts, which bench.smoke runs at the same time, takes 1..8
    hosts = [Host(HOST_BASE + i + 1, tag) for i in range(max(counts))]
    doc = documents(words(), 1, words_each, seed=31)[0]
    steps: list[Step] = []
    try:
        async with Stack("parts") as stack:
            common = {"embedding_provider": "openai", "dispatch_workers": str(max(counts)),
                      "max_in_flight_tasks_per_user": "1000"}
            env = stack.child_env(embedding_base_url=f"http://127.0.0.1:{port}", embedding_model="all-MiniLM-L6-v2",
                                  embedding_batch_size=str(BATCH), prefetch="1", **common, **NO_CACHE, **split)
            env.setdefault("S3_ENDPOINT", KnowledgeSettings().s3_endpoint)  # else read from .env
            for h in hosts:
                h.create(service_ports(env))
            url = await stack.start_api(**common)
            _, token = await stack.create_user()
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                         timeout=300) as http:
                for n in counts:
                    procs = [start_worker(hosts[i], env, f"{stack.db}-h{i + 1}-n{n}") for i in range(n)]
                    try:
                        await wait_consuming(procs)
                        steps.append(await index_one(stack, http, f"parts-{n}", doc, "parts", n))
                    finally:
                        for p in procs:
                            await asyncio.to_thread(p.stop)
    finally:
        for h in hosts:
            h.destroy()
        server.terminate()
        server.wait(10)
    return steps


async def _with_workers(stack: Stack, n: int, **overrides: str) -> list[Proc]:
    return [await stack.start_worker(**overrides) for _ in range(n)]


async def real(words_each: int, counts: list[int], split: dict[str, str], threads: int = 0) -> list[Step]:
    """The single path with one worker, then the parts with each of ``counts`` workers;
    ``threads`` > 0: the parts' workers run with ``EMBEDDING_THREADS`` = ``threads`` (several
    workers sharing this machine's cores: one intra-op thread pool per core, not per worker)."""
    doc = documents(words(), 1, words_each, seed=31)[0]
    steps: list[Step] = []
    async with Stack("partsreal") as stack:
        common = {"dispatch_workers": str(max(counts)), "max_in_flight_tasks_per_user": "1000"}
        url = await stack.start_api(**common)
        _, token = await stack.create_user()
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300) as http:
            parts_env = {**split, "embedding_threads": str(threads)} if threads else split
            label = f"parts, EMBEDDING_THREADS={threads}" if threads else "parts"
            legs = [("single path (today)", 1, SINGLE_PATH)] + [(label, n, parts_env) for n in counts]
            for i, (label, n, extra) in enumerate(legs):
                procs = await _with_workers(stack, n, prefetch="1", **common, **NO_CACHE, **extra)
                try:
                    steps.append(await index_one(stack, http, f"real-{i}", doc, label, n))
                finally:
                    for p in procs:
                        await stack.stop(p)
    return steps


def _hog() -> None:
    while True:
        pass


async def busy(sizes: tuple[int, ...], hogs: int) -> list[Step]:
    """Each document indexed by one worker (real model) beside ``hogs`` busy processes."""
    import multiprocessing

    procs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(hogs)]
    for p in procs:
        p.start()
    steps: list[Step] = []
    try:
        async with Stack("partsbusy") as stack:
            url = await stack.start_api()
            await stack.start_worker(prefetch="1", **NO_CACHE)
            _, token = await stack.create_user()
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                         timeout=300) as http:
                for i, n in enumerate(sizes):
                    doc = documents(words(), 1, n, seed=40 + i)[0]
                    steps.append(await index_one(stack, http, f"busy-{i}", doc, f"beside {hogs} CPU hogs", 1))
    finally:
        for p in procs:
            p.kill()
    return steps


async def small(docs: int) -> list[float]:
    """Seconds from each upload's 202 to its INDEXED, documents uploaded one after the other."""
    files = documents(words(), docs, SMALL_WORDS, seed=7)
    latencies: list[float] = []
    async with Stack("partssmall") as stack:
        url = await stack.start_api()
        await stack.start_worker(**NO_CACHE)
        _, token = await stack.create_user()
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            kb = await stack.create_kb(http, "small")
            for name, data in files:
                t0 = time.monotonic()
                (doc_id,) = await upload_all(http, kb, [(name, data)])

                async def indexed(doc_id: int = doc_id) -> bool:
                    status = await stack.fetchval("SELECT status FROM document_info WHERE id = $1", doc_id)
                    if status == "FAILED":
                        raise RuntimeError(f"document {doc_id} FAILED")
                    return bool(status == "INDEXED")

                await poll(indexed, 120, f"{name} INDEXED", 0.02)
                latencies.append(time.monotonic() - t0)
    return latencies


def report_steps(steps: list[Step], mode: str, words_each: int, load: tuple[float, float]) -> str:
    base = steps[0].seconds
    rows = ["| path | workers | chunks | parts | seconds (claim → SUCCESS) | × first row | machine CPU busy |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    rows += [f"| {s.label} | {s.workers} | {s.chunks:,} | {s.parts} | {s.seconds:.1f} | {s.seconds / base:.2f} "
             f"| {s.cpu_busy:.0%} |" for s in steps]
    where = (f"each worker on a simulated host of its own (bench.hosts), the embedding stand-in answering after "
             f"{LATENCY_MS} ms per batch of {BATCH}" if mode == "standin"
             else "the real model (ONNX Runtime) on this machine, workers as local processes")
    what = (f"one plain-text document of {words_each:,} words" if mode != "busy"
            else f"plain-text documents (the first of {words_each:,} words) indexed one after the other")
    return "\n".join([
        f"`python -m bench.parts --mode {mode}`: {what}, {where}; "
        f"cache off, prefetch 1, default SPLIT_MIN_CHUNKS / PART_CHUNKS unless the row says otherwise; one run on "
        f"{os.cpu_count()} cores (load average {load[0]:.1f} before, {load[1]:.1f} after).",
        "",
        *rows,
    ])


def report_small(lat: list[float], load: tuple[float, float]) -> str:
    q = statistics.quantiles(lat, n=10)
    return (f"`python -m bench.parts --mode small`: {len(lat)} documents of {SMALL_WORDS} words uploaded one after "
            f"the other, one worker, real model, cache off: upload → INDEXED p50 {statistics.median(lat) * 1000:.0f} "
            f"ms, p90 {q[8] * 1000:.0f} ms (load average {load[0]:.1f} before, {load[1]:.1f} after).")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="a small document, 1-2 workers, print only (CI)")
    ap.add_argument("--mode", choices=["standin", "real", "busy", "small"], default="standin")
    ap.add_argument("--words", type=int, action="append", help="busy: sizes in words (repeatable); real: the size")
    ap.add_argument("--workers", type=int, action="append", help="real: the parts' worker counts (default 1 and 2)")
    ap.add_argument("--threads", type=int, default=0, help="real: EMBEDDING_THREADS of the parts' workers (0: default)")
    args = ap.parse_args()
    before = os.getloadavg()[0]
    words_each = 60_000 if args.smoke else WORDS
    split = SMOKE_SPLIT if args.smoke else {}
    if args.mode == "standin":
        missing = [t for t in ("ip", "socat") if shutil.which(t) is None]
        if os.geteuid() != 0 or missing:
            sys.exit(f"bench.parts needs root and {', '.join(missing) or 'ip, socat'} (make netns-tools)")
        steps = asyncio.run(standin([1, 2] if args.smoke else [1, 2, 4, 8], words_each, split))
        text = report_steps(steps, args.mode, words_each, (before, os.getloadavg()[0]))
    elif args.mode == "real":
        words_each = args.words[0] if args.words and not args.smoke else words_each
        counts = [1] if args.smoke else (args.workers or [1, 2])
        steps = asyncio.run(real(words_each, counts, split, args.threads))
        text = report_steps(steps, args.mode, words_each, (before, os.getloadavg()[0]))
    elif args.mode == "busy":
        sizes = (words_each,) if args.smoke else tuple(args.words or BUSY_WORDS)
        steps = asyncio.run(busy(sizes, 1 if args.smoke else HOGS))
        text = report_steps(steps, args.mode, sizes[0], (before, os.getloadavg()[0]))
    else:
        text = report_small(asyncio.run(small(4 if args.smoke else SMALL_DOCS)), (before, os.getloadavg()[0]))
    print(text)
    if not args.smoke:
        from bench.report import write_section

        write_section(f"parts-{args.mode}", text)


if __name__ == "__main__":
    main()
