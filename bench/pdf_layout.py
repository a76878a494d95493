"""PDF reading order: sentences intact on generated column pages, and the cost, old vs new in one run.

``python -m bench.pdf_layout [--smoke]`` measures, for the text PDFium gives in content order
(``get_text_bounded``, the reader before issue 17: "old") and for ``pdf.extract_pdf`` (character
boxes → ``pdf_layout``: "new"):

1. the share of sentences intact (their words contiguous and in order, ``tests.support.pdfgen.intact``)
   on generated 2- and 3-column Letter pages (``tests.support.pdfgen.column_page``: title, columns,
   footer) drawn column after column, row by row (columns interleaved) and right column first,
   ``SEEDS`` pages each;
2. on the corpus PDFs (``/work/shared/corpus`` or ``$CORPUS_DIR``): MB/s (median of ``RUNS``,
   file bytes), whether every word of the old text is still there (multiset recall), and the
   share of the old text's lines of 3+ words found intact in the new text (how much the order
   moved; moved is not worse, the diff is read by eye).

Writes section ``pdf_layout`` of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pypdfium2 as pdfium

from bench.report import write_section
from task_service.pipeline.readers.pdf.hyphens import load_word_list, resolve_line_hyphens
from task_service.pipeline.readers.pdf.reader import extract_pdf
from tests.support.pdfgen import column_page, intact, pdf_document, sentences

SEEDS = 10
RUNS = 5
CORPUS = ("layout-parser-paper-fast.pdf", "DA-1p.pdf", "reliance.pdf", "korean-text-with-tables.pdf")


def old_text(data: bytes) -> str:
    """The reader before issue 17: PDFium's ``get_text_bounded`` per page, line-end hyphens resolved."""
    pdf = pdfium.PdfDocument(data)
    try:
        pages = [str(page.get_textpage().get_text_bounded()) for page in pdf]
    finally:
        pdf.close()
    words = load_word_list()
    return "\n\n".join(resolve_line_hyphens(pages, words.__contains__))


def new_text(data: bytes) -> str:
    return extract_pdf(data, limits=None).text


READERS: dict[str, Callable[[bytes], str]] = {"old": old_text, "new": new_text}


def column_rows(seeds: int) -> list[str]:
    rows = []
    for columns in (2, 3):
        for order in ("columns", "rows", "reverse"):
            rates: dict[str, list[float]] = {name: [] for name in READERS}
            count = 0
            for seed in range(seeds):
                stream, placed = column_page(sentences(200, seed), columns, order, seed=seed)
                data = pdf_document([stream])
                count += len(placed)
                for name, read in READERS.items():
                    rates[name].append(intact(read(data), placed))
            old, new = (100 * statistics.mean(rates[n]) for n in READERS)
            rows.append(f"| {columns} | {order} | {seeds} | {count} | {old:.1f} % | {new:.1f} % |")
            print(rows[-1], flush=True)
    return rows


def _rate(read: Callable[[bytes], str], data: bytes, runs: int) -> float:
    rates = []
    for _ in range(runs):
        started = time.perf_counter()
        read(data)
        rates.append(len(data) / 1e6 / (time.perf_counter() - started))
    return statistics.median(rates)


def _lines_kept(old: str, new: str) -> tuple[int, int]:
    flat = " " + " ".join(new.split()) + " "
    lines = [" ".join(line.split()) for line in old.splitlines() if len(line.split()) >= 3]
    return sum(1 for line in lines if f" {line} " in flat), len(lines)


def corpus_rows(folder: Path, runs: int) -> list[str]:
    rows = []
    for name in CORPUS:
        path = folder / name
        if not path.exists():
            rows.append(f"| {name} | missing | | | |")
            continue
        data = path.read_bytes()
        old, new = old_text(data), new_text(data)
        before, after = Counter(old.split()), Counter(new.split())
        recall = sum((before & after).values()) / max(sum(before.values()), 1)
        kept, total = _lines_kept(old, new)
        speed = {n: _rate(read, data, runs) for n, read in READERS.items()}
        rows.append(f"| {name} | {len(data) / 1e3:.0f} KB | {speed['old']:.2f} | {speed['new']:.2f} "
                    f"| {100 * recall:.1f} % | {kept}/{total} |")
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str]) -> None:
    smoke = "--smoke" in argv
    folder = Path(os.environ.get("CORPUS_DIR", "/work/shared/corpus"))
    lines = [
        "## PDF reading order (`python -m bench.pdf_layout`)",
        "",
        "Old: PDFium's `get_text_bounded` (content order). New: character boxes → `pdf_layout` (direction",
        "frames, recursive XY-cut). Sentences intact = words contiguous and in order, on generated pages",
        "(title, columns of made-up sentences with blank lines, centred footer; 18 pt gutter, 10 pt Helvetica).",
        "",
        "| columns | drawn | pages | sentences | intact, old | intact, new |",
        "|---|---|---|---|---|---|",
        *column_rows(1 if smoke else SEEDS),
        "",
        "Corpus PDFs, same run: MB/s (median of 5, file bytes), old words still present in the new text",
        "(multiset), and old lines of 3+ words found intact in the new text (order moved where fewer).",
        "",
        "| file | size | MB/s old | MB/s new | old words kept | old lines intact |",
        "|---|---|---|---|---|---|",
        *corpus_rows(folder, 1 if smoke else RUNS),
    ]
    if not smoke:
        write_section("pdf_layout", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
