"""Ours against the peers users would pick instead (issues 20, 30): one table per machine state, one run.

``python -m bench.peer [--smoke] [--pairs N] [--load N]``. The peers (:mod:`bench.peer_side`): LlamaIndex
``SimpleDirectoryReader`` → ``SentenceSplitter(256, 20)`` → an embedding of the same all-MiniLM-L6-v2 files
(batch 64, 2 threads) → ``PGVectorStore(hybrid_search=True)``, in a database of their own
(``rag_bench_peer_<pid>``), two columns (:data:`PEERS`): ``HuggingFaceEmbedding`` (torch) and
``FastEmbedEmbedding`` (ONNX Runtime, on an ONNX export of the files made at install,
:mod:`bench.fastembed_model`, run in its own venv). Ours: the isolated stack of :mod:`bench.stack`
(the real API and one worker, embedding cache off). Same files (the shared corpus but the files
neither side indexes, empty, whitespace-only, encrypted, and the two the peer's run stops on:
:data:`SKIP`), indexed in turn, ours then each peer, ``--pairs`` rounds; with ``--load N`` every round is
run again beside N busy processes (:class:`CpuLoad`), interleaved (quiet, loaded, quiet, ...), and so is
the idle search:

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

from bench.flops import cpu_ghz, flops_per_chunk, fraction_of_peak, peak_flops
from bench.lookalike import lookalike_docs
from bench.stack import (
    CORPUS,
    NO_CACHE,
    NOVEL,
    ROOT,
    Proc,
    Stack,
    children,
    indexing_span,
    percentile,
    rss_kib,
    upload_all,
)
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
RAW_SAMPLE = [768]  #: texts each side's raw speed is timed on (``--raw-sample``)


@dataclass(frozen=True)
class PeerSide:
    """One peer column: LlamaIndex with one embedding, run by ``python`` (its own venv for FastEmbed)."""

    key: str  #: table prefix and JSON key
    label: str  #: column heading
    python: str  #: the interpreter its jobs run in
    spec: dict[str, Any] = field(default_factory=dict)  #: job spec keys naming the embedding


#: FastEmbed's venv and model folder (``make peer-fastembed``); ``BENCH_FASTEMBED_VENV`` overrides.
FASTEMBED_VENV = Path(os.environ.get("BENCH_FASTEMBED_VENV", str(ROOT / ".venv-fastembed")))
PEERS = (
    PeerSide("hf", "HF (torch)", sys.executable),
    PeerSide("fe", "FE (ONNX Runtime)", str(FASTEMBED_VENV / "bin" / "python"),
             {"embed": "fastembed", "model_path": str(FASTEMBED_VENV / "minilm")}),
)


class CpuLoad:
    """``n`` busy processes (a pure-Python spin loop each, default priority) for the ``with`` block: a fixed
    CPU load beside both sides, as a shared CI host or cluster node has (issue 30, item 2). ``n`` = 0: none."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> CpuLoad:
        self._procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.n)]
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self._procs:
            p.kill()
            p.wait(10)
        self._procs = []


def loadavg() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


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


def peer_job(spec: dict[str, Any], python: str = sys.executable) -> dict[str, Any]:
    """Run one :mod:`bench.peer_side` job in a fresh ``python`` process; its JSON result."""
    path, out = _spec_file(spec)
    try:
        p = subprocess.run([python, "-m", "bench.peer_side", str(path)], cwd=ROOT, capture_output=True,
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
    enc = (await asyncio.to_thread(peer_job, {"job": "encode", "texts": texts, "runtime": OUR_RUNTIME,
                                              "raw_sample": RAW_SAMPLE[0]}) if raw else NO_RAW)
    return Round(span, chunks, tree.cpu_s, tree.peak_kib, float(enc["raw_s"]), float(enc["mean_tokens"]), texts,
                 [r["filename"] for r in rows], float(enc.get("onnx_s", float("nan"))))


async def peer_round(side: PeerSide, database: str, paths: list[Path], table: str, raw: bool = True,
                     also: dict[str, list[str]] | None = None) -> Round:
    """One timed indexing by ``side`` into ``table``; ``also``: more tables indexed afterwards, untimed."""
    got = await asyncio.to_thread(peer_job, {**side.spec, "job": "index", "database": database, "table": table,
                                              "files": [str(p) for p in paths], "raw": raw, "also": also or {},
                                              "raw_sample": RAW_SAMPLE[0]},
                                  side.python)
    got = {**NO_RAW, **got}
    return Round(float(got["seconds"]), int(got["chunks"]), float(got["cpu_s"]), int(got["peak_kib"]),
                 float(got["raw_s"]), float(got["mean_tokens"]), got["texts"], got["files"])


# ------------------------------------------------------------------ queries


@dataclass(frozen=True)
class Query:
    kind: str  #: "self", "alone", "in a question"
    text: str
    expect: str  #: the file name a hit holds


def make_queries(sides: list[Round], size: Size) -> list[Query]:
    """Self-retrieval passages (12 consecutive words of a chunk, an equal share from each side's chunks) and
    look-alike codes."""
    rng = random.Random(20)
    out: list[Query] = []
    for side in sides:
        pool = [(t.split(), f) for t, f in zip(side.texts, side.files, strict=True) if len(t.split()) >= 12]
        for words, f in rng.sample(pool, min(len(pool), size.passages // len(sides))):
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


def peer_search(side: PeerSide, database: str, tables: dict[str, str], queries: list[Query]
                ) -> dict[str, list[tuple[float, bool]]]:
    spec = {**side.spec, "job": "search", "database": database, "top_k": TOP_K,
            "queries": [{"mode": m, "text": q.text, "table": tables["self" if q.kind == "self" else "lookalike"]}
                        for m in MODES for q in queries]}
    got = peer_job(spec, side.python)["results"]
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


def peer_under_load(side: PeerSide, database: str, tables: dict[str, str], queries: list[Query]
                    ) -> dict[str, list[tuple[float, bool]]]:
    """The peer's search while a peer process indexes the novel into a scratch table."""
    ready = Path(tempfile.mkdtemp(prefix="peer-load-")) / "ready"
    path, out = _spec_file({**side.spec, "job": "index", "database": database, "table": f"{side.key}_load",
                            "files": [str(NOVEL_FILE)], "raw": False, "ready": str(ready)})
    load = subprocess.Popen([side.python, "-m", "bench.peer_side", str(path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    try:
        deadline = time.monotonic() + 600
        while not ready.exists():
            if load.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the peer's load process did not start")
            time.sleep(0.2)
        time.sleep(10)  # reading and splitting the novel (~3 s); then it embeds for minutes
        return peer_search(side, database, tables, queries)
    finally:
        load.terminate()
        load.wait(30)
        path.unlink(missing_ok=True)
        out.unlink(missing_ok=True)


# ------------------------------------------------------------------ report

Lat = dict[str, list[tuple[float, bool]]]  # mode -> (ms, hit) per query


@dataclass
class Condition:
    """One machine state of the run: quiet, or beside ``load`` busy processes; every side's rounds and searches."""

    load: int
    rounds: dict[str, list[Round]] = field(default_factory=dict)  #: "ours" and each PeerSide.key
    idle: dict[str, Lat] = field(default_factory=dict)  #: search with nothing indexing (beside the load, if any)
    indexing: dict[str, Lat] | None = None  #: search while that side indexes the novel (quiet only)
    loadavg: list[float] = field(default_factory=list)  #: 1-minute load average after each round

    @property
    def title(self) -> str:
        la = (f"load average {min(self.loadavg):.1f}–{max(self.loadavg):.1f} after the rounds"
              if self.loadavg else "")
        what = "quiet (no load added)" if self.load == 0 else f"beside a fixed CPU load of {self.load} busy processes"
        return f"{what}; {la}" if la else what


def _med(values: list[float], fmt: str = "{:.3f}") -> str:
    s = fmt.format(statistics.median(values))
    return s if len(values) == 1 else f"{s} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def _pcts(lat: Lat, mode: str) -> tuple[float, float]:
    ms = [m for m, _ in lat[mode]]
    return percentile(ms, 0.5), percentile(ms, 0.99)


def _recall(lat: Lat, queries: list[Query], mode: str, kinds: set[str]) -> float:
    got = [hit for (_, hit), q in zip(lat[mode], queries, strict=True) if q.kind in kinds]
    return sum(got) / max(1, len(got))


def _keys() -> list[str]:
    return ["ours", *(p.key for p in PEERS)]


def _indexing_rows(c: Condition, mb: float) -> list[str]:
    def row(name: str, f: Any, fmt: str = "{:.3f}", ratio: bool = True) -> str:
        vals = {k: [float(f(r)) for r in c.rounds[k]] for k in _keys()}
        cells = [_med(vals[k], fmt) for k in _keys()]
        ratios = [_med([x / y for x, y in zip(vals["ours"], vals[p.key], strict=True)], "{:.2f}") if ratio else "—"
                  for p in PEERS]
        return f"| {name} | {' | '.join(cells)} | {' | '.join(ratios)} |"

    last = {k: c.rounds[k][-1] for k in _keys()}
    gflop = flops_per_chunk(last["ours"].mean_tokens) / 1e9
    return [
        row("end-to-end input MB/s", lambda r: mb / r.seconds, "{:.4f}"),
        row(f"end-to-end chunks/s ({' vs '.join(f'{r.chunks:,}' for r in last.values())} chunks, "
            f"{' vs '.join(f'{r.mean_tokens:.0f}' for r in last.values())} MiniLM tokens on average)",
            lambda r: r.chunks / r.seconds, "{:.1f}"),
        row("end-to-end / raw speed of that side's runtime on its chunks, same round (ours: ONNX Runtime; "
            "HuggingFace: torch `encode()`; FastEmbed: `TextEmbedding.embed`)", lambda r: r.runtime_raw_s / r.seconds,
            "{:.2f}", ratio=False),
        row("raw speed of that side's runtime, chunks/s", lambda r: r.chunks / r.runtime_raw_s, "{:.1f}"),
        row(f"the model's arithmetic at that raw speed, fraction of the CPU's fp32 peak ({peak_flops() / 1e9:.0f} "
            f"GFLOP/s: {os.cpu_count()} cores × {cpu_ghz():.1f} GHz × 64; {gflop:.2f} GFLOP per chunk, bench/flops.py)",
            lambda r: fraction_of_peak(r.chunks / r.runtime_raw_s, r.mean_tokens), "{:.2f}"),
        row("CPU-seconds per input MB (own processes)", lambda r: r.cpu_s / mb, "{:.1f}"),
        row("peak RSS while indexing, MB (ours: worker + sandbox child)", lambda r: r.peak_kib / 1024, "{:.0f}"),
    ]


def _search_rows(lats: dict[str, Lat], label: str) -> list[str]:
    rows = []
    for mode in MODES:
        pc = {k: _pcts(lats[k], mode) for k in _keys()}
        cells = " | ".join(f"{a:.0f} / {b:.0f}" for a, b in pc.values())
        ratios = " | ".join(f"{pc['ours'][0] / pc[p.key][0]:.2f}" for p in PEERS)
        rows.append(f"| search p50 / p99 ms, {mode}{label} | {cells} | {ratios} |")
    return rows


def _recall_rows(lats: dict[str, Lat], queries: list[Query]) -> list[str]:
    def cell(lat: Lat, kinds: set[str]) -> str:
        return " / ".join(f"{_recall(lat, queries, m, kinds):.3f}" for m in MODES)

    def row(name: str, kinds: set[str]) -> str:
        return f"| {name}: keyword / hybrid / vector | {' | '.join(cell(lats[k], kinds) for k in _keys())} |" + (
            " — |" * len(PEERS))

    n = sum(q.kind == "alone" for q in queries)
    return [row(f"identifier recall@5, code alone ({n} look-alikes)", {"alone"}),
            row("identifier recall@5, code in a question", {"in a question"}),
            row(f"self-retrieval recall@5 ({sum(q.kind == 'self' for q in queries)} passages)", {"self"})]


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _goals(c: Condition, mb: float) -> list[str]:
    """Issue 30's goals for one condition, against each peer."""
    ours = c.rounds["ours"]
    mbs = statistics.median(mb / r.seconds for r in ours)
    e2e = statistics.median(r.runtime_raw_s / r.seconds for r in ours)
    peak = max(r.peak_kib for r in ours)
    out = [f"- end-to-end / raw of our runtime ≥ 0.9: {e2e:.2f}, {_met(e2e >= 0.9)}"]
    for p in PEERS:
        ratio = statistics.median(x / y for x, y in zip(
            (mb / r.seconds for r in ours), (mb / r.seconds for r in c.rounds[p.key]), strict=True))
        theirs_peak = min(r.peak_kib for r in c.rounds[p.key])
        out.append(f"- ours / {p.label} MB/s ≥ 1.3: {ratio:.2f} ({mbs:.4f} MB/s), {_met(ratio >= 1.3)}; peak RSS ≤ "
                   f"its: {peak / 1024:.0f} vs {theirs_peak / 1024:.0f} MB, {_met(peak <= theirs_peak)}")
        for mode in ("keyword", "hybrid"):
            (o50, o99), (p50, p99) = _pcts(c.idle["ours"], mode), _pcts(c.idle[p.key], mode)
            out.append(f"  - {mode} p50 ≤ 2 × its and p99 ≤ its: {o50:.0f} vs {p50:.0f}, {o99:.0f} vs {p99:.0f} ms, "
                       f"{_met(o50 <= 2 * p50 and o99 <= p99)}")
    return out


def report(files: list[str], mb: float, conditions: list[Condition], queries: list[Query]) -> str:
    pairs = len(conditions[0].rounds["ours"])
    head = " | ".join(["ours", *(p.label for p in PEERS), *(f"ours / {p.key.upper()}" for p in PEERS)])
    lines = [
        "`python -m bench.peer` (issues 20, 30): ours (isolated stack: real API + one worker, embedding cache off) "
        "against LlamaIndex `SimpleDirectoryReader` (+ llama-index-readers-file) → `SentenceSplitter(256, 20)` → "
        "an embedding (batch 64, 2 threads) → `PGVectorStore(hybrid_search=True)`, two peer columns: HF = "
        "`HuggingFaceEmbedding` (torch, the same all-MiniLM-L6-v2 files) and FE = `FastEmbedEmbedding` (ONNX "
        "Runtime; an unfused ONNX export of the same files made at install, bench/fastembed_model.py, as FastEmbed's "
        f"own download is). Same {len(files)} files ({mb:.2f} MB: {', '.join(files)}), indexed in turn ours, HF, FE "
        f"({pairs} rounds per condition; medians, min–max; each condition's rounds interleaved with the other's). "
        f"Search: on the last round's data plus {sum(q.kind == 'alone' for q in queries)} look-alike documents "
        f"(bench/lookalike.py), {len(queries)} queries per mode, top 5; ours through HTTP (query embedded by the "
        "API), the peers' `PGVectorStore.query` (keyword = `TEXT_SEARCH`, no model call; hybrid = 5 dense + "
        "5 sparse, first 5 kept).",
    ]
    for c in conditions:
        lines += ["", f"**{c.title}**", "", f"| figure | {head} |", "|---" * (2 + 2 * len(PEERS)) + "|",
                  *_indexing_rows(c, mb), *_search_rows(c.idle, ", nothing indexing")]
        if c.indexing is not None:
            n = len(c.indexing["ours"]["keyword"])
            lines += _search_rows(c.indexing, f", while that side indexes the novel ({n} queries)")
        lines += [*_recall_rows(c.idle, queries), "", "Goals (issue 30):", "", *_goals(c, mb)]
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


@dataclass(frozen=True)
class Run:
    """What the rounds of one run share."""

    stack: Stack
    http: httpx.AsyncClient
    worker: Proc
    paths: list[Path]
    files: list[tuple[str, bytes]]
    peer_db: str
    lookalikes: list[str]  #: the look-alike set's file paths (the peers index them once, untimed)


async def index_rounds(run: Run, conditions: list[Condition], size: Size) -> None:
    """``size.pairs`` rounds per condition, interleaved (quiet, loaded, quiet, ...), each side in turn."""
    raw = size is not SMOKE
    for r in range(size.pairs):
        for c in conditions:
            tag = f"c{c.load}r{r}"
            once = r == size.pairs - 1 and c is conditions[0]
            with CpuLoad(c.load):
                c.rounds.setdefault("ours", []).append(
                    await ours_round(run.stack, run.http, run.worker.pid, run.files, tag, raw))
                for p in PEERS:
                    also = {f"{p.key}_lookalike": run.lookalikes} if once else None
                    c.rounds.setdefault(p.key, []).append(
                        await peer_round(p, run.peer_db, run.paths, f"{p.key}_{tag}", raw, also))
            c.loadavg.append(loadavg())
            print(f"round {r + 1}, load {c.load} (load average {c.loadavg[-1]:.1f}): "
                  + ", ".join(f"{k} {rs[-1].seconds:.1f} s" for k, rs in c.rounds.items()), flush=True)


async def searches(run: Run, conditions: list[Condition], size: Size, kbs: dict[str, int]) -> list[Query]:
    """Every side's search on the first condition's last round, in each condition; then (full run) while
    each side indexes the novel, quiet."""
    tag = f"c{conditions[0].load}r{size.pairs - 1}"
    tables = {p.key: {"self": f"{p.key}_{tag}", "lookalike": f"{p.key}_lookalike"} for p in PEERS}
    queries = make_queries([conditions[0].rounds[k][-1] for k in _keys()], size)
    for c in conditions:
        with CpuLoad(c.load):
            c.idle["ours"] = await ours_search(run.http, kbs, queries)
            for p in PEERS:
                c.idle[p.key] = await asyncio.to_thread(peer_search, p, run.peer_db, tables[p.key], queries)
    if size.load_queries:
        subset = random.Random(21).sample(queries, min(len(queries), size.load_queries))
        first = conditions[0]
        first.indexing = {"ours": await ours_under_load(run.stack, run.http, kbs, subset)}
        await run.stack.stop(run.worker)
        for p in PEERS:
            first.indexing[p.key] = await asyncio.to_thread(peer_under_load, p, run.peer_db, tables[p.key], subset)
    return queries


async def run(size: Size, load: int, without: frozenset[str] = frozenset()) -> str:
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
    conditions = [Condition(0)] + ([Condition(load)] if load else [])
    try:
        async with Stack("peer") as stack:
            os.environ.update(stack.env)
            url, worker = await asyncio.gather(
                stack.start_api(max_in_flight_tasks_per_user="1000"),
                stack.start_worker(embedding_cache_max_rows=NO_CACHE["embedding_cache_max_rows"]))
            _, token = await stack.create_user()
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                         timeout=600) as http:
                r = Run(stack, http, worker, paths, files, peer_db, [str(lookdir / d.name) for d in looks])
                await index_rounds(r, conditions, size)
                kbs = {"self": await stack.fetchval("SELECT id FROM knowledge_base WHERE name = $1",
                                                    f"c0r{size.pairs - 1}"),
                       "lookalike": await stack.create_kb(http, "lookalike")}
                await stack.wait_indexed(await upload_all(http, kbs["lookalike"],
                                                          [(d.name, d.text.encode()) for d in looks]))
                await stack.fetch("ANALYZE document_chunk")
                queries = await searches(r, conditions, size, kbs)
                return report([p.name for p in paths], mb, conditions, queries)
    finally:
        shutil.rmtree(lookdir, ignore_errors=True)
        await _admin(f'DROP DATABASE IF EXISTS "{peer_db}" WITH (FORCE)')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="two small files, one pair, few queries, print only (CI)")
    ap.add_argument("--pairs", type=int, default=FULL.pairs, help="rounds per condition")
    ap.add_argument("--load", type=int, default=0, metavar="N",
                    help="also run every round and search beside N busy processes (interleaved with the quiet ones)")
    ap.add_argument("--passages", type=int, default=FULL.passages, help="self-retrieval queries")
    ap.add_argument("--lookalikes", type=int, default=FULL.lookalikes)
    ap.add_argument("--indexing-queries", type=int, default=FULL.load_queries,
                    help="queries per mode while each side indexes the novel (0: no such phase)")
    ap.add_argument("--raw-sample", type=int, default=RAW_SAMPLE[0], help="texts the raw speeds are timed on")
    ap.add_argument("--without", action="append", default=[], metavar="FILE",
                    help="leave this corpus file out of the indexing rounds (e.g. the novel on a busy machine)")
    args = ap.parse_args()
    os.environ.setdefault("DO_NOT_TRACK", "1")
    size = SMOKE if args.smoke else Size(args.pairs, args.passages, args.lookalikes, args.indexing_queries)
    RAW_SAMPLE[0] = args.raw_sample
    text = asyncio.run(run(size, args.load, frozenset(args.without)))
    print(text)
    if not args.smoke:
        from bench.report import write_section

        write_section("peer", text)


if __name__ == "__main__":
    main()
