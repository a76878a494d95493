"""``python -m bench.smoke``: every benchmark in smoke mode (tiny sizes, one run, nothing written
to bench/RESULTS.md), so the harness keeps working; ``make test`` runs it last.

The scripts run as subprocesses, :data:`PARALLEL` at a time (most of their time is service
start-up: model load, sandbox warm-up), each under :data:`TIMEOUT_S`. Prints each one's wall
time; exits 1 if any failed (its output is printed).
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Every bench script (``python -m bench.<name> --smoke``), the heaviest first; one not (yet) present is left out.
SCRIPTS = ("peer", "throughput", "workers", "drain", "retrieval", "model_calls", "upload", "pipeline", "chunking",
           "parsers", "ocr", "ocr_pages", "streams", "hosts", "parts", "search_layers", "edge", "swap", "pdf_columns",
           "csv_sniff", "term_stats")
PARALLEL = 4
TIMEOUT_S = 300


def _run(name: str) -> tuple[str, int, float, str]:
    started = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", f"bench.{name}", "--smoke"], cwd=ROOT, capture_output=True,
                           text=True, timeout=TIMEOUT_S)
        code, out = p.returncode, p.stdout[-3000:] + p.stderr[-3000:]
    except subprocess.TimeoutExpired:
        code, out = -1, f"timed out after {TIMEOUT_S} s"
    return name, code, time.monotonic() - started, out


def main() -> int:
    scripts = [s for s in SCRIPTS if (ROOT / "bench" / f"{s}.py").exists()]
    started = time.monotonic()
    failed = []
    with ThreadPoolExecutor(PARALLEL) as pool:
        for name, code, seconds, out in pool.map(_run, scripts):
            print(f"bench.{name} --smoke: {'ok' if code == 0 else f'FAILED ({code})'} in {seconds:.1f} s", flush=True)
            if code != 0:
                failed.append(name)
                print(out)
    print(f"bench smoke: {len(scripts) - len(failed)}/{len(scripts)} ok in {time.monotonic() - started:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
