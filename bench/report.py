"""``bench/RESULTS.md`` is shared by every benchmark: each owns one section, replaced in place.

A section is delimited by ``<!-- section:NAME -->`` and ``<!-- end:NAME -->``; a new section is
appended. The file's head says when and where the figures were measured.
"""

from __future__ import annotations

import os
import platform
import re
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def machine() -> str:
    """One line: date (UTC), CPU count and model, memory, Python, embedding model."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((" (" + line.split(":", 1)[1].strip() + ")" for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        mem = f", {kib / 1024**2:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (f"{stamp}; {os.cpu_count()} cores{cpu}{mem}; Python {platform.python_version()}; "
            "embedding model all-MiniLM-L6-v2 (CPU) unless the section says otherwise; machine shared with other "
            "sessions' tests and benches")


def write_section(name: str, markdown: str, path: Path = RESULTS) -> None:
    """Replace (or append) section ``name`` of ``path`` with ``markdown``."""
    begin, end = f"<!-- section:{name} -->", f"<!-- end:{name} -->"
    block = f"{begin}\n{markdown.rstrip()}\n\n_measured {machine()}_\n{end}"
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n\nWritten by `make bench`.\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    new = pattern.sub(lambda _: block, old) if pattern.search(old) else f"{old.rstrip()}\n\n{block}\n"
    path.write_text(new, encoding="utf-8")
