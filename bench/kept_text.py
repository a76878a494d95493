"""Markup, code, configuration and log readers (issue 29): markers, sections and MB/s against plain text.

``python -m bench.kept_text [--mb N] [--runs N] [--no-write]``. For each text kind of
``tests/fidelity/kept_corpus.py``: the sample's markers and expected sections through the dispatch
(``parse_document``), then the sample repeated to about ``--mb`` MB and parsed by its reader and,
the same bytes named ``.txt``, by the plain-text reader (the alternative: read them as text), median
of ``--runs``, in this process. Writes the "kept-text" section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from bench.report import write_section

TEXT_KINDS = ("rst", "org", "adoc", "tex", "yaml", "toml", "ini", "log", "python", "go", "javascript",
              "typescript", "java", "c", "cpp", "rust", "ruby", "shell", "sql")


def _seconds(data: bytes, name: str, runs: int) -> float:
    from task_service.pipeline.parse import parse_document

    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        parse_document(data, name)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def row(kind: str, mb: float, runs: int) -> str:
    from shared.domain.formats import by_kind
    from task_service.pipeline.parse import parse_document
    from tests.fidelity import kept_corpus

    (sample,) = kept_corpus.samples(kind)
    parsed = parse_document(sample.data, sample.filename)
    found = sum(m in parsed.text for m in sample.must)
    sections = sum(any(m in b.text and b.section == s for b in parsed.blocks) for m, s in sample.sections.items())
    big = sample.data * max(1, int(mb * 1e6 / len(sample.data)))
    ours = _seconds(big, sample.filename, runs)
    plain = _seconds(big, "same.txt", runs)
    reader = by_kind(kind).reader.rsplit(".", 1)[-1]
    return (f"| {kind} | `{reader}` | {found}/{len(sample.must)} | {sections}/{len(sample.sections)} | "
            f"{len(big) / 1e6 / ours:,.1f} | {len(big) / 1e6 / plain:,.1f} |")


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    lines = []
    for kind in TEXT_KINDS:
        lines.append(row(kind, a.mb, a.runs))
        print(lines[-1], flush=True)
    md = ("## Markup, code, configuration and logs (`python -m bench.kept_text`)\n\n"
          f"Each kind's generated sample (`tests/fidelity/kept_corpus.py`) through the dispatch, then repeated to "
          f"~{a.mb:g} MB: its reader vs the plain-text reader on the same bytes (median of {a.runs}, one process, "
          "parse only: decode, blocks, normalization).\n\n"
          "| kind | reader | markers | sections | MB/s | plain text MB/s |\n|---|---|---:|---:|---:|---:|\n"
          + "\n".join(lines) + "\n")
    print(md)
    if not a.no_write:
        write_section("kept-text", md)


if __name__ == "__main__":
    main(sys.argv[1:])
