"""Parser fidelity and speed per format: every candidate library on the fidelity corpus, in one run.

``python -m bench.parsers [--smoke]`` scores, per format, each candidate on marker recall (share
of ``Sample.must`` markers found, and forbidden markers leaked) over ``tests.fidelity``'s
generated documents, and its throughput in MB/s (median of ``RUNS`` timed runs over a large
generated document of that format), then writes the table to ``bench/RESULTS.md``
(section ``parsers``). Candidates live in ``bench/parser_candidates/<format>.py``: each module
exposes ``CANDIDATES: dict[str, Callable[[bytes], str]]`` (bytes → extracted text; name
``ours`` is the production reader), ``samples() -> list[Sample]`` and
``big_sample(smoke: bool) -> Sample`` for the speed figure, and optionally ``RUNS: dict[str, int]``
(fewer timed runs for a very slow candidate). A candidate that is not installed (ImportError) is
reported as such, not fatal.
"""

from __future__ import annotations

import importlib
import statistics
import sys
import time
from collections.abc import Callable
from types import ModuleType

from bench.report import write_section
from shared.domain.errors import DependencyMissingError
from tests.fidelity import Sample

FORMATS = ("docx", "html", "md", "txt", "pptx", "odp", "epub", "odt", "rtf", "jsondoc", "xml", "eml", "msg",
           "xlsx", "ods", "csv")
RUNS = 5


def _recall(fn: Callable[[bytes], str], samples: list[Sample]) -> tuple[int, int, int, str]:
    found = total = leaked = 0
    missing: list[str] = []
    for sample in samples:
        try:
            text = fn(sample.data)
        except Exception as exc:  # a candidate that crashes on a sample finds nothing in it
            text = ""
            missing.append(f"{sample.name}: {type(exc).__name__}")
        for marker in sample.must:
            total += 1
            if marker in text:
                found += 1
            else:
                missing.append(marker)
        leaked += sum(1 for marker in sample.must_not if marker in text)
    return found, total, leaked, ", ".join(missing[:12]) + (" …" if len(missing) > 12 else "")


def _speed(fn: Callable[[bytes], str], sample: Sample, runs: int) -> tuple[float, float]:
    """Median MB/s over ``runs`` and its spread (max - min), MB = 10^6 bytes of ``sample.size``."""
    rates = []
    for _ in range(runs):
        started = time.perf_counter()
        fn(sample.data)
        rates.append(sample.size / 1e6 / (time.perf_counter() - started))
    return statistics.median(rates), max(rates) - min(rates)


def _format_rows(fmt: str, module: ModuleType, smoke: bool) -> list[str]:
    samples: list[Sample] = module.samples()
    big: Sample = module.big_sample(smoke)
    rows = []
    for name, fn in module.CANDIDATES.items():
        try:
            found, total, leaked, missing = _recall(fn, samples)
            rate, spread = _speed(fn, big, 1 if smoke else getattr(module, "RUNS", {}).get(name, RUNS))
        except ImportError as exc:
            rows.append(f"| {fmt} | {name} | not installed ({exc.name}) | | | |")
            continue
        except DependencyMissingError as exc:  # a bench-extra candidate without the extra (make test)
            rows.append(f"| {fmt} | {name} | not installed ({exc}) | | | |")
            continue
        rows.append(
            f"| {fmt} | {name} | {found}/{total} ({100 * found / max(total, 1):.0f} %) | {leaked} "
            f"| {rate:.2f} ± {spread:.2f} | {missing} |"
        )
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str]) -> None:
    smoke = "--smoke" in argv
    wanted = [a for a in argv if not a.startswith("-")] or list(FORMATS)
    lines = [
        "## Parsers: marker recall and throughput (`python -m bench.parsers`)",
        "",
        "| format | candidate | markers found | forbidden leaked | MB/s (median ± spread) | missing |",
        "|---|---|---|---|---|---|",
    ]
    for fmt in wanted:
        module = importlib.import_module(f"bench.parser_candidates.{fmt}")
        lines.extend(_format_rows(fmt, module, smoke))
    if not smoke:  # a subset of the formats gets a section of its own, so the full table is not cut
        write_section("parsers" if wanted == list(FORMATS) else "parsers-" + "-".join(wanted), "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
