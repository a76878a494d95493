"""Chunking throughput on hostile inputs: our linear packer vs the old semantic-text-splitter path.

``python -m bench.chunking [--smoke]`` builds (``tests.bigtext``) a 3 MB single line of words, a
3.3 MB Markdown table of 100,000 rows and a 50 MB log, takes the novel of ../shared/corpus if it is
there, and in the same run times:

- **ours**: ``Chunker.chunk`` (250 tokens, 32 overlap, 2,000 characters) on the whole input, as
  the parser hands it over (the log: one block per line, as ``parse.py`` reads a text file
  without blank lines; the others: one block);
- **old**: semantic-text-splitter 0.33 as the worker used it before
  (``TextSplitter.from_huggingface_tokenizer(capacity=250, overlap=32, trim=True)``) on the
  joined text. It is superlinear on long lines, so it runs on prefixes doubling from 50 kB
  until one takes more than ``OLD_BUDGET_S``; the table gives the largest prefix run and its
  MB/s (the full input would be slower still).

MB = 10^6 characters of input text (ASCII here, so bytes). Writes section ``chunking`` of
``bench/RESULTS.md``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.report import write_section
from task_service.pipeline.chunk import Chunker, load_minilm_tokenizer
from task_service.pipeline.document import Block, ParsedDocument
from tests.bigtext import big_line, log_text, markdown_table

NOVEL = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "book-war-and-peace-1225p.txt"
OLD_BUDGET_S = 20.0


def _inputs(smoke: bool) -> list[tuple[str, ParsedDocument]]:
    scale = 10 if smoke else 1
    log = log_text(50_000_000 // scale)
    out = [
        ("one 3 MB line of words", ParsedDocument((Block(big_line(3_000_000 // scale)),))),
        ("Markdown table, 100,000 rows", ParsedDocument((Block(markdown_table(100_000 // scale)),))),
        ("50 MB log (a block per line)", ParsedDocument(tuple(Block(line) for line in log.split("\n")))),
    ]
    if NOVEL.is_file():
        from task_service.pipeline.parse import parse_document

        out.append(("novel, 3.2 MB (parsed)", parse_document(NOVEL.read_bytes(), NOVEL.name)))
    return out


def _timed(fn: Callable[[], list[object]]) -> tuple[float, list[object]]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def _old(text: str) -> tuple[int, float]:
    """(characters of the largest prefix run, seconds it took) for semantic-text-splitter."""
    from semantic_text_splitter import TextSplitter

    splitter = TextSplitter.from_huggingface_tokenizer(load_minilm_tokenizer(), capacity=250, overlap=32, trim=True)
    size = 50_000
    while True:
        size = min(size, len(text))
        seconds, _ = _timed(lambda n=size: splitter.chunks(text[:n]))  # type: ignore[misc]
        print(f"    old, {size / 1e6:.2f} MB: {seconds:.1f} s", flush=True)
        if seconds > OLD_BUDGET_S or size == len(text):
            return size, seconds
        size *= 2


def main(argv: list[str]) -> None:
    smoke = "--smoke" in argv
    chunker = Chunker(load_minilm_tokenizer(), 250, 32, 2000)
    rows = []
    for name, doc in _inputs(smoke):
        text = doc.text
        print(f"{name}: {len(text) / 1e6:.1f} MB", flush=True)
        seconds, chunks = _timed(lambda d=doc: list(chunker.chunk(d)))  # type: ignore[misc]
        ours = len(text) / 1e6 / seconds
        biggest = max(len(c.content) for c in chunks)  # type: ignore[attr-defined]
        print(f"    ours: {seconds:.1f} s, {ours:.2f} MB/s, {len(chunks)} chunks", flush=True)
        try:
            size, old_s = _old(text)
        except ImportError as exc:  # the bench extra is not installed (make test): ours only
            rows.append(f"| {name} | {len(text) / 1e6:.1f} | {seconds:.1f} | **{ours:.2f}** | {len(chunks):,} "
                        f"| {biggest:,} | not installed ({exc.name}) | |")
            continue
        prefix = "whole" if size == len(text) else f"first {size / 1e6:.2f} MB"
        rows.append(f"| {name} | {len(text) / 1e6:.1f} | {seconds:.1f} | **{ours:.2f}** | {len(chunks):,} "
                    f"| {biggest:,} | {prefix}: {old_s:.1f} s | {size / 1e6 / old_s:.3f} |")
    table = "\n".join([
        "## Chunking throughput (`python -m bench.chunking`)",
        "",
        "Ours: `Chunker.chunk`, 250 tokens / 32 overlap / 2,000 characters, whole input, one run. Old: "
        "semantic-text-splitter 0.33 (250/32), on prefixes doubling from 50 kB until one takes "
        f"> {OLD_BUDGET_S:g} s (superlinear: the whole input is slower still). MB = 10^6 characters.",
        "",
        "| input | MB | ours s | ours MB/s | chunks | longest chunk (chars) | old: largest prefix run | old MB/s |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ])
    print(table)
    if not smoke:
        write_section("chunking", table)


if __name__ == "__main__":
    main(sys.argv[1:])
