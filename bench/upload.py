"""P1 (issue 13): upload latency against its raw parts, measured in the same run.

``python -m bench.upload [--smoke] [--runs N]`` starts the API (a real process, isolated
resources: :mod:`bench.stack`) and, for each file size (10 KB, 10 MB) and concurrency (1, 8, 32
clients, each uploading one file after the other), measures per request:

- **API**: ``POST /api/v1/knowledge-bases/{kb}/documents`` (multipart, a ``.txt`` file, every
  file distinct so content dedup never answers), until the 202 is read;
- **parts**: the same work done raw at the same concurrency, from this process: one object PUT
  of the same bytes (minio SDK, a single request), one PostgreSQL transaction with the same
  inserts (``documents_repo.create_document_with_task``), one publish with publisher confirm
  (``shared.adapters.rabbitmq.Publisher``), timed back to back.

No worker runs (messages wait in the queue). Latency p50 and p99 per run; the figure is the
median over ``--runs`` runs (min–max), and the ratio API p50 / parts p50 is computed within each
run. Goal: ratio ≤ 1.3 at every size and concurrency. Writes the ``upload`` section of
bench/RESULTS.md (``--smoke``: tiny sizes, one run, print only).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

from bench.stack import Stack, median_spread, percentile

KB = 1024
MB = 1024 * 1024
BOUNDARY = "benchboundary7d1c4e0f"


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...]
    clients: tuple[int, ...]
    runs: int

    def requests(self, size: int, clients: int) -> int:
        """Requests per run (all clients together)."""
        if self.runs == 1:
            return 2 * clients
        return max(4 * clients, 100 if size < MB else 2 * clients + 8)


FULL = Plan(sizes=(10 * KB, 10 * MB), clients=(1, 8, 32), runs=5)
SMOKE = Plan(sizes=(10 * KB, 1 * MB), clients=(1, 4), runs=1)


def body(size: int) -> bytes:
    """``size`` bytes of plain text (words and newlines)."""
    line = b"the quick brown fox jumps over the lazy dog while indexing keeps pace\n"
    return (line * (size // len(line) + 1))[:size]


def _label(size: int) -> str:
    return f"{size // MB} MB" if size >= MB else f"{size // KB} KB"


@dataclass
class Cell:
    """One (size, clients): per-run p50/p99 of the API and of the parts, ms."""

    api50: list[float] = field(default_factory=list)
    api99: list[float] = field(default_factory=list)
    parts50: list[float] = field(default_factory=list)
    parts99: list[float] = field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        return [a / p for a, p in zip(self.api50, self.parts50, strict=True)]


async def _concurrently(clients: int, total: int, one: Callable[[int], Awaitable[float]]) -> list[float]:
    """``clients`` loops share ``total`` calls of ``one(i)``; the latencies (ms)."""
    counter = iter(range(total))
    out: list[float] = []

    async def loop() -> None:
        for i in counter:
            out.append(await one(i))

    await asyncio.gather(*(loop() for _ in range(clients)))
    return out


class Uploader:
    """Multipart bodies sent without building them per request (head + shared bytes + tail)."""

    def __init__(self, http: httpx.AsyncClient, kb_id: int, data: bytes) -> None:
        self.http, self.kb_id, self.data = http, kb_id, data

    async def __call__(self, i: int) -> float:
        head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f{i}.txt\"\r\n"
                f"Content-Type: text/plain\r\n\r\n{uuid.uuid4()}\n").encode()
        tail = f"\r\n--{BOUNDARY}--\r\n".encode()
        view = memoryview(self.data)

        async def stream() -> AsyncIterator[bytes]:
            yield head
            for off in range(0, len(view), MB):
                yield bytes(view[off:off + MB])
            yield tail

        length = len(head) + len(self.data) + len(tail)
        t0 = time.perf_counter()
        r = await self.http.post(f"/api/v1/knowledge-bases/{self.kb_id}/documents", content=stream(), headers={
            "content-type": f"multipart/form-data; boundary={BOUNDARY}", "content-length": str(length)})
        dt = (time.perf_counter() - t0) * 1000
        if r.status_code != 202:
            raise RuntimeError(f"upload answered {r.status_code}: {r.text[:300]}")
        return dt


class Parts:
    """The raw parts of one upload, back to back: PUT, one transaction, one confirmed publish."""

    def __init__(self, store: object, pool: object, publisher: object, user_id: int, kb_id: int,
                 data: bytes) -> None:
        self.store, self.pool, self.publisher = store, pool, publisher
        self.user_id, self.kb_id, self.data = user_id, kb_id, data

    async def __call__(self, i: int) -> float:
        from shared.adapters.postgres.pool import translate_errors
        from shared.adapters.postgres.repo import documents as documents_repo
        from shared.adapters.rabbitmq import Publisher
        from shared.adapters.s3 import ObjectStore
        from shared.domain.records import NewContent

        store, publisher = self.store, self.publisher
        assert isinstance(store, ObjectStore) and isinstance(publisher, Publisher)
        data = f"{uuid.uuid4()}\n".encode() + self.data  # distinct bytes, as the API's
        key = f"kb/{self.kb_id}/{uuid.uuid4()}"
        stream = io.BytesIO(data)
        t0 = time.perf_counter()
        await store.put(key, stream, len(data), part_size=max(5 * MB, len(data)))  # one PUT request
        async with translate_errors(), self.pool.acquire() as conn:  # type: ignore[attr-defined]
            _, row = await documents_repo.create_document_with_task(
                conn, kb_id=self.kb_id, user_id=self.user_id,
                content=NewContent(f"p{i}.txt", "text/plain", len(data), "0" * 64, key))
        await publisher.publish(row.body, message_id=str(row.message_id))
        return (time.perf_counter() - t0) * 1000


async def _settle_tasks(pool: object) -> None:
    """Between runs: the tasks just created end (as if indexed), so the user's in-flight count
    (read by every upload) stays at one run's worth, as a worker keeps it in production."""
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        await conn.execute("UPDATE index_task SET status = 'SUCCESS', end_time = now() WHERE status = 'WAITING'")


async def run(plan: Plan) -> str:
    from shared.adapters import rabbitmq
    from shared.adapters.postgres.pool import PoolConfig, create_pool
    from shared.adapters.s3 import ObjectStore, StorageConfig
    from shared.settings import KnowledgeSettings

    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(64))
    cells: dict[tuple[int, int], Cell] = {}
    async with Stack("upload") as stack:
        os.environ.update(stack.env)
        # every client of the bench is 127.0.0.1: the edge's per-client body cap would refuse past 16 at once
        url = await stack.start_api(max_in_flight_tasks_per_user=str(10**9), embedding_provider="openai",
                                    ks_max_bodies_per_client=str(10**6))
        user_id, token = await stack.create_user()
        settings = KnowledgeSettings()
        store = ObjectStore(StorageConfig.from_settings(settings))
        pool = await create_pool(PoolConfig.from_settings(settings), app_name="bench-parts")
        conn = await rabbitmq.connect(settings.amqp_url.get_secret_value(), name="bench-parts", heartbeat_s=30,
                                  robust=False)
        publisher = await rabbitmq.Publisher.open(conn, 30)
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120,
                                     limits=limits) as http:
            kb_id = await stack.create_kb(http, "p1")
            for size in plan.sizes:
                data = body(size)
                api, parts = Uploader(http, kb_id, data), Parts(store, pool, publisher, user_id, kb_id, data)
                await api(-1)  # warm both paths (connections, code)
                await parts(-1)
                for clients in plan.clients:
                    cell = cells.setdefault((size, clients), Cell())
                    n = plan.requests(size, clients)
                    for r in range(plan.runs):
                        # alternate the order so neither side always runs on a warmer machine
                        first, second = (api, parts) if r % 2 == 0 else (parts, api)
                        a = await _concurrently(clients, n, first)
                        b = await _concurrently(clients, n, second)
                        lat_api, lat_parts = (a, b) if first is api else (b, a)
                        await _settle_tasks(pool)
                        cell.api50.append(statistics.median(lat_api))
                        cell.api99.append(percentile(lat_api, 0.99))
                        cell.parts50.append(statistics.median(lat_parts))
                        cell.parts99.append(percentile(lat_parts, 0.99))
                    print(f"{_label(size):>6} x{clients:<3} API p50 {median_spread(cell.api50, '{:.1f}')} ms, "
                          f"parts p50 {median_spread(cell.parts50, '{:.1f}')} ms, "
                          f"ratio {median_spread(cell.ratios)}", flush=True)
        await conn.close()
        await pool.close()
    return report(plan, cells)


def report(plan: Plan, cells: dict[tuple[int, int], Cell]) -> str:
    lines = [
        "`python -m bench.upload` (P1): `POST .../documents` of a `.txt` file (every file distinct) against its raw "
        "parts done from the bench process at the same concurrency: one S3 PUT of the same bytes + one PostgreSQL "
        "transaction with the same three inserts + one confirmed publish. Latency in ms, median over "
        f"{plan.runs} runs (min–max); ratio = API p50 / parts p50 within a run. Goal: ratio ≤ 1.3.",
        "",
        "| size | clients | API p50 | API p99 | parts p50 | parts p99 | ratio p50 | goal |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for (size, clients), c in cells.items():
        ok = "met" if statistics.median(c.ratios) <= 1.3 else "**not met**"
        lines.append(f"| {_label(size)} | {clients} | {median_spread(c.api50, '{:.1f}')} | "
                     f"{median_spread(c.api99, '{:.1f}')} | {median_spread(c.parts50, '{:.1f}')} | "
                     f"{median_spread(c.parts99, '{:.1f}')} | {median_spread(c.ratios)} | {ok} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one run, print only (CI)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", help="comma-separated bytes (exploring; no report written)")
    ap.add_argument("--clients", help="comma-separated concurrency levels (exploring; no report written)")
    args = ap.parse_args()
    plan = SMOKE if args.smoke else Plan(FULL.sizes, FULL.clients, max(5, args.runs))
    explore = bool(args.sizes or args.clients)
    if explore:
        plan = Plan(tuple(int(x) for x in args.sizes.split(",")) if args.sizes else plan.sizes,
                    tuple(int(x) for x in args.clients.split(",")) if args.clients else plan.clients, args.runs)
    text = asyncio.run(run(plan))
    print(text)
    if not (args.smoke or explore):
        from bench.report import write_section

        write_section("upload", text)


if __name__ == "__main__":
    main()
