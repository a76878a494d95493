"""P2 and P5 (issue 13): end-to-end indexing throughput against the model alone, and the worker's
peak memory against its idle footprint, in the same run.

``python -m bench.throughput [--smoke] [--runs N]`` (isolated stack, :mod:`bench.stack`) starts
the API and one worker (default settings: local all-MiniLM-L6-v2, sandboxed parsing, batch
``EMBEDDING_BATCH_SIZE``; embedding cache off so every chunk reaches the model). Each run:

- **end to end**: every file of ../shared/corpus (the novel included; files that end FAILED, e.g.
  the encrypted PDF, count no chunks) uploaded into a fresh KB; chunks/s = indexed chunks /
  seconds from the first claim to the last SUCCESS;
- **raw**: a fresh process of the same kind (``python -m bench.throughput --raw FILE``) loads the
  same model on the same runtime (``EMBEDDING_RUNTIME``: ONNX Runtime by default) and times the
  embedding of exactly those chunk texts (read back from the database), same batch size, as one
  call; chunks/s excludes the model load.

Figure: both rates, median over ``--runs`` runs (min–max), and the ratio end-to-end / raw within a
run. Goal ≥ 0.9.

P5, same worker: its resident set plus its descendants' (the sandbox child) is sampled every
50 ms from ``/proc/<pid>/status`` (VmRSS). Idle = the sum once the worker consumes, with the model
loaded and the child warmed, before any upload. Each run's peak is taken while the corpus (its
largest file: the novel) is indexed, and then while a generated 600-page text PDF
(``tests.support.pdfgen``) is indexed alone. Goal: peak − idle ≤ 300 MB.

Writes the ``throughput`` and ``memory`` sections of bench/RESULTS.md (``--smoke``: two small files
and a 5-page PDF, one run, print only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import httpx

from bench.stack import CORPUS, NO_CACHE, ROOT, RssSampler, Stack, indexing_span, median_spread, upload_all

SMOKE_FILES = ("fake-text.txt", "handbook-1p.docx")
#: How the report names the corpus (set by ``--without``).
NOVEL_NOTE = ["the novel included"]


def corpus_files(smoke: bool, without: frozenset[str] = frozenset()) -> list[tuple[str, bytes]]:
    if not CORPUS.exists():
        return [("indexing-primer.md", (ROOT / "samples" / "indexing-primer.md").read_bytes())]
    names = SMOKE_FILES if smoke else sorted(p.name for p in CORPUS.iterdir() if p.is_file() and p.name not in without)
    return [(n, (CORPUS / n).read_bytes()) for n in names
            if n not in ("README.md", "SOURCES.md") and (CORPUS / n).is_file()]


def big_pdf(pages: int) -> bytes:
    """A text PDF of ``pages`` pages, 45 lines of words each (every page different)."""
    from tests.support.pdfgen import pdf_pages, text_page

    words = ("index", "chunk", "vector", "worker", "queue", "fence", "token", "model", "batch", "commit")
    return pdf_pages([text_page(*(" ".join(words[(p + i + j) % 10] + str(p) for j in range(12))
                                  for i in range(45))) for p in range(pages)])


def memory_report(idle: int, corpus_peaks: list[int], pdf_peaks: list[int], pages: int) -> str:
    mb = 1024.0
    d_corpus = [(p - idle) / mb for p in corpus_peaks]
    d_pdf = [(p - idle) / mb for p in pdf_peaks]
    worst = max(statistics.median(d_corpus), statistics.median(d_pdf))
    ok = "met" if worst <= 300 else "**not met**"
    return "\n".join([
        "`python -m bench.throughput` (P5): resident set of the worker plus its sandbox child (VmRSS of the process "
        "tree, sampled every 50 ms). Idle = once consuming, model loaded, child warmed, nothing uploaded; peak = "
        f"while the corpus ({NOVEL_NOTE[0]}) is indexed, then while a generated {pages}-page text PDF is "
        f"indexed alone. MB, median over {len(corpus_peaks)} runs (min–max).",
        "",
        "| idle MB | peak corpus | Δ | peak 600-page PDF | Δ | goal Δ ≤ 300 MB |",
        "|---:|---:|---:|---:|---:|---|",
        f"| {idle / mb:.0f} | {median_spread([p / mb for p in corpus_peaks], '{:.0f}')} | "
        f"{median_spread(d_corpus, '{:.0f}')} | {median_spread([p / mb for p in pdf_peaks], '{:.0f}')} | "
        f"{median_spread(d_pdf, '{:.0f}')} | {ok} |",
    ])


def raw_encode(path: Path, batch_size: int) -> None:
    """The baseline process: load the model on the worker's runtime (``EMBEDDING_RUNTIME``, default
    ONNX Runtime), embed the texts in ``path`` (JSON list) as one call, print ``{"chunks", "seconds"}``."""
    import asyncio

    os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from shared.adapters.embedding.local import SentenceTransformerEmbedder
    from shared.settings import WorkerSettings

    texts = json.loads(path.read_text(encoding="utf-8"))
    model = SentenceTransformerEmbedder(batch_size=batch_size, runtime=WorkerSettings().embedding_runtime)
    asyncio.run(model.embed(texts[:8]))  # warm
    t0 = time.perf_counter()
    asyncio.run(model.embed(texts))
    print(json.dumps({"chunks": len(texts), "seconds": time.perf_counter() - t0}))


async def chunk_texts(dsn: str, ids: list[int]) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT content FROM document_chunk WHERE document_id = ANY($1::bigint[])"
                                " ORDER BY document_id, chunk_index", ids)
        return [r["content"] for r in rows]
    finally:
        await conn.close()


def _raw_rate(texts: list[str], batch_size: int) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(texts, f)
    try:
        out = subprocess.run([sys.executable, "-m", "bench.throughput", "--raw", f.name, "--batch-size",
                              str(batch_size)], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    got = json.loads(out.strip().splitlines()[-1])
    return float(got["chunks"]) / float(got["seconds"])


def report(files: int, chunks: int, batch: int, e2e: list[float], raw: list[float]) -> str:
    ratios = [a / b for a, b in zip(e2e, raw, strict=True)]
    ok = "met" if sorted(ratios)[len(ratios) // 2] >= 0.9 else "**not met**"
    return "\n".join([
        f"`python -m bench.throughput` (P2): the {files} files of the shared corpus ({NOVEL_NOTE[0]}; "
        f"{chunks:,} chunks indexed per run) uploaded to one worker (local MiniLM, batch {batch}, sandboxed "
        "parsing, embedding cache off), chunks/s from the first claim to the last SUCCESS, against the model alone "
        "embedding the same chunk texts in a fresh process of the same kind (same model, runtime and batch size, "
        f"model load excluded). Median over {len(e2e)} runs (min–max).",
        "",
        "| end-to-end chunks/s | raw encode chunks/s | ratio | goal ≥ 0.9 |",
        "|---:|---:|---:|---|",
        f"| {median_spread(e2e, '{:.1f}')} | {median_spread(raw, '{:.1f}')} | {median_spread(ratios)} | {ok} |",
    ])


async def run(smoke: bool, runs: int, without: frozenset[str] = frozenset()) -> str:
    from shared.settings import WorkerSettings

    files = corpus_files(smoke, without)
    if without:
        NOVEL_NOTE[0] = "without " + ", ".join(sorted(without))
    e2e: list[float] = []
    raw: list[float] = []
    corpus_peaks: list[int] = []
    pdf_peaks: list[int] = []
    pages = 5 if smoke else 600
    pdf = big_pdf(pages)
    chunks = 0
    async with Stack("throughput") as stack:
        os.environ.update(stack.env)
        batch = WorkerSettings().embedding_batch_size
        url = await stack.start_api(embedding_provider="openai", max_in_flight_tasks_per_user="1000")
        worker = await stack.start_worker(**NO_CACHE)
        await asyncio.sleep(2)
        idle = RssSampler(worker.pid).total_kib()
        _, token = await stack.create_user()
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=300) as http:
            for r in range(runs):
                kb = await stack.create_kb(http, f"run{r}")
                with RssSampler(worker.pid) as rss:
                    ids = await upload_all(http, kb, files)
                    await stack.wait_indexed(ids)
                corpus_peaks.append(rss.peak_kib)
                span, chunks = await indexing_span(stack.dsn, ids)
                texts = await chunk_texts(stack.dsn, ids)
                e2e.append(chunks / span)
                raw.append(await asyncio.to_thread(_raw_rate, texts, batch))
                print(f"run {r + 1}: {chunks} chunks, end to end {e2e[-1]:.1f} chunks/s, raw encode {raw[-1]:.1f} "
                      f"chunks/s, ratio {e2e[-1] / raw[-1]:.2f}", flush=True)
                with RssSampler(worker.pid) as rss:
                    pdf_ids = await upload_all(http, kb, [(f"big-{r}.pdf", pdf)])
                    by = await stack.wait_indexed(pdf_ids)
                if by.get("INDEXED") != 1:
                    raise RuntimeError(f"the {pages}-page PDF did not index: {by}")
                pdf_peaks.append(rss.peak_kib)
                print(f"  memory: idle {idle / 1024:.0f} MB, peak corpus {corpus_peaks[-1] / 1024:.0f} MB, "
                      f"peak {pages}-page PDF {pdf_peaks[-1] / 1024:.0f} MB", flush=True)
                if not smoke:  # after every run: a long bench cut short still leaves its figures (and run count)
                    from bench.report import write_section

                    write_section("throughput", report(len(files), chunks, batch, e2e, raw))
                    write_section("memory", memory_report(idle, corpus_peaks, pdf_peaks, pages))
    return report(len(files), chunks, batch, e2e, raw) + "\n\n" + memory_report(idle, corpus_peaks, pdf_peaks, pages)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="two small files, one run, print only (CI)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--without", action="append", default=[], metavar="FILE",
                    help="leave this corpus file out (e.g. the novel, when a run must be short); said in the report")
    ap.add_argument("--raw", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--batch-size", type=int, default=64, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.raw:
        raw_encode(args.raw, args.batch_size)
        return
    runs = 1 if args.smoke else max(5, args.runs)
    text = asyncio.run(run(args.smoke, runs, frozenset(args.without)))
    print(text)
    if not args.smoke:
        from bench.report import write_section

        write_section("throughput", text)


if __name__ == "__main__":
    main()
