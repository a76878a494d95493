"""Issue 31: the database side of a big document in parts, measured on real PostgreSQL.

``python -m bench.swap [--smoke] [--chunks N] [--runs N]`` creates its own database
(``rag_bench_swap_<pid>``, dropped at the end) and, for one document of N chunks (default
20,000, the largest allowed), times in the same run, alternating, ``--runs`` times each:

* **single, HNSW on the path**: ``commit_chunks`` with a full HNSW index on ``document_vector``
  (as before sql/0017: every inserted vector is added to the graph inside the commit);
* **single**: ``commit_chunks`` as now (vectors inserted with ``ann = false``, outside the
  partial HNSW index);
* **parts**: the split (chunks staged), every part's stage commit (``PART_CHUNKS`` = 256 each),
  and the last one's, which swaps the staged rows in server-side;
* **ANN job**: one pass adding those vectors to the HNSW index afterwards (off the commit's path).

Vectors are random unit vectors (the timing does not depend on them). ``--smoke`` (CI: the
harness keeps working) uses 600 chunks, one run, and prints without writing bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from bench.report import write_section
from shared.adapters.postgres.repo import chunks as chunks_repo
from shared.adapters.postgres.repo import documents as documents_repo
from shared.adapters.postgres.repo import parts as parts_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.adapters.postgres.repo import users as users_repo
from shared.domain.parts import plan_parts
from shared.domain.records import Chunk, ChunkCommit, Claim, NewContent, PartCommit, SplitCommit

ADMIN_DSN = os.environ.get("BENCH_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
DIM = 384
PART_CHUNKS = 256
FULL_HNSW = "bench_full_hnsw"


def _chunks(n: int, rng: np.random.Generator) -> tuple[list[Chunk], np.ndarray]:
    words = [f"w{i}" for i in range(5000)]
    chunks = [Chunk(i, " ".join(rng.choice(words, 120)), 150) for i in range(n)]
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return chunks, vecs


async def _claimed(conn: asyncpg.Connection, kb: tuple[int, int]) -> tuple[int, int, Claim]:
    """A new document of ``kb`` with its task claimed: (document id, kb id, claim)."""
    content = NewContent("big.txt", "text/plain", 1, uuid.uuid4().hex, f"kb/{kb[1]}/{uuid.uuid4()}")
    msg, _ = await documents_repo.create_document_with_task(conn, kb_id=kb[1], user_id=kb[0], content=content)
    claim = await tasks_repo.claim_task(conn, msg.task_id, msg.generation)
    assert claim is not None
    return msg.document_id, msg.kb_id, claim


async def single(conn: asyncpg.Connection, kb: tuple[int, int], chunks: list[Chunk], vecs: np.ndarray) -> float:
    doc, kb_id, claim = await _claimed(conn, kb)
    t0 = time.perf_counter()
    assert await chunks_repo.commit_chunks(conn, ChunkCommit(claim, doc, kb_id, chunks, vecs))
    return time.perf_counter() - t0


async def single_with_hnsw(conn: asyncpg.Connection, kb: tuple[int, int], chunks: list[Chunk],
                           vecs: np.ndarray) -> float:
    await conn.execute(f"CREATE INDEX {FULL_HNSW} ON document_vector USING hnsw (embedding vector_cosine_ops)")
    try:
        return await single(conn, kb, chunks, vecs)
    finally:
        await conn.execute(f"DROP INDEX {FULL_HNSW}")


class PartsTiming:
    """One parts run: the split, each stage commit (the last one includes the swap), seconds."""

    def __init__(self) -> None:
        self.split = 0.0
        self.stages: list[float] = []

    @property
    def total(self) -> float:
        return self.split + sum(self.stages)


async def in_parts(conn: asyncpg.Connection, kb: tuple[int, int], chunks: list[Chunk], vecs: np.ndarray,
                   timing: PartsTiming) -> float:
    doc, kb_id, claim = await _claimed(conn, kb)
    plan = plan_parts(len(chunks), PART_CHUNKS)
    t0 = time.perf_counter()
    assert await parts_repo.split_task(conn, SplitCommit(claim, doc, kb_id, kb[0], chunks, plan), None) is not None
    timing.split = time.perf_counter() - t0
    for p in plan:
        part = await parts_repo.claim_part(conn, claim.task_id, p.part, claim.generation)
        assert part is not None
        t1 = time.perf_counter()
        await parts_repo.commit_part(conn, PartCommit(part, doc, kb_id, vecs[p.first_chunk:p.end_chunk]))
        timing.stages.append(time.perf_counter() - t1)
    return timing.total


async def ann_pass(conn: asyncpg.Connection, kb_id: int, batch: int = 1000) -> float:
    from shared.adapters.postgres.repo import ann as ann_repo

    t0 = time.perf_counter()
    while await ann_repo.add_to_ann(conn, kb_id, batch) == batch:
        pass
    return time.perf_counter() - t0


def _cell(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"


async def measure(dsn: str, n: int, runs: int, seed: int) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    chunks, vecs = _chunks(n, rng)
    conn = await asyncpg.connect(dsn)
    await register_vector(conn)
    out: dict[str, list[float]] = {k: [] for k in ("hnsw", "single", "parts", "split", "stage_max", "last", "ann")}
    try:
        user = await users_repo.create_user(conn, "bench-swap")
        for _ in range(runs):
            kbs = [(user, int((await users_repo.create_kb(conn, user, f"kb{i}", "all-MiniLM-L6-v2", DIM))["kb_id"]))
                   for i in range(3)]
            steps: list[tuple[str, Callable[[], Awaitable[float]]]] = [
                ("hnsw", partial(single_with_hnsw, conn, kbs[0], chunks, vecs)),
                ("single", partial(single, conn, kbs[1], chunks, vecs)),
            ]
            for name, step in steps:
                out[name].append(await step())
                print(f"{name}: {out[name][-1]:.2f} s", flush=True)
            timing = PartsTiming()
            out["parts"].append(await in_parts(conn, kbs[2], chunks, vecs, timing))
            out["split"].append(timing.split)
            out["stage_max"].append(max(timing.stages[:-1] or [0.0]))
            out["last"].append(timing.stages[-1])
            print(f"parts: {out['parts'][-1]:.2f} s (split {timing.split:.2f}, last {timing.stages[-1]:.2f})",
                  flush=True)
            out["ann"].append(await ann_pass(conn, kbs[2][1]))
            print(f"ann: {out['ann'][-1]:.2f} s", flush=True)
            for kb in kbs:
                await conn.execute("DELETE FROM knowledge_base WHERE id = $1", kb[1])
    finally:
        await conn.close()
    return out


def report(out: dict[str, list[float]], n: int, runs: int) -> str:
    parts = -(-n // PART_CHUNKS)
    ratio = statistics.median(out["hnsw"]) / statistics.median(out["single"])
    return "\n".join([
        "## Big documents in parts: the database side (issue 31)",
        "",
        f"`python -m bench.swap`: one document of {n:,} chunks (384-d vectors), {runs} runs each,"
        " alternating, on an otherwise empty table; seconds, median (min–max).",
        "",
        "| step | seconds |",
        "|---|---|",
        f"| single path commit, full HNSW index on the path (before sql/0017) | {_cell(out['hnsw'])} |",
        f"| single path commit, vectors outside the partial HNSW index (now) | {_cell(out['single'])} |",
        f"| parts: the split (chunks staged) | {_cell(out['split'])} |",
        f"| parts: slowest stage commit of a part ({PART_CHUNKS} vectors) before the last"
        f" | {_cell(out['stage_max'])} |",
        f"| parts: the last part's commit, with the swap | {_cell(out['last'])} |",
        f"| parts: split + all {parts} stage commits | {_cell(out['parts'])} |",
        f"| ANN job: the same vectors added to the HNSW index afterwards | {_cell(out['ann'])} |",
        "",
        f"The commit with HNSW maintenance on its path took {ratio:.0f}x the commit without it; the serial part"
        " a big document adds to its parallel embedding is the split and the swap."
        f" Load average at the end of the run: {os.getloadavg()[0]:.1f}.",
    ])


async def run(n: int, runs: int, seed: int) -> dict[str, list[float]]:
    from shared.adapters.postgres.migrate import migrate

    db = f"rag_bench_swap_{os.getpid()}"
    dsn = ADMIN_DSN.rsplit("/", 1)[0] + f"/{db}"
    await migrate(dsn)
    try:
        return await measure(dsn, n, runs, seed)
    finally:
        admin = await asyncpg.connect(ADMIN_DSN)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        finally:
            await admin.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="600 chunks, one run, print only (CI)")
    ap.add_argument("--chunks", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=31)
    args = ap.parse_args()
    n, runs = (600, 1) if args.smoke else (args.chunks, max(1, args.runs))
    out = asyncio.run(run(n, runs, args.seed))
    md = report(out, n, runs)
    print(md)
    if not args.smoke:
        write_section("swap", md)


if __name__ == "__main__":
    main()
