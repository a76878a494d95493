"""Chunking throughput on hostile inputs: our linear packer vs the old semantic-text-splitter path.

``python -m bench.chunking [--smoke]`` builds (``tests.support.bigtext``) a 3 MB single line of words, a
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

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.report import write_section
from task_service.pipeline.chunk import Chunker, load_minilm_tokenizer
from task_service.pipeline.document import Block, ParsedDocument
from tests.support.bigtext import big_line, log_text, markdown_table

NOVEL = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "book-war-and-peace-1225p.txt"
OLD_BUDGET_S = 20.0
RUNS = 5  # timed runs of ours per input (the old splitter runs once: it takes > OLD_BUDGET_S)


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


def _spread(values: list[float], fmt: str) -> str:
    """``median (min–max)`` of ``values``."""
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"


def main(argv: list[str]) -> None:
    smoke = "--smoke" in argv
    runs = 1 if smoke else RUNS
    chunker = Chunker(load_minilm_tokenizer(), 250, 32, 2000)
    rows = []
    for name, doc in _inputs(smoke):
        text = doc.text
        mb = len(text) / 1e6
        print(f"{name}: {mb:.1f} MB", flush=True)
        timings = []
        for _ in range(runs):
            seconds, chunks = _timed(lambda d=doc: list(chunker.chunk(d)))  # type: ignore[misc]
            timings.append(seconds)
        rates = [mb / t for t in timings]
        biggest = max(len(c.content) for c in chunks)  # type: ignore[attr-defined]
        print(f"    ours: {_spread(timings, '.1f')} s, {_spread(rates, '.2f')} MB/s, {len(chunks)} chunks", flush=True)
        ours = (f"| {name} | {mb:.1f} | {_spread(timings, '.1f')} | **{_spread(rates, '.2f')}** | {len(chunks):,} "
                f"| {biggest:,}")
        try:
            size, old_s = _old(text)
        except ImportError as exc:  # the bench extra is not installed (make test): ours only
            rows.append(f"{ours} | not installed ({exc.name}) | | |")
            continue
        prefix = "whole" if size == len(text) else f"first {size / 1e6:.2f} MB"
        old_rate = size / 1e6 / old_s
        rows.append(f"{ours} | {prefix}: {old_s:.1f} s | {old_rate:.3f} | {statistics.median(rates) / old_rate:.0f}× |")
    table = "\n".join([
        "## Chunking throughput (`python -m bench.chunking`)",
        "",
        f"Ours: `Chunker.chunk`, 250 tokens / 32 overlap / 2,000 characters, whole input, median over {runs} "
        "run(s) (min–max). Old (the baseline, same process, same run): semantic-text-splitter 0.33 "
        f"(250/32), once on each prefix doubling from 50 kB until one takes > {OLD_BUDGET_S:g} s "
        "(superlinear: the whole input is slower still). MB = 10^6 characters. Ratio = ours median MB/s / "
        "old MB/s.",
        "",
        "| input | MB | ours s | ours MB/s | chunks | longest chunk (chars) | old: largest prefix run | old MB/s "
        "| ratio |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
    ])
    print(table)
    if not smoke:
        write_section("chunking", table)


if __name__ == "__main__":
    main(sys.argv[1:])
