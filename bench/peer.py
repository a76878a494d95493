"""Ours against the peer users would pick instead (issue 20): one table, measured in one run.

``python -m bench.peer [--smoke] [--pairs N]``. The peer (:mod:`bench.peer_side`): LlamaIndex
``SimpleDirectoryReader`` → ``SentenceSplitter(256, 20)`` → ``HuggingFaceEmbedding`` (the same
all-MiniLM-L6-v2 files, from disk, batch 64, 2 torch threads) → ``PGVectorStore(hybrid_search=True)``,
in a database of its own (``rag_bench_peer_<pid>``). Ours: the isolated stack of :mod:`bench.stack`
(the real API and one worker, embedding cache off). Same files (the shared corpus but the files
neither side indexes, empty, whitespace-only, encrypted, and the two the peer's run stops on:
:data:`SKIP`), indexed in turn, ours then the peer's,
``--pairs`` times (A B A B ...):

- **indexing**: input MB/s and chunks/s from the first claim to the last SUCCESS (ours) / from
  reading the files to the last row stored (peer; model load excluded on both sides); against the
  raw speed of the runtime that side embeds with, on that side's own chunk texts (same model,
  batch 64, 2 threads; ours: our embedder on ONNX Runtime, the worker's default, and torch
  ``encode()`` for reference, in a fresh process; the peer: torch ``encode()`` on its loaded model;
  timed on a random sample of at most 768 texts); CPU seconds
  per input MB of the side's own processes (ours: the worker and its sandbox child, sampled from
  ``/proc``; peer: ``getrusage`` of its process); peak RSS (ours: worker + child; peer: its process);
- **search**, on the last pair's data plus a look-alike set (:mod:`bench.lookalike`, indexed on both
  sides, untimed): latency per mode (ours through HTTP with the query embedded by the API; the
  peer's ``PGVectorStore.query`` with its embedding call), idle, then (full run) while each side
  indexes the novel again; identifier recall@5 (codes alone and in a question) and
  self-retrieval@5 (12-word passages of both sides' chunks, hit = the passage's file in the top 5).

Writes the ``peer`` section of bench/RESULTS.md (``--smoke``: two small files, one pair, a handful
of queries, no load phase, print only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench.lookalike import lookalike_docs
from bench.stack import CORPUS, NO_CACHE, NOVEL, ROOT, Stack, children, indexing_span, percentile, rss_kib, upload_all
from shared.settings import WorkerSettings

SMOKE_FILES = ("fake-text.txt", "codeblock.md")
#: The shared corpus (``BENCH_CORPUS`` overrides: a worktree is not next to ../shared).
CORPUS_DIR = Path(os.environ.get("BENCH_CORPUS", str(CORPUS)))
NOVEL_FILE = CORPUS_DIR / NOVEL.name
#: Corpus files left out: the corpus' own notes; no text or encrypted (neither side indexes them); and the two
#: files the peer stops on, its whole run failing: pypdf's text of layout-parser-paper-fast.pdf and the UTF-16
#: text (read as UTF-8) hold NUL characters, which PostgreSQL refuses (llama_index#9571; ours strips them).
SKIP = frozenset({"README.md", "SOURCES.md", "empty.txt", "fake-text-all-whitespace.txt", "password.pdf",
                  "layout-parser-paper-fast.pdf", "fake-text-utf-16.txt"})
MODES = ("keyword", "hybrid", "vector")
TOP_K = 5
_TICK = os.sysconf("SC_CLK_TCK")
#: The runtime our worker embeds with in this bench (the default, EMBEDDING_RUNTIME).
OUR_RUNTIME = WorkerSettings.model_fields["embedding_runtime"].default
NO_RAW = {"raw_s": float("nan"), "mean_tokens": float("nan")}  #: smoke: raw encode() not timed


@dataclass(frozen=True)
class Size:
    pairs: int
    passages: int  #: self-retrieval queries (half from each side's chunks)
    lookalikes: int
    load_queries: int  #: queries per mode while the side indexes the novel (0: no load phase)


FULL = Size(pairs=3, passages=100, lookalikes=120, load_queries=30)
SMOKE = Size(pairs=1, passages=4, lookalikes=3, load_queries=0)


@dataclass
class Round:
    seconds: float
    chunks: int
    cpu_s: float
    peak_kib: int
    raw_s: float  #: torch ``encode()`` of the round's chunks (sentence-transformers, batch 64, 2 threads)
    mean_tokens: float
    texts: list[str] = field(repr=False)
    files: list[str] = field(repr=False)
    own_raw_s: float = float("nan")  #: the side's own runtime on the same chunks (ours: ONNX Runtime)

    @property
    def runtime_raw_s(self) -> float:
        """Raw seconds of the runtime this side indexes with (the peer: torch ``encode()``)."""
        return self.raw_s if math.isnan(self.own_raw_s) else self.own_raw_s


# ------------------------------------------------------------------ processes


def _cpu_ticks(pid: int) -> tuple[int, int]:
    """(utime + stime, cutime + cstime) of ``pid`` in clock ticks; (0, 0) if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return int(v[11]) + int(v[12]), int(v[13]) + int(v[14])
    except (OSError, ValueError, IndexError):
        return 0, 0


class TreeSampler:
    """Peak RSS and CPU seconds of ``pid`` and its descendants while in the ``with`` block (every 0.1 s).
    CPU: each live process's own time since the start (since birth if born later), plus the time
    of reaped children as their parent reports it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kib = 0
        self._base: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self._reaped0 = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _tree(self) -> list[int]:
        todo, out = [self.pid], []
        while todo:
            p = todo.pop()
            out.append(p)
            todo.extend(children(p))
        return out

    def _sample(self) -> None:
        tree = self._tree()
        self.peak_kib = max(self.peak_kib, sum(rss_kib(p) for p in tree))
        self._last = {p: _cpu_ticks(p)[0] for p in tree}

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self._sample()

    @property
    def cpu_s(self) -> float:
        own = sum(t - self._base.get(p, 0) for p, t in self._last.items())
        reaped = sum(_cpu_ticks(p)[1] for p in self._last) - self._reaped0
        return (own + reaped) / _TICK

    def __enter__(self) -> TreeSampler:
        tree = self._tree()
        self._base = {p: _cpu_ticks(p)[0] for p in tree}
        self._reaped0 = sum(_cpu_ticks(p)[1] for p in tree)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def _spec_file(spec: dict[str, Any]) -> tuple[Path, Path]:
    fd, name = tempfile.mkstemp(prefix="peer-", suffix=".json")
    os.close(fd)
    out = Path(name + ".out")
    Path(name).write_text(json.dumps({**spec, "out": str(out)}), encoding="utf-8")
    return Path(name), out


def peer_job(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one :mod:`bench.peer_side` job in a fresh process; its JSON result."""
    path, out = _spec_file(spec)
    try:
        p = subprocess.run([sys.executable, "-m", "bench.peer_side", str(path)], cwd=ROOT, capture_output=True,
                           text=True, env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        if p.returncode != 0:
            raise RuntimeError(f"peer job {spec['job']} failed:\n{p.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        return result
    finally:
        path.unlink(missing_ok=True)
        out.unlink(missing_ok=True)


# ------------------------------------------------------------------ one round per side


async def ours_round(stack: Stack, http: httpx.AsyncClient, worker_pid: int, files: list[tuple[str, bytes]],
                     name: str, raw: bool = True) -> Round:
    kb = await stack.create_kb(http, name)
    with TreeSampler(worker_pid) as tree:
        ids = await upload_all(http, kb, files)
        await stack.wait_indexed(ids)
    span, chunks = await indexing_span(stack.dsn, ids)
    rows = await stack.fetch("SELECT c.content, d.filename FROM document_chunk c JOIN document_info d"
                             " ON d.id = c.document_id WHERE d.id = ANY($1::bigint[])"
                             " ORDER BY d.id, c.chunk_index", ids)
    texts = [r["content"] for r in rows]
    enc = (await asyncio.to_thread(peer_job, {"job": "encode", "texts": texts, "runtime": OUR_RUNTIME}) if raw
           else NO_RAW)
    return Round(span, chunks, tree.cpu_s, tree.peak_kib, float(enc["raw_s"]), float(enc["mean_tokens"]), texts,
                 [r["filename"] for r in rows], float(enc.get("onnx_s", float("nan"))))


async def peer_round(database: str, paths: list[Path], table: str, raw: bool = True,
                     also: dict[str, list[str]] | None = None) -> Round:
    """One timed peer indexing into ``table``; ``also``: more tables indexed afterwards, untimed."""
    got = await asyncio.to_thread(peer_job, {"job": "index", "database": database, "table": table,
                                              "files": [str(p) for p in paths], "raw": raw, "also": also or {}})
    got = {**NO_RAW, **got}
    return Round(float(got["seconds"]), int(got["chunks"]), float(got["cpu_s"]), int(got["peak_kib"]),
                 float(got["raw_s"]), float(got["mean_tokens"]), got["texts"], got["files"])


# ------------------------------------------------------------------ queries


@dataclass(frozen=True)
class Query:
    kind: str  #: "self", "alone", "in a question"
    text: str
    expect: str  #: the file name a hit holds


def make_queries(ours: Round, peer: Round, size: Size) -> list[Query]:
    """Self-retrieval passages (12 consecutive words of a chunk, half from each side) and look-alike codes."""
    rng = random.Random(20)
    out: list[Query] = []
    for side in (ours, peer):
        pool = [(t.split(), f) for t, f in zip(side.texts, side.files, strict=True) if len(t.split()) >= 12]
        for words, f in rng.sample(pool, min(len(pool), size.passages // 2)):
            s = rng.randrange(0, len(words) - 11)
            out.append(Query("self", " ".join(words[s:s + 12]), f))
    for i, d in enumerate(lookalike_docs(size.lookalikes)):
        out += [Query(form, text, d.name) for form, text in d.queries(i).items()]
    return out


async def ours_search(http: httpx.AsyncClient, kbs: dict[str, int], queries: list[Query]
                      ) -> dict[str, list[tuple[float, bool]]]:
    """Per mode: (ms, hit) of every query, through the API."""
    out: dict[str, list[tuple[float, bool]]] = {m: [] for m in MODES}
    for mode in MODES:  # warm
        await http.post(f"/api/v1/knowledge-bases/{kbs['self']}/search", json={"query": "warm up", "mode": mode})
    for mode in MODES:
        for q in queries:
            kb = kbs["self" if q.kind == "self" else "lookalike"]
            t0 = time.perf_counter()
            r = await http.post(f"/api/v1/knowledge-bases/{kb}/search",
                                json={"query": q.text, "top_k": TOP_K, "mode": mode})
            ms = (time.perf_counter() - t0) * 1000
            r.raise_for_status()
            out[mode].append((ms, q.expect in {h["filename"] for h in r.json()["results"]}))
    return out


def peer_search(database: str, tables: dict[str, str], queries: list[Query]) -> dict[str, list[tuple[float, bool]]]:
    spec = {"job": "search", "database": database, "top_k": TOP_K,
            "queries": [{"mode": m, "text": q.text, "table": tables["self" if q.kind == "self" else "lookalike"]}
                        for m in MODES for q in queries]}
    got = peer_job(spec)["results"]
    out: dict[str, list[tuple[float, bool]]] = {m: [] for m in MODES}
    i = 0
    for mode in MODES:
        for q in queries:
            out[mode].append((float(got[i]["ms"]), q.expect in got[i]["files"]))
            i += 1
    return out


# ------------------------------------------------------------------ search while indexing


async def ours_under_load(stack: Stack, http: httpx.AsyncClient, kbs: dict[str, int], queries: list[Query]
                          ) -> dict[str, list[tuple[float, bool]]]:
    """Our search while the worker embeds the novel (uploaded again into a scratch KB)."""
    kb = await stack.create_kb(http, "load")
    (doc,) = await upload_all(http, kb, [("novel-load.txt", NOVEL_FILE.read_bytes())])

    async def embedding() -> bool:
        stage = await stack.fetchval("SELECT stage FROM index_task WHERE document_id = $1 ORDER BY id DESC LIMIT 1",
                                     doc)
        return bool(stage == "EMBEDDING")

    from bench.stack import poll

    await poll(embedding, 600, "the worker embeds the novel", 0.5)
    return await ours_search(http, kbs, queries)


def peer_under_load(database: str, tables: dict[str, str], queries: list[Query]) -> dict[str, list[tuple[float, bool]]]:
    """The peer's search while a peer process indexes the novel into a scratch table."""
    ready = Path(tempfile.mkdtemp(prefix="peer-load-")) / "ready"
    path, out = _spec_file({"job": "index", "database": database, "table": "load", "files": [str(NOVEL_FILE)],
                            "raw": False, "ready": str(ready)})
    load = subprocess.Popen([sys.executable, "-m", "bench.peer_side", str(path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    try:
        deadline = time.monotonic() + 600
        while not ready.exists():
            if load.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the peer's load process did not start")
            time.sleep(0.2)
        time.sleep(10)  # reading and splitting the novel (~3 s); then it embeds for minutes
        return peer_search(database, tables, queries)
    finally:
        load.terminate()
        load.wait(30)
        path.unlink(missing_ok=True)
        out.unlink(missing_ok=True)


# ------------------------------------------------------------------ report

Lat = dict[str, list[tuple[float, bool]]]  # mode -> (ms, hit) per query
Lat2 = tuple[Lat, Lat]  # (ours, peer)


def _med(values: list[float], fmt: str = "{:.3f}") -> str:
    s = fmt.format(statistics.median(values))
    return s if len(values) == 1 else f"{s} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def _pcts(lat: dict[str, list[tuple[float, bool]]], mode: str) -> tuple[float, float]:
    ms = [m for m, _ in lat[mode]]
    return percentile(ms, 0.5), percentile(ms, 0.99)


def _recall(lat: dict[str, list[tuple[float, bool]]], queries: list[Query], mode: str, kinds: set[str]) -> float:
    got = [hit for (_, hit), q in zip(lat[mode], queries, strict=True) if q.kind in kinds]
    return sum(got) / max(1, len(got))


def _indexing_rows(ours: list[Round], peer: list[Round], mb: float) -> list[str]:
    def per(rounds: list[Round], f: Any) -> list[float]:
        return [float(f(r)) for r in rounds]

    def row(name: str, f: Any, fmt: str = "{:.3f}", ratio: bool = True) -> str:
        a, b = per(ours, f), per(peer, f)
        rs = [x / y for x, y in zip(a, b, strict=True)] if ratio else []
        return f"| {name} | {_med(a, fmt)} | {_med(b, fmt)} | {_med(rs, '{:.2f}') if rs else '—'} |"

    return [
        row("end-to-end input MB/s", lambda r: mb / r.seconds, "{:.4f}"),
        row(f"end-to-end chunks/s ({ours[-1].chunks:,} vs {peer[-1].chunks:,} chunks, "
            f"{ours[-1].mean_tokens:.0f} vs {peer[-1].mean_tokens:.0f} MiniLM tokens on average)",
            lambda r: r.chunks / r.seconds, "{:.1f}"),
        row("end-to-end / raw speed of that side's runtime on its chunks, same round (ours: ONNX Runtime;"
            " peer: torch `encode()`)", lambda r: r.runtime_raw_s / r.seconds, "{:.2f}", ratio=False),
        row("raw torch `encode()` of that side's chunks, chunks/s", lambda r: r.chunks / r.raw_s, "{:.1f}"),
        row("raw speed of that side's runtime, chunks/s", lambda r: r.chunks / r.runtime_raw_s, "{:.1f}"),
        row("CPU-seconds per input MB (own processes)", lambda r: r.cpu_s / mb, "{:.1f}"),
        row("peak RSS while indexing, MB (ours: worker + sandbox child)", lambda r: r.peak_kib / 1024, "{:.0f}"),
    ]


def _search_rows(ours: dict[str, list[tuple[float, bool]]], peer: dict[str, list[tuple[float, bool]]],
                 label: str) -> list[str]:
    rows = []
    for mode in MODES:
        (o50, o99), (p50, p99) = _pcts(ours, mode), _pcts(peer, mode)
        rows.append(f"| search p50 / p99 ms, {mode}{label} | {o50:.0f} / {o99:.0f} | {p50:.0f} / {p99:.0f} | "
                    f"{o50 / p50:.2f} |")
    return rows


def _recall_rows(ours: dict[str, list[tuple[float, bool]]], peer: dict[str, list[tuple[float, bool]]],
                 queries: list[Query]) -> list[str]:
    def cell(lat: dict[str, list[tuple[float, bool]]], kinds: set[str]) -> str:
        return " / ".join(f"{_recall(lat, queries, m, kinds):.3f}" for m in MODES)

    n = sum(q.kind == "alone" for q in queries)
    return [
        f"| identifier recall@5, code alone ({n} look-alikes): keyword / hybrid / vector | "
        f"{cell(ours, {'alone'})} | {cell(peer, {'alone'})} | — |",
        f"| identifier recall@5, code in a question: keyword / hybrid / vector | "
        f"{cell(ours, {'in a question'})} | {cell(peer, {'in a question'})} | — |",
        f"| self-retrieval recall@5 ({sum(q.kind == 'self' for q in queries)} passages): keyword / hybrid / vector | "
        f"{cell(ours, {'self'})} | {cell(peer, {'self'})} | — |",
    ]


def _goals(ours: dict[str, list[tuple[float, bool]]], peer: dict[str, list[tuple[float, bool]]],
           queries: list[Query]) -> list[str]:
    k50, h50, v50 = (_pcts(ours, m)[0] for m in MODES)
    pk50, ph50 = _pcts(peer, "keyword")[0], _pcts(peer, "hybrid")[0]
    ident = min(_recall(ours, queries, "hybrid", {k}) for k in ("alone", "in a question"))
    selfr = _recall(ours, queries, "hybrid", {"self"})

    def met(ok: bool) -> str:
        return "met" if ok else "**not met**"

    return [
        f"- keyword p50 ≤ the peer's: {k50:.0f} vs {pk50:.0f} ms, {met(k50 <= pk50)}",
        f"- hybrid p50 ≤ 2 × our vector p50 and ≤ the peer's hybrid p50: {h50:.0f} vs {2 * v50:.0f} and "
        f"{ph50:.0f} ms, {met(h50 <= 2 * v50 and h50 <= ph50)}",
        f"- identifier recall@5 in hybrid ≥ 0.99 (both forms): {ident:.3f}, {met(ident >= 0.99)}",
        f"- self-retrieval@5 in hybrid ≥ 0.99: {selfr:.3f}, {met(selfr >= 0.99)}",
    ]


def report(files: list[str], mb: float, ours: list[Round], peer: list[Round], queries: list[Query],
           idle: Lat2,
           load: Lat2 | None) -> str:
    lines = [
        f"`python -m bench.peer` (issue 20): ours (isolated stack: real API + one worker, embedding cache off) "
        "against LlamaIndex `SimpleDirectoryReader` (+ llama-index-readers-file) → `SentenceSplitter(256, 20)` → "
        "`HuggingFaceEmbedding` (same all-MiniLM-L6-v2 files, batch 64, 2 torch threads) → "
        f"`PGVectorStore(hybrid_search=True)`, on the same {len(files)} files ({mb:.2f} MB: "
        f"{', '.join(files)}), indexed in turn A B A B ({len(ours)} pairs; medians, min–max). Search: on the last "
        f"pair's data plus {sum(q.kind == 'alone' for q in queries)} look-alike documents (bench/lookalike.py), "
        f"{len(queries)} queries per mode, top 5; ours through HTTP (query embedded by the API), the peer's "
        "`PGVectorStore.query` (keyword = `TEXT_SEARCH`, no model call; hybrid = 5 dense + 5 sparse, first 5 kept).",
        "",
        "| figure | ours | peer | ours / peer |",
        "|---|---|---|---|",
        *_indexing_rows(ours, peer, mb),
        *_search_rows(*idle, ", idle"),
    ]
    if load is not None:
        lines += _search_rows(*load, f", while that side indexes the novel ({len(load[0]['keyword'])} queries)")
    lines += [*_recall_rows(*idle, queries), "", "Goals (issue 20, items 3 and 4), idle search:", "",
              *_goals(*idle, queries)]
    return "\n".join(lines)


# ------------------------------------------------------------------ run


def input_files(smoke: bool, without: frozenset[str] = frozenset()) -> list[Path]:
    if not CORPUS_DIR.exists():
        return [ROOT / "samples" / "indexing-primer.md"]
    if smoke:
        return [CORPUS_DIR / n for n in SMOKE_FILES]
    return sorted(p for p in CORPUS_DIR.iterdir() if p.is_file() and p.name not in SKIP | without)


async def _admin(sql: str) -> None:
    from bench.stack import ADMIN_DSN

    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        await admin.execute(sql)
    finally:
        await admin.close()


async def run(size: Size, without: frozenset[str] = frozenset()) -> str:
    paths = input_files(size is SMOKE, without)
    files = [(p.name, p.read_bytes()) for p in paths]
    mb = sum(len(b) for _, b in files) / 1e6
    peer_db = f"rag_bench_peer_{os.getpid()}"
    await _admin(f'DROP DATABASE IF EXISTS "{peer_db}" WITH (FORCE)')
    await _admin(f'CREATE DATABASE "{peer_db}"')
    lookdir = Path(tempfile.mkdtemp(prefix="lookalike-"))
    looks = lookalike_docs(size.lookalikes)
    for d in looks:
        (lookdir / d.name).write_text(d.text, encoding="utf-8")
    try:
        async with Stack("peer") as stack:
            os.environ.update(stack.env)
            url, worker = await asyncio.gather(
                stack.start_api(max_in_flight_tasks_per_user="1000"),
                stack.start_worker(embedding_cache_max_rows=NO_CACHE["embedding_cache_max_rows"]))
            _, token = await stack.create_user()
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                         timeout=600) as http:
                ours: list[Round] = []
                peer: list[Round] = []
                raw = size is not SMOKE
                for r in range(size.pairs):
                    last = r == size.pairs - 1
                    ours.append(await ours_round(stack, http, worker.pid, files, f"round{r}", raw))
                    peer.append(await peer_round(peer_db, paths, f"round{r}", raw, also={
                        "lookalike": [str(lookdir / d.name) for d in looks]} if last else None))
                    print(f"pair {r + 1}: ours {ours[-1]}, peer {peer[-1]}", flush=True)
                kbs = {"self": await stack.fetchval("SELECT max(id) FROM knowledge_base"),
                       "lookalike": await stack.create_kb(http, "lookalike")}
                await stack.wait_indexed(await upload_all(http, kbs["lookalike"],
                                                          [(d.name, d.text.encode()) for d in looks]))
                await stack.fetch("ANALYZE document_chunk")
                queries = make_queries(ours[-1], peer[-1], size)
                tables = {"self": f"round{size.pairs - 1}", "lookalike": "lookalike"}
                idle = (await ours_search(http, kbs, queries), await asyncio.to_thread(peer_search, peer_db, tables,
                                                                                         queries))
                load = None
                if size.load_queries:
                    subset = random.Random(21).sample(queries, min(len(queries), size.load_queries))
                    ours_load = await ours_under_load(stack, http, kbs, subset)
                    await stack.stop(worker)
                    load = (ours_load, await asyncio.to_thread(peer_under_load, peer_db, tables, subset))
                return report([p.name for p in paths], mb, ours, peer, queries, idle, load)
    finally:
        shutil.rmtree(lookdir, ignore_errors=True)
        await _admin(f'DROP DATABASE IF EXISTS "{peer_db}" WITH (FORCE)')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="two small files, one pair, few queries, print only (CI)")
    ap.add_argument("--pairs", type=int, default=FULL.pairs)
    ap.add_argument("--without", action="append", default=[], metavar="FILE",
                    help="leave this corpus file out of the indexing rounds (e.g. the novel on a busy machine)")
    args = ap.parse_args()
    os.environ.setdefault("DO_NOT_TRACK", "1")
    size = SMOKE if args.smoke else Size(args.pairs, FULL.passages, FULL.lookalikes, FULL.load_queries)
    text = asyncio.run(run(size, frozenset(args.without)))
    print(text)
    if not args.smoke:
        from bench.report import write_section

        write_section("peer", text)


if __name__ == "__main__":
    main()
