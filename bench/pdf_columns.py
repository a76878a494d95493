"""Column order: pdfminer.six's layout analysis against our pypdfium2 reader, in one run.

``python -m bench.pdf_columns [--smoke]`` reads the same documents with

* ``ours``: ``extract_pdf`` (PDFium character boxes → ``pdf_layout``: direction frames,
  recursive XY-cut; :func:`bench.pdf_layout.new_text`);
* ``pdfminer``: ``pdfminer.high_level.extract_text`` with its default ``LAParams`` (text boxes
  grouped, then ordered by ``boxes_flow`` 0.5);
* ``pdfminer-flow-off``: the same with ``boxes_flow=None`` (boxes in plain top-down,
  left-to-right order, pdfminer's own choice for column-less pages);

and measures (1) the share of sentences intact (words contiguous and in order:
``tests.support.pdfgen.intact``) on generated 2- and 3-column Letter pages drawn column after
column, row by row (columns interleaved) and right column first, ``SEEDS`` pages each (the same
pages as ``bench.pdf_layout``), and (2) on the corpus PDFs (``/work/shared/corpus`` or
``$CORPUS_DIR``) MB/s (median of ``RUNS``, file bytes) and the share of our words pdfminer's text
also holds (multiset recall; a low share is text pdfminer loses or splits). Smoke: one page per
layout, one run, nothing written. Writes section ``pdf_columns`` of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import io
import os
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bench.pdf_layout import CORPUS, _rate, new_text
from bench.report import write_section
from tests.support.pdfgen import column_page, intact, pdf_document, sentences

SEEDS = 10
RUNS = 5


def pdfminer_text(data: bytes, *, flow: float | None = 0.5) -> str:
    """pdfminer.six's text of ``data`` (all pages), ``LAParams(boxes_flow=flow)``."""
    from pdfminer.high_level import extract_text
    from pdfminer.layout import LAParams

    return str(extract_text(io.BytesIO(data), laparams=LAParams(boxes_flow=flow)))


READERS: dict[str, Callable[[bytes], str]] = {
    "ours": new_text,
    "pdfminer": pdfminer_text,
    "pdfminer-flow-off": lambda data: pdfminer_text(data, flow=None),
}


def column_rows(seeds: int) -> list[str]:
    """One table row per (columns, drawing order): pages, sentences, intact share per reader."""
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
            shares = " | ".join(f"{100 * statistics.mean(rates[n]):.1f} %" for n in READERS)
            rows.append(f"| {columns} | {order} | {seeds} | {count} | {shares} |")
            print(rows[-1], flush=True)
    return rows


def corpus_rows(folder: Path, runs: int) -> list[str]:
    """One table row per corpus PDF: size, MB/s per reader, our words found in pdfminer's text."""
    rows = []
    for name in CORPUS:
        path = folder / name
        if not path.exists():
            rows.append(f"| {name} | missing | | | | |")
            continue
        data = path.read_bytes()
        ours = Counter(new_text(data).split())
        theirs = Counter(pdfminer_text(data).split())
        recall = sum((ours & theirs).values()) / max(sum(ours.values()), 1)
        speed = " | ".join(f"{_rate(READERS[n], data, runs):.2f}" for n in ("ours", "pdfminer"))
        rows.append(f"| {name} | {len(data) / 1e3:.0f} KB | {speed} | {100 * recall:.1f} % |")
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str]) -> None:
    smoke = "--smoke" in argv
    try:
        import pdfminer  # noqa: F401  (a bench extra: `make install` leaves it out)
    except ImportError:
        if not smoke:
            raise SystemExit("pdfminer.six is not installed: pip install -e '.[bench]'") from None
        print("pdfminer.six not installed (bench extra): smoke skipped")
        return
    folder = Path(os.environ.get("CORPUS_DIR", "/work/shared/corpus"))
    lines = [
        "## PDF column order: pdfminer.six vs ours (`python -m bench.pdf_columns`)",
        "",
        "Sentences intact (words contiguous and in order) on the generated column pages of",
        "`bench.pdf_layout`; ours = PDFium character boxes → `pdf_layout`; pdfminer.six",
        "`extract_text` with default `LAParams` (boxes_flow 0.5) and with boxes_flow off.",
        "",
        f"| columns | drawn | pages | sentences | {' | '.join(f'intact, {n}' for n in READERS)} |",
        "|---|---|---|---|---|---|---|",
        *column_rows(1 if smoke else SEEDS),
        "",
        f"Corpus PDFs, same run: MB/s (median of {RUNS}, file bytes) and our words also in pdfminer's text "
        "(multiset).",
        "",
        "| file | size | MB/s ours | MB/s pdfminer | our words in pdfminer's |",
        "|---|---|---|---|---|",
        *corpus_rows(folder, 1 if smoke else RUNS),
    ]
    if not smoke:
        write_section("pdf_columns", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
