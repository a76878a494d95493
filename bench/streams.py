"""Issue 18: event streams must not starve the API.

``python -m bench.streams [--smoke]`` starts the API (a real process, isolated resources:
:mod:`bench.stack`; no worker, so every document stays WAITING with a queue position, the most
expensive row to list), gives user A a knowledge base of 300 documents and user B one of 20, and
measures B's ``GET /api/v1/knowledge-bases/{kb}/documents`` (sequential requests, latency p50 /
p99 / max):

1. with no stream open (baseline);
2. with 200 ``GET /api/v1/knowledge-bases/{kb}/events`` streams of user A open on A's KB, once
   every stream has received the KB's 300 documents (the streams then poll at the default
   interval, 0.5 s, reading what changed since their watermark), for at least 40 s (each stream
   re-reads the whole KB every 30 s: those re-reads fall in the window).

Goal: B's p99 ≤ 200 ms with the streams open. Before issue 18 (each stream re-read and validated
the whole KB every 0.5 s on the shared pool) B's list took 5.6-6.1 s. Writes the ``streams``
section of bench/RESULTS.md (``--smoke``: 20 streams on 30 documents, print only).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from dataclasses import dataclass

import httpx

from bench.stack import Stack, percentile


@dataclass(frozen=True)
class Plan:
    streams: int
    documents: int
    other_documents: int
    requests: int
    min_s: float  # with the streams open, measure at least this long (past EVENTS_RESYNC_S: full re-reads)


FULL = Plan(streams=200, documents=300, other_documents=20, requests=300, min_s=40.0)
SMOKE = Plan(streams=20, documents=30, other_documents=5, requests=40, min_s=0.0)
GOAL_P99_MS = 200.0


async def _upload(http: httpx.AsyncClient, kb: int, count: int, tag: str) -> None:
    """``count`` small distinct text documents, 8 at a time (202 each)."""
    gate = asyncio.Semaphore(8)

    async def one(i: int) -> None:
        async with gate:
            body = f"Document {tag} {i}: streams benchmark text, distinct per file {i * 7919}.\n".encode()
            r = await http.post(f"/api/v1/knowledge-bases/{kb}/documents",
                                files={"file": (f"{tag}-{i}.txt", body, "text/plain")})
            r.raise_for_status()

    await asyncio.gather(*(one(i) for i in range(count)))


async def _latencies(http: httpx.AsyncClient, kb: int, requests: int, min_s: float = 0.0) -> list[float]:
    """Milliseconds of sequential document-list requests (200 each): ``requests`` of them, and
    more until ``min_s`` seconds have passed."""
    out: list[float] = []
    until = time.monotonic() + min_s
    while len(out) < requests or time.monotonic() < until:
        started = time.perf_counter()
        r = await http.get(f"/api/v1/knowledge-bases/{kb}/documents")
        out.append((time.perf_counter() - started) * 1000)
        r.raise_for_status()
    return out


async def _follow(http: httpx.AsyncClient, kb: int, seen: list[int], index: int) -> None:
    """Read one KB stream for ever, counting its ``document`` events in ``seen[index]``."""
    async with http.stream("GET", f"/api/v1/knowledge-bases/{kb}/events") as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line == "event: document":
                seen[index] += 1


def _summary(values: list[float]) -> str:
    return (f"{percentile(values, 0.5):.1f} | {percentile(values, 0.99):.1f} | {max(values):.1f}")


async def run(plan: Plan) -> str:
    async with Stack("streams") as stack:
        url = await stack.start_api(max_in_flight_tasks_per_user="100000",
                                    events_max_streams_per_user=str(plan.streams + 10),
                                    events_max_streams=str(plan.streams + 50))
        (_, token_a), (_, token_b) = await stack.create_user("streams-a"), await stack.create_user("streams-b")
        timeout = httpx.Timeout(60, read=None)
        limits = httpx.Limits(max_connections=plan.streams + 10, max_keepalive_connections=plan.streams + 10)
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token_a}"}, timeout=timeout,
                                     limits=limits) as a, \
                httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token_b}"}, timeout=30) as b:
            kb_a, kb_b = await stack.create_kb(a, "streamed"), await stack.create_kb(b, "listed")
            await _upload(a, kb_a, plan.documents, "a")
            await _upload(b, kb_b, plan.other_documents, "b")
            baseline = await _latencies(b, kb_b, plan.requests)
            seen = [0] * plan.streams
            started = time.monotonic()
            followers = [asyncio.ensure_future(_follow(a, kb_a, seen, i)) for i in range(plan.streams)]
            try:
                while min(seen) < plan.documents:
                    if failed := [f for f in followers if f.done()]:
                        failed[0].result()  # raises what ended a stream early
                    await asyncio.sleep(0.1)
                opened_s = time.monotonic() - started
                loaded = await _latencies(b, kb_b, plan.requests, plan.min_s)
            finally:
                for f in followers:
                    f.cancel()
                for f in followers:
                    with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                        await f
    verdict = "met" if percentile(loaded, 0.99) <= GOAL_P99_MS else "NOT met"
    return "\n".join([
        "## Event streams beside another user's requests (issue 18)",
        "",
        f"`python -m bench.streams`: user A's KB of {plan.documents} WAITING documents (no worker: each has a "
        f"queue position), {plan.streams} KB streams of A open on it; user B lists B's KB of "
        f"{plan.other_documents} documents, sequential requests (ms): {len(baseline)} without streams, "
        f"{len(loaded)} over {plan.min_s:g} s or more with them (past EVENTS_RESYNC_S, 30 s: every stream's full "
        "re-read falls in the window). Defaults otherwise "
        "(DB_POOL_MAX 10, EVENTS_DB_SHARE 3, EVENTS_POLL_INTERVAL_S 0.5, EVENTS_TOKEN_CHECK_S 5).",
        "",
        "| B's document list | p50 | p99 | max |",
        "|---|---|---|---|",
        f"| no stream open | {_summary(baseline)} |",
        f"| {plan.streams} streams open on A's KB | {_summary(loaded)} |",
        "",
        f"All {plan.streams} streams had received the {plan.documents} documents {opened_s:.1f} s after they "
        f"were opened. Goal p99 ≤ {GOAL_P99_MS:.0f} ms with the streams open: **{verdict}**. Before issue 18: "
        "5.6-6.1 s.",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="20 streams on 30 documents; print only")
    args = ap.parse_args()
    text = asyncio.run(run(SMOKE if args.smoke else FULL))
    print(text)
    if not args.smoke:
        from bench.report import write_section

        write_section("streams", text)


if __name__ == "__main__":
    main()
