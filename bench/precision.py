"""Below fp32 only where quality holds (issue 30, item 3): int8 and bf16 graphs against the fused fp32 one.

``python -m bench.precision [--smoke] [--chunks N] [--passages N] [--model-dir DIR]``. Graphs:

- ``fp32``: the fused graph ``make install`` builds (``onnx_graph``);
- ``int8-dynamic``: ``onnx_graph.quantize_int8_dynamic`` of it (what ``EMBEDDING_PRECISION=int8-dynamic`` runs);
- ``int8-static``: ``onnxruntime.quantization.quantize_static`` of it (QDQ, MatMul weights int8 per channel,
  activations uint8 calibrated (MinMax) on 32 windows of the novel that are not among the measured texts);
- ``bf16``: probed, not built: ONNX Runtime's CPU execution provider has no bfloat16 MatMul, Gemm or Add
  kernel (:func:`bf16_probe` asks it), so a bf16 graph cannot run there.

Texts: chunks of the corpus files as the worker makes them (``Chunker(250, 32)``) plus windows of the novel,
``--chunks`` in all. Per graph: chunks/s (batch 64, 2 threads, spinning off; the graphs interleaved, 2 rounds,
medians); cosine of each chunk's vector to fp32's (min, 1st percentile, mean); and, through the service's own
SQL (``knowledge_service.search.retrieval.rank`` in a database of its own, migrated and dropped), with the
graph's vectors in a KB of their own: top-10 agreement with fp32 (|top 10 ∩ fp32's top 10| / 10, mean over
12-word passages of the chunks) in vector and hybrid mode; self-retrieval@5 (hybrid, vector: the passage's file
in the top 5); identifier recall@5 in hybrid over the look-alike set (bench/lookalike.py), codes alone and in a
question. Adopted as the default only if self-retrieval ≥ 0.99, identifiers 1.000, top-10 agreement ≥ 0.95.

Writes the ``precision`` section of bench/RESULTS.md (``--smoke``: a few texts, print only).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from bench.embed_threads import novel_windows
from bench.lookalike import lookalike_docs
from bench.peer import CORPUS_DIR, loadavg
from shared.adapters.postgres.reads import PgSearch

ADMIN_DSN = os.environ.get("BENCH_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
GOALS = {"self": 0.99, "identifiers": 1.0, "agreement": 0.95}


@dataclass
class Graph:
    name: str
    path: Path | None  #: None: not runnable here (``note`` says why)
    note: str = ""
    speed: list[float] = field(default_factory=list)  #: chunks/s per round
    vecs: np.ndarray | None = None
    quality: dict[str, float] = field(default_factory=dict)


def bf16_probe() -> str:
    """"" when ONNX Runtime's CPU EP runs bfloat16 MatMul, Gemm and Add; else what it says for each that fails."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    failed = []
    for op in ("MatMul", "Gemm", "Add"):
        io = [helper.make_tensor_value_info(n, TensorProto.BFLOAT16, [4, 4]) for n in ("a", "b", "c")]
        g = helper.make_graph([helper.make_node(op, ["a", "b"], ["c"])], "probe", io[:2], io[2:])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        try:
            ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's NotImplemented
            failed.append(f"{op}: {str(exc).split(':')[2].strip() if str(exc).count(':') > 2 else exc}")
    return "; ".join(failed)


def build_static(fp32: Path, out: Path, model_dir: Path, calibration: list[str]) -> None:
    """``quantize_static`` of ``fp32`` into ``out`` (QDQ, per-channel int8 MatMul weights, uint8 activations)."""
    import logging

    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from shared.adapters.embedding.onnx_runtime import MiniLMTokenizer

    tok = MiniLMTokenizer(model_dir)

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.batches = [dict(tok(calibration[i:i + 8])) for i in range(0, len(calibration), 8)]

        def get_next(self) -> dict[str, Any] | None:
            return self.batches.pop() if self.batches else None

    logging.getLogger().setLevel(logging.ERROR)
    quantize_static(str(fp32), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8, op_types_to_quantize=["MatMul"],
                    extra_options={"DefaultTensorType": 1})


def graphs(model_dir: Path, cache: Path, calibration: list[str]) -> list[Graph]:
    from shared.adapters.embedding import onnx_graph

    fp32 = onnx_graph.fused_graph(model_dir)
    dyn = model_dir / onnx_graph.graph_names("int8-dynamic")[0]
    if not onnx_graph.is_current(model_dir, "int8-dynamic"):
        dyn = cache / "int8-dynamic.onnx"
        if not dyn.exists():
            onnx_graph.quantize_int8_dynamic(fp32, dyn)
    static = cache / f"int8-static-{hashlib.sha256(''.join(calibration).encode()).hexdigest()[:12]}.onnx"
    if not static.exists():
        build_static(fp32, static, model_dir, calibration)
    bf16 = bf16_probe()
    return [Graph("fp32", fp32), Graph("int8-dynamic", dyn), Graph("int8-static", static),
            Graph("bf16", None, f"not runnable on ONNX Runtime's CPU execution provider ({bf16})" if bf16 else "")]


def corpus_texts(n: int) -> tuple[list[str], list[str]]:
    """(texts, their file names): corpus chunks as the worker makes them, then novel windows, ``n`` in all."""
    from shared.domain.errors import PermanentError
    from task_service.pipeline.chunk import Chunker, load_minilm_tokenizer
    from task_service.pipeline.parse import parse_text

    chunker = Chunker(load_minilm_tokenizer(), 250, 32)
    texts: list[str] = []
    files: list[str] = []
    paths = sorted(p for p in CORPUS_DIR.iterdir() if p.is_file() and p.stat().st_size <= 300_000
                   and p.name not in ("README.md", "SOURCES.md")) if CORPUS_DIR.exists() else []
    for p in paths:
        try:
            chunks = [c.content for c in chunker.split(parse_text(p.read_bytes(), p.name))]
        except PermanentError:
            continue
        texts += chunks[:max(1, n // 20)]
        files += [p.name] * len(chunks[:max(1, n // 20)])
    rest = max(0, n - len(texts))
    texts += novel_windows(rest + 40)[40:]  # the first 40 windows calibrate the static graph
    files += [f"novel-{i // 8}" for i in range(rest)]  # 8 consecutive windows make one "file"
    return texts[:n], files[:n]


# ------------------------------------------------------------------ embedding


def encoder(g: Graph, model_dir: Path) -> Callable[[list[str]], np.ndarray]:
    from shared.adapters.embedding.onnx_runtime import MiniLMTokenizer, OnnxEncoder

    assert g.path is not None
    tok, enc = MiniLMTokenizer(model_dir), OnnxEncoder(g.path, threads=2, spinning=False)

    def embed(texts: list[str]) -> np.ndarray:
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), 384), dtype=np.float32)
        for i in range(0, len(texts), 64):
            idx = order[i:i + 64]
            out[idx] = enc(tok([texts[j] for j in idx]))
        return out

    return embed


# ------------------------------------------------------------------ retrieval through the service's SQL


async def _kb(conn: asyncpg.Connection, user: int, name: str, docs: list[tuple[str, list[str]]],
              vecs: np.ndarray) -> tuple[int, dict[int, tuple[str, int]]]:
    """A KB of ``docs`` ([(file, chunk texts)]) with ``vecs`` (rows in order); (kb id, {chunk id: (file, index)})."""
    kb = await conn.fetchval("INSERT INTO knowledge_base (user_id, name, embedding_model, embedding_dim)"
                             " VALUES ($1, $2, 'all-MiniLM-L6-v2', 384) RETURNING id", user, name)
    where: dict[int, tuple[str, int]] = {}
    i = 0
    for fname, chunks in docs:
        d = await conn.fetchval("INSERT INTO document_info (kb_id, user_id, filename, size_bytes, sha256, object_key,"
                                " status, chunk_count) VALUES ($1, $2, $3, 1, $5, $6, 'INDEXED', $4) RETURNING id",
                                kb, user, fname, len(chunks), hashlib.sha256(f"{name}/{fname}".encode()).hexdigest(),
                                f"{name}/{fname}")
        for ci, c in enumerate(chunks):
            cid = await conn.fetchval("INSERT INTO document_chunk (document_id, chunk_index, content, token_count)"
                                      " VALUES ($1, $2, $3, 1) RETURNING id", d, ci, c)
            await conn.execute("INSERT INTO document_vector VALUES ($1, $2, $3, $4)", cid, d, kb, vecs[i])
            where[cid] = (fname, ci)
            i += 1
    return kb, where


def _group(texts: list[str], files: list[str]) -> list[tuple[str, list[str]]]:
    docs: dict[str, list[str]] = {}
    for t, f in zip(texts, files, strict=True):
        docs.setdefault(f, []).append(t)
    return list(docs.items())


async def retrieval(dsn: str, gs: list[Graph], model_dir: Path, texts: list[str], files: list[str],
                    n_passages: int, n_look: int) -> None:
    """Fill each runnable graph's ``quality`` with the retrieval figures (see the module docstring)."""
    from knowledge_service.search.retrieval import Mode, SearchParams, rank

    docs = _group(texts, files)
    ordered = [t for _, cs in docs for t in cs]  # the KB's row order
    rng = np.random.default_rng(30)
    passages = []
    for _ in range(n_passages):
        fname, chunks = docs[int(rng.integers(0, len(docs)))]
        words = chunks[int(rng.integers(0, len(chunks)))].split()
        s = int(rng.integers(0, max(1, len(words) - 12)))
        passages.append((fname, " ".join(words[s:s + 12])))
    looks = lookalike_docs(n_look)
    params = SearchParams()
    conn = await asyncpg.connect(dsn)
    await register_vector(conn)
    try:
        user = await conn.fetchval("INSERT INTO app_user (name) VALUES ('precision') RETURNING id")
        tops: dict[str, dict[str, list[list[tuple[str, int]]]]] = {}
        for g in gs:
            if g.path is None:
                continue
            embed = encoder(g, model_dir)
            row = {t: i for i, t in enumerate(texts)}
            kb, where = await _kb(conn, user, f"corpus-{g.name}", docs, g.vecs[[row[t] for t in ordered]])  # type: ignore[index]
            look_kb, _ = await _kb(conn, user, f"look-{g.name}", [(d.name, [d.text]) for d in looks],
                                   embed([d.text for d in looks]))
            await conn.execute("ANALYZE document_chunk")
            qv = embed([p for _, p in passages])
            tops[g.name] = {"vector": [], "hybrid": []}
            hits = {"vector": 0, "hybrid": 0}
            for (fname, text), q in zip(passages, qv, strict=True):
                for mode in ("vector", "hybrid"):
                    got = [where[c] for c, _, _ in await rank(PgSearch(conn), kb, Mode(mode), text, q, 10, params)]
                    tops[g.name][mode].append(got)
                    hits[mode] += fname in {f for f, _ in got[:5]}
            forms = [(d.name, text) for i, d in enumerate(looks) for text in d.queries(i).values()]
            lv = embed([t for _, t in forms])
            found = 0
            for (name, text), q in zip(forms, lv, strict=True):
                ids = [c for c, _, _ in await rank(PgSearch(conn), look_kb, Mode.HYBRID, text, q, 5, params)]
                owners = await conn.fetch("SELECT d.filename FROM document_chunk c JOIN document_info d ON"
                                          " d.id = c.document_id WHERE c.id = ANY($1::bigint[])", ids)
                found += name in {r["filename"] for r in owners}
            g.quality |= {"self hybrid": hits["hybrid"] / len(passages), "self vector": hits["vector"] / len(passages),
                          "identifiers": found / len(forms)}
            for mode in ("vector", "hybrid"):
                agree = [len(set(a) & set(b)) / max(1, min(10, len(b)))
                         for a, b in zip(tops[g.name][mode], tops["fp32"][mode], strict=True)]
                g.quality[f"agreement {mode}"] = statistics.mean(agree)
            print(f"{g.name}: {g.quality}", flush=True)
    finally:
        await conn.close()


# ------------------------------------------------------------------ run


def speed(gs: list[Graph], model_dir: Path, texts: list[str], rounds: int) -> list[float]:
    embeds = {g.name: encoder(g, model_dir) for g in gs if g.path is not None}
    la = []
    for _ in range(rounds):
        for g in gs:
            if g.path is None:
                continue
            embeds[g.name](texts[:8])
            t0 = time.perf_counter()
            embeds[g.name](texts)
            g.speed.append(len(texts) / (time.perf_counter() - t0))
        la.append(loadavg())
    return la


def passes(g: Graph) -> bool:
    q = g.quality
    return (g.path is not None and q.get("self hybrid", 0) >= GOALS["self"] and q.get("identifiers", 0) >= 1.0
            and min(q.get("agreement vector", 0), q.get("agreement hybrid", 0)) >= GOALS["agreement"])


def report(gs: list[Graph], n: int, n_speed: int, n_pass: int, n_look: int, la: list[float]) -> str:
    fp32 = statistics.median(gs[0].speed)
    lines = [
        "Below fp32 only where quality holds (issue 30, item 3): `python -m bench.precision`. Graphs of the same "
        "weights: the fused fp32 graph, its ONNX Runtime dynamic int8 quantization (`EMBEDDING_PRECISION="
        "int8-dynamic`: MatMul + Attention weights int8 per channel), static int8 (QDQ, MatMul only, activations "
        "calibrated on 32 novel windows not measured), bf16. chunks/s: our encoder (batch 64, 2 threads, "
        f"spinning off) on {n_speed} texts, graphs interleaved, median of {len(gs[0].speed)} rounds (load average "
        f"{min(la):.1f}–{max(la):.1f} after the rounds). Quality against fp32 on {n} texts (corpus chunks as the "
        f"worker makes them + novel windows): cosine per text; through the service's SQL, each graph's vectors "
        f"in a KB of their own: top-10 agreement with fp32 over {n_pass} 12-word passages, self-retrieval@5, and "
        f"identifier recall@5 (hybrid) over {n_look} look-alike documents, codes alone and in a question.",
        "",
        "| graph | chunks/s | × fp32 | cosine to fp32: min / p1 / mean | top-10 agreement: vector / hybrid | "
        "self-retrieval@5: hybrid / vector | identifiers@5, hybrid | goals met |",
        "|---|---:|---:|---|---|---|---:|---|",
    ]
    for g in gs:
        if g.path is None:
            lines.append(f"| {g.name} | — | — | — | — | — | — | {g.note or 'not measured'} |")
            continue
        sp = statistics.median(g.speed)
        cos = (g.vecs * gs[0].vecs).sum(axis=1)  # type: ignore[operator]
        q = g.quality
        lines.append(
            f"| {g.name} | {sp:.1f} | {sp / fp32:.2f} | {cos.min():.4f} / {np.percentile(cos, 1):.4f} / "
            f"{cos.mean():.5f} | {q['agreement vector']:.3f} / {q['agreement hybrid']:.3f} | {q['self hybrid']:.3f} "
            f"/ {q['self vector']:.3f} | {q['identifiers']:.3f} | {'yes' if passes(g) else '**no**'} |")
    adopt = [g.name for g in gs[1:] if passes(g)]
    lines += ["", f"Goals to become the default (self-retrieval ≥ {GOALS['self']}, identifiers 1.000, top-10 "
              f"agreement ≥ {GOALS['agreement']}): met by {', '.join(adopt) if adopt else 'none below fp32'}."]
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> str:
    from shared.adapters.embedding.models import minilm_model_dir
    from shared.adapters.postgres.migrate import migrate

    model_dir = args.model_dir or minilm_model_dir()
    n, n_pass, n_look, rounds = (24, 6, 4, 1) if args.smoke else (args.chunks, args.passages, args.lookalikes, 2)
    texts, files = corpus_texts(n)
    cache = Path(tempfile.gettempdir()) / "rag-bench-precision"
    cache.mkdir(exist_ok=True)
    gs = graphs(model_dir, cache, novel_windows(40)[:32])
    for g in gs:
        if g.path is not None:
            g.vecs = encoder(g, model_dir)(texts)
    n_speed = min(len(texts), 16 if args.smoke else 128)
    la = speed(gs, model_dir, texts[-n_speed:], rounds)
    db = f"rag_bench_precision_{os.getpid()}"
    dsn = ADMIN_DSN.rsplit("/", 1)[0] + f"/{db}"
    await migrate(dsn)
    try:
        await retrieval(dsn, gs, model_dir, texts, files, n_pass, n_look)
    finally:
        admin = await asyncpg.connect(ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        finally:
            await admin.close()
    return report(gs, len(texts), n_speed, n_pass, n_look, la)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--chunks", type=int, default=600)
    ap.add_argument("--passages", type=int, default=200)
    ap.add_argument("--lookalikes", type=int, default=120)
    ap.add_argument("--model-dir", type=Path, default=None, help="the model folder (default: the installed one)")
    args = ap.parse_args()
    text = asyncio.run(run(args))
    print(text)
    if not args.smoke:
        from bench.report import write_section

        write_section("precision", text)


if __name__ == "__main__":
    sys.exit(main())
