"""Big, hostile-to-chunkers texts built on the fly (no fixtures on disk): tests and ``bench.chunking``.

The shapes that made the old chunker (semantic-text-splitter) superlinear: one very long line of
words, a Markdown table of 100,000 rows, and a 50 MB log (one line per event, no blank lines).
"""

from __future__ import annotations

import random

_WORDS = "the of and a to in is was he for it with as his on be at by this had not are but from or".split()


def big_line(size: int = 3_000_000, seed: int = 7) -> str:
    """One line of ``size`` characters of short English words separated by single spaces."""
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(size // 3))[:size].strip()


def markdown_table(rows: int = 100_000) -> str:
    """A GitHub-flavoured Markdown table: header, delimiter row and ``rows`` rows (≈3.3 MB; the
    table that held a worker 25 minutes had 100,000 rows in 2.9 MB)."""
    head = "| id | name | value | unit |\n|---|---|---|---|\n"
    return head + "\n".join(f"| {i} | item{i} | {i * 7 % 1000} | kg |" for i in range(rows))


def log_text(size: int = 50_000_000, seed: int = 11) -> str:
    """An application log of about ``size`` characters: one event per line, no blank lines."""
    rng = random.Random(seed)
    levels = ("INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG")
    paths = ("/api/v1/documents", "/api/v1/search", "/healthz", "/api/v1/knowledge-bases", "/api/v1/tasks")
    lines: list[str] = []
    total = 0
    i = 0
    while total < size:
        line = (f"2026-11-30T12:{i // 6000 % 60:02d}:{i // 100 % 60:02d}.{i % 1000:03d}Z {rng.choice(levels)} "
                f"[worker-{i % 7}] request id={i * 2654435761 % 2**32:08x} path={rng.choice(paths)}/{i % 5000} "
                f"status={rng.choice((200, 200, 201, 404, 500))} duration_ms={rng.random() * 900:.1f}")
        lines.append(line)
        total += len(line) + 1
        i += 1
    return "\n".join(lines)


def paragraphs(n: int, seed: int = 13, words: int = 170) -> list[str]:
    """``n`` distinct paragraphs of ``words`` words (≈180 MiniLM tokens: one chunk each, never two
    in one chunk of 250 tokens), for tests and benchmarks that edit one paragraph of many."""
    rng = random.Random(seed)
    return [f"Paragraph {i} ({seed}): " + " ".join(rng.choice(_WORDS) for _ in range(words)) + "."
            for i in range(n)]
