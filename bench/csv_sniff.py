"""CSV delimiter and header row: ``csv.Sniffer`` against our rules, on short samples, in one run.

``python -m bench.csv_sniff [--smoke]`` generates ``CASES`` small tables (seeded) per row count in
``ROW_COUNTS``: 2-5 columns mixing names, free text with spaces and commas, quoted fields holding
the delimiter, integers, decimals with a decimal comma (semicolon files), dates and booleans;
delimiter one of tab, semicolon, comma, pipe; a header row or none (a table of text columns gets
a header more often, as exports do). For each it asks

* the delimiter: ours (``readers.plain.csv.sniff_delimiter``) against ``csv.Sniffer().sniff`` restricted
  to the same four delimiters, and unrestricted (the stdlib's default use);
* the header row: ours (``readers._shared.tables.find_header`` on the rows typed by ``readers.plain.csv.classify``,
  header = row 0) against ``csv.Sniffer().has_header``; a Sniffer that raises counts as wrong
  (``csv.Error``: "Could not determine delimiter").

Reports the share right per row count and the median time per call (µs). Smoke: 20 cases per row
count, nothing written. Writes section ``csv_sniff`` of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import csv
import io
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.report import write_section
from task_service.pipeline.readers._shared.tables import Cell, find_header
from task_service.pipeline.readers.plain.csv import classify, sniff_delimiter

ROW_COUNTS = (1, 2, 3, 5, 10, 50)
CASES = 300
DELIMITERS = ("\t", ";", ",", "|")
WORDS = ("alpha beta gamma delta harbour ferry north south amber river stone field lamp orchard copper "
         "meadow signal winter").split()
NAMES = ("id name city note amount price date active count code title owner status region total "
         "weight").split()


@dataclass(frozen=True)
class Case:
    text: str
    delimiter: str
    header: bool


def _value(kind: str, rng: random.Random, delimiter: str) -> str:
    if kind == "int":
        return str(rng.randint(0, 99_999))
    if kind == "decimal":
        whole, frac = rng.randint(0, 9_999), rng.randint(0, 99)
        return f"{whole},{frac:02d}" if delimiter == ";" else f"{whole}.{frac:02d}"
    if kind == "date":
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == "bool":
        return rng.choice(("true", "false"))
    if kind == "word":
        return rng.choice(WORDS).capitalize()
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6)))
    if rng.random() < 0.3:
        text = text.replace(" ", ", ", 1)
    if rng.random() < 0.2:
        text += f" {delimiter} more"  # the delimiter inside a field: quoted below
    return text


def _field(value: str, delimiter: str) -> str:
    return f'"{value}"' if delimiter in value or "," in value or '"' in value else value


def make_case(rng: random.Random, rows: int) -> Case:
    """One generated table of ``rows`` data rows (plus a header row when ``Case.header``)."""
    delimiter = rng.choice(DELIMITERS)
    kinds = [rng.choice(("int", "decimal", "date", "bool", "word", "text", "text")) for _ in range(rng.randint(2, 5))]
    all_text = all(k in ("word", "text") for k in kinds)
    header = rng.random() < (0.8 if all_text else 0.5)
    lines = []
    if header:
        lines.append(delimiter.join(rng.sample(NAMES, len(kinds))))
    for _ in range(rows):
        lines.append(delimiter.join(_field(_value(k, rng, delimiter), delimiter) for k in kinds))
    return Case("\n".join(lines) + "\n", delimiter, header)


def our_header(text: str, delimiter: str) -> bool:
    """Our reader's decision: row 0 is the header (``find_header`` over cells typed by ``classify``)."""
    grid = [{col: Cell(v, classify(v)) for col, v in enumerate(fields) if v.strip()}
            for fields in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)]
    return find_header([row for row in grid if row]) == 0


def sniffer_delimiter(text: str, restricted: bool) -> str | None:
    try:
        return csv.Sniffer().sniff(text, delimiters="".join(DELIMITERS) if restricted else None).delimiter
    except csv.Error:
        return None


def sniffer_header(text: str) -> bool | None:
    try:
        return csv.Sniffer().has_header(text)
    except csv.Error:
        return None


#: name → (what it answers, the function of a case)
CHECKS: dict[str, tuple[str, Callable[[Case], object]]] = {
    "ours": ("delimiter", lambda c: sniff_delimiter(c.text)),
    "Sniffer (4 delimiters)": ("delimiter", lambda c: sniffer_delimiter(c.text, True)),
    "Sniffer (default)": ("delimiter", lambda c: sniffer_delimiter(c.text, False)),
    "ours (find_header)": ("header", lambda c: our_header(c.text, c.delimiter)),
    "Sniffer.has_header": ("header", lambda c: sniffer_header(c.text)),
}


def _right(question: str, case: Case, answer: object) -> bool:
    return answer == (case.delimiter if question == "delimiter" else case.header)


def rows(cases_per_count: int) -> list[str]:
    """One table row per check: share right per row count, median µs per call (all cases)."""
    cases = {n: [make_case(random.Random(n * 100_000 + i), n) for i in range(cases_per_count)] for n in ROW_COUNTS}
    out = []
    for name, (question, check) in CHECKS.items():
        shares, times = [], []
        for n in ROW_COUNTS:
            right = 0
            for case in cases[n]:
                started = time.perf_counter()
                answer = check(case)
                times.append(time.perf_counter() - started)
                right += _right(question, case, answer)
            shares.append(f"{100 * right / len(cases[n]):.1f} %")
        out.append(f"| {question} | {name} | {' | '.join(shares)} | {1e6 * statistics.median(times):.0f} |")
        print(out[-1], flush=True)
    return out


def main(argv: list[str]) -> None:
    smoke = "--smoke" in argv
    per_count = 20 if smoke else CASES
    counts = " | ".join(f"{n} rows" for n in ROW_COUNTS)
    lines = [
        "## CSV delimiter and header: csv.Sniffer vs ours (`python -m bench.csv_sniff`)",
        "",
        f"{per_count} generated tables per row count (2-5 columns of names, free text with commas, quoted",
        "fields holding the delimiter, numbers, decimal commas, dates, booleans; tab, semicolon, comma or",
        "pipe; a header row or none). Share right; µs = median per call over all cases.",
        "",
        f"| question | who | {counts} | µs |",
        "|---|---|" + "---|" * len(ROW_COUNTS) + "---|",
        *rows(per_count),
    ]
    if not smoke:
        write_section("csv_sniff", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
