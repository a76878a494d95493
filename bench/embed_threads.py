"""The local embedder's ONNX Runtime settings chosen by measurement under contention (issue 30, item 2).

``python -m bench.embed_threads [--smoke] [--rounds N] [--load N]``: our embedder
(``SentenceTransformerEmbedder``, ONNX Runtime, the default graph) in a fresh process per setting, on the same
texts (windows of 150 words of the corpus novel: ≈200 MiniLM tokens each, the mean chunk of bench.peer), for
every combination of intra-op spinning (on: ONNX Runtime's default; off), intra-op threads (1, 2) and batch size
(16, 64), quiet and beside ``--load`` busy processes (``bench.peer.CpuLoad``), the settings interleaved
within each of ``--rounds`` rounds; chunks/s (median over rounds). Then the API's case: one 12-word query at a
time on 1 thread, spinning on and off, while another process embeds batches as a worker does (p50 / p99 ms).
CPU seconds per chunk come from the child's ``getrusage``: a spinning thread's wait counts as CPU time.

Writes the ``embed-threads`` section of bench/RESULTS.md (``--smoke``: two settings, a few texts, print only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from bench.peer import CORPUS_DIR, CpuLoad, loadavg
from bench.stack import NOVEL, ROOT

QUERY = "who confirmed the count for the shipment of copper cable that arrived a day late"


@dataclass(frozen=True)
class Setting:
    spinning: bool
    threads: int
    batch: int

    @property
    def name(self) -> str:
        return f"spin {'on' if self.spinning else 'off'}, {self.threads} thread{'s' * (self.threads > 1)}, " \
               f"batch {self.batch}"


GRID = [Setting(s, t, b) for s in (True, False) for t in (2, 1) for b in (64, 16)]
SMOKE_GRID = [Setting(True, 2, 64), Setting(False, 2, 64)]


def novel_windows(n: int, words: int = 150) -> list[str]:
    """``n`` consecutive ``words``-word windows of the novel (a sample file without the corpus)."""
    path = CORPUS_DIR / NOVEL.name
    source = path if path.exists() else ROOT / "samples" / "indexing-primer.md"
    w = source.read_text(encoding="utf-8", errors="replace").split()
    start = min(len(w) // 3, max(0, len(w) - n * words))
    out = [" ".join(w[i:i + words]) for i in range(start, len(w), words)][:n]
    return out or ["a short text"] * n


# ------------------------------------------------------------------ the child process


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run in a fresh process: load the embedder with the spec's setting, embed (warm, then timed)."""
    import asyncio
    import resource

    from shared.adapters.embedding.local import SentenceTransformerEmbedder

    e = SentenceTransformerEmbedder(batch_size=spec["batch"], threads=spec["threads"], spinning=spec["spinning"])
    texts = spec["texts"]
    if spec.get("query"):
        asyncio.run(e.embed([QUERY]))
        ms = []
        deadline = time.monotonic() + spec["seconds"]
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            asyncio.run(e.embed([QUERY]))
            ms.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.05)  # queries arrive one at a time, not back to back
        return {"ms": ms}
    if spec.get("forever"):
        while True:
            asyncio.run(e.embed(texts))
    asyncio.run(e.embed(texts[:8]))
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    asyncio.run(e.embed(texts))
    seconds = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return {"chunks_s": len(texts) / seconds, "cpu_ms_per_chunk": cpu * 1000 / len(texts)}


def _spec(s: Setting, texts: list[str], **more: Any) -> dict[str, Any]:
    return {"spinning": s.spinning, "threads": s.threads, "batch": s.batch, "texts": texts, **more}


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    p = subprocess.run([sys.executable, "-m", "bench.embed_threads", "--child"], input=json.dumps(spec),
                       capture_output=True, text=True, cwd=ROOT, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"embed_threads child failed:\n{p.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


# ------------------------------------------------------------------ the bench


def throughput(grid: list[Setting], texts: list[str], rounds: int, load: int) -> tuple[dict[Setting, list[Any]],
                                                                                         list[float]]:
    got: dict[Setting, list[Any]] = {s: [] for s in grid}
    la: list[float] = []
    with CpuLoad(load):
        for _ in range(rounds):
            for s in grid:
                got[s].append(run_child(_spec(s, texts)))
            la.append(loadavg())
    return got, la


def query_latency(spinning: bool, worker: Setting, texts: list[str], seconds: float) -> list[float]:
    """The API's query embedding (1 thread, ``spinning``) while a worker-like process embeds ``texts`` on and on."""
    bg = subprocess.Popen([sys.executable, "-m", "bench.embed_threads", "--child"], stdin=subprocess.PIPE,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, text=True)
    assert bg.stdin is not None
    bg.stdin.write(json.dumps(_spec(worker, texts, forever=True)))
    bg.stdin.close()
    try:
        time.sleep(3)  # model loaded, embedding
        ms: list[float] = run_child(_spec(Setting(spinning, 1, 1), [], query=True, seconds=seconds))["ms"]
        return ms
    finally:
        bg.kill()
        bg.wait(10)


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


def report(tables: dict[int, tuple[dict[Setting, list[Any]], list[float]]], queries: dict[tuple[bool, bool],
           list[float]], n: int, rounds: int, worker: Setting) -> str:
    loads = sorted(tables)
    head = " | ".join(f"chunks/s, {'quiet' if ld == 0 else f'beside {ld} busy processes'} | CPU ms per chunk"
                      for ld in loads)
    lines = [
        "Our embedder's ONNX Runtime settings by measurement (issue 30, item 2): `python -m bench.embed_threads`. "
        f"{n} windows of 150 words of the novel (≈200 MiniLM tokens each), one fresh process per setting, the "
        f"settings interleaved in each of {rounds} rounds (medians). "
        + "; ".join(f"load average {min(la):.1f}–{max(la):.1f} after the rounds "
                    f"{'quiet' if ld == 0 else f'beside {ld}'}" for ld, (_, la) in tables.items()) + ".",
        "",
        f"| setting | {head} |",
        "|---" * (1 + 2 * len(loads)) + "|",
    ]
    for s in tables[loads[0]][0]:
        cells = []
        for ld in loads:
            rs = tables[ld][0][s]
            cells.append(f"{statistics.median(r['chunks_s'] for r in rs):.1f} | "
                         f"{statistics.median(r['cpu_ms_per_chunk'] for r in rs):.0f}")
        lines.append(f"| {s.name} | {' | '.join(cells)} |")
    lines += ["", f"The API's query embedding (1 thread, one 12-word query every 50 ms) while another process embeds "
              f"as a worker does ({worker.name}), ms:", "",
              "| query spinning | worker spinning | p50 | p99 | queries |", "|---|---|---:|---:|---:|"]
    for (qs, ws), ms in queries.items():
        lines.append(f"| {'on' if qs else 'off'} | {'on' if ws else 'off'} | {_pct(ms, 0.5):.1f} | "
                     f"{_pct(ms, 0.99):.1f} | {len(ms)} |")
    return "\n".join(lines)


def main() -> None:
    if "--child" in sys.argv:
        print(json.dumps(child(json.loads(sys.stdin.read()))))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--load", type=int, default=2, metavar="N", help="busy processes of the loaded half (0: none)")
    ap.add_argument("--texts", type=int, default=192)
    ap.add_argument("--query-seconds", type=float, default=20.0)
    args = ap.parse_args()
    grid, n, rounds = (SMOKE_GRID, 8, 1) if args.smoke else (GRID, args.texts, args.rounds)
    texts = novel_windows(n)
    loads = [0] if args.smoke else sorted({0, args.load})
    tables = {ld: throughput(grid, texts, rounds, ld) for ld in loads}
    worker = Setting(True, 2, 64)
    seconds = 2.0 if args.smoke else args.query_seconds
    queries = {(qs, ws): query_latency(qs, Setting(ws, worker.threads, worker.batch), texts, seconds)
               for ws in (True, False) for qs in (True, False)}
    text = report(tables, queries, n, rounds, worker)
    print(text)
    if not args.smoke:
        from bench.report import write_section

        write_section("embed-threads", text)


if __name__ == "__main__":
    os.environ.setdefault("DO_NOT_TRACK", "1")
    main()
