"""Pipeline benchmark: where a worker's time goes, measured in one run, printed as ratios.

``python -m bench.pipeline [--smoke] [FILE]`` (default: the 3.2 MB novel of ../shared/corpus,
else the bundled sample; ``--smoke``: the bundled sample, one model load) runs parse → chunk →
embed in-process, exactly as the worker does, and prints
seconds per stage, chunks/s and each stage's share. It also measures, in the same run, our
plain-text path against unstructured's ``partition_text`` on the same 200 kB prefix (the
reason plain text bypasses it), and embedding throughput at two batch sizes.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOVEL = ROOT.parent / "shared" / "corpus" / "book-war-and-peace-1225p.txt"


def _t(fn, *a):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn(*a)
    return out, time.perf_counter() - t0


def main() -> None:
    os.environ.setdefault("DO_NOT_TRACK", "1")
    from shared.adapters.embedding import build_embedder
    from task_service.pipeline.chunk import Chunker, load_minilm_tokenizer
    from task_service.pipeline.parse import ensure_parsers_ready, parse_text

    smoke = "--smoke" in sys.argv
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    default = NOVEL if NOVEL.exists() and not smoke else ROOT / "samples" / "indexing-primer.md"
    path = Path(args[0]) if args else default
    data = path.read_bytes()
    print(f"file: {path.name}, {len(data) / 1e6:.2f} MB")
    ensure_parsers_ready()
    text, t_parse = _t(parse_text, data, path.name)
    chunker = Chunker(load_minilm_tokenizer(), 250, 32)
    chunks, t_chunk = _t(chunker.split, text)
    embedder, t_load = _t(build_embedder, "sentence-transformers")
    texts = [c.content for c in chunks]
    t0 = time.perf_counter()
    asyncio.run(embedder.embed(texts))
    t_embed = time.perf_counter() - t0
    total = t_parse + t_chunk + t_embed
    tokens = sum(c.token_count for c in chunks)
    print(f"chunks: {len(chunks)}, tokens: {tokens}, mean {tokens / max(1, len(chunks)):.0f} tokens/chunk")
    for name, t in (("parse", t_parse), ("chunk", t_chunk), ("embed", t_embed)):
        print(f"  {name:<6} {t:8.2f} s  {100 * t / total:5.1f} %")
    print(f"  total  {total:8.2f} s  → {len(chunks) / total:.1f} chunks/s end to end "
          f"({len(chunks) / t_embed:.1f} chunks/s embedding alone); model load {t_load:.1f} s (once per worker)")

    if path.suffix == ".txt" and not smoke:
        from unstructured.partition.text import partition_text

        prefix = data[:200_000]
        _, ours = _t(parse_text, prefix, "prefix.txt")
        _, theirs = _t(lambda: partition_text(text=prefix.decode("utf-8", "replace")))
        print(f"plain text, 200 kB: ours {ours:.3f} s vs unstructured partition_text {theirs:.2f} s "
              f"→ {theirs / ours:.0f}× faster")

    sample = texts[:256]
    for bs in () if smoke else (16, 64):
        e = build_embedder("sentence-transformers", batch_size=bs)
        t0 = time.perf_counter()
        asyncio.run(e.embed(sample))
        dt = time.perf_counter() - t0
        print(f"embedding batch {bs:>3}: {len(sample) / dt:.1f} chunks/s")


if __name__ == "__main__":
    main()
