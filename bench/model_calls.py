"""P3 (issue 13): model calls for work that was already done, read from ``embedding_run``.

``python -m bench.model_calls [--smoke]`` starts the real API and workers on isolated resources
(:mod:`bench.stack`: database ``rag_bench_calls_<pid>``, its own RabbitMQ vhost, bucket and Redis
DB, all dropped at the end), indexes one document of 200 one-chunk paragraphs, then measures, each at least 5 times:

* a duplicate message (the finished generation's message published again);
* a redelivery (the worker crashes right after its commit, before the ack: ``RAG_FAULT_POINTS=
  after_commit=exit``; the broker redelivers to the next worker);
* an identical re-upload (same bytes, same KB), and the same with ``?allow_duplicate=true``;
* a forced reindex of unchanged content, and a reindex after editing 1 chunk of 200 (new content);
* the same bytes uploaded by the same user into another of their KBs (0 calls: the cache is per
  user), and by another user into their own KB (issue 18: as many calls as the first indexing,
  no hit on the first user's entries; once, it costs a whole first indexing).

A model call is an ``embedding_run`` row with ``cache_misses > 0``; "chunks embedded" sums
``cache_misses``. Goals: 0, 0, 0 calls and ≤ 2 chunks; 0 calls in the user's other KB; another
user's upload as many calls and chunks as the first indexing. ``--smoke`` (CI: the harness keeps
working) uses 20 paragraphs, one repetition each, and prints without writing bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.report import write_section
from bench.stack import Stack, poll
from tests.support.bigtext import paragraphs

# A crashed worker's document lock expires after LOCK_TTL_S (120 s by default): the redelivery
# waits in the delay queue until then. Short locks keep the redelivery runs short.
SHORT_LOCK = {"lock_ttl_s": "4", "lock_renew_s": "1", "lock_retry_delay_s": "1"}


@dataclass
class Cost:
    """Model work of one measured action: calls (runs with misses), chunks embedded, cache hits."""

    calls: list[int] = field(default_factory=list)
    chunks: list[int] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


class Bench:
    """One user and KB on the stack's API, and what the scenarios read back."""

    def __init__(self, stack: Stack, http: httpx.AsyncClient, kb: int, n: int) -> None:
        self.stack, self.http, self.kb, self.n = stack, http, kb, n

    async def totals(self) -> tuple[int, int, int]:
        """(model calls, chunks embedded, cache hits) over the KB's documents so far."""
        r = (await self.stack.fetch(
            "SELECT count(*) FILTER (WHERE r.cache_misses > 0) AS calls,"
            " coalesce(sum(r.cache_misses), 0) AS misses, coalesce(sum(r.cache_hits), 0) AS hits"
            " FROM embedding_run r JOIN document_info d ON d.id = r.document_id WHERE d.kb_id = $1", self.kb))[0]
        return int(r["calls"]), int(r["misses"]), int(r["hits"])

    async def measure(self, cost: Cost, action: Callable[[], Awaitable[None]]) -> None:
        before = await self.totals()
        t0 = time.perf_counter()
        await action()
        cost.seconds.append(time.perf_counter() - t0)
        after = await self.totals()
        cost.calls.append(after[0] - before[0])
        cost.chunks.append(after[1] - before[1])
        cost.hits.append(after[2] - before[2])

    async def upload(self, data: bytes, name: str, allow_duplicate: bool = False) -> dict[str, Any]:
        q = "?allow_duplicate=true" if allow_duplicate else ""
        r = await self.http.post(f"/api/v1/knowledge-bases/{self.kb}/documents{q}", files={"file": (name, data)})
        if r.status_code not in (200, 202):
            raise RuntimeError(f"upload: {r.status_code} {r.text}")
        return dict(r.json())

    async def wait_generation(self, doc_id: int, generation: int, limit_s: float = 1800) -> None:
        async def done() -> bool:  # the generation's task has ended (a served document stays INDEXED meanwhile)
            t = (await self.http.get(f"/api/v1/documents/{doc_id}")).json()["task"]
            if t["generation"] == generation and t["status"] in ("FAILED", "TIMEOUT"):
                raise RuntimeError(f"document {doc_id} {t['status']}: {t['error_message']}")
            return bool(t["generation"] == generation and t["status"] == "SUCCESS")

        await poll(done, limit_s, f"document {doc_id} generation {generation} indexed")

    async def skips(self, doc_id: int) -> int:
        return int(await self.stack.fetchval("SELECT count(*) FROM delivery_skip WHERE document_id = $1", doc_id))

    async def documents(self) -> int:
        return int(await self.stack.fetchval("SELECT count(*) FROM document_info WHERE kb_id = $1", self.kb))


def _text(paras: Sequence[str]) -> bytes:
    return "\n\n".join(paras).encode()


async def run(smoke: bool) -> tuple[str, dict[str, Cost]]:
    n, reps = (20, 1) if smoke else (200, 5)
    seed = int(time.time())
    async with Stack("calls") as stack:
        url = await stack.start_api()
        worker = await stack.start_worker()
        _, token = await stack.create_user()
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                     timeout=120) as http:
            s = Scenarios(Bench(stack, http, await stack.create_kb(http, "p3"), n), paragraphs(n, seed=seed))
            await s.first()
            await s.tenants(Bench(stack, http, await stack.create_kb(http, "p3-other-kb"), n), url)
            for _ in range(reps):
                await s.duplicate_message()
            for i in range(reps):
                await s.reupload(i)
            for i in range(reps):
                await s.reupload_allowed(i)
            for _ in range(reps):
                await s.reindex_unchanged()
            for i in range(reps):
                await s.edit_one(i)
            await stack.stop(worker)
            await s.redeliveries(reps, seed)
    return f"{n} one-chunk paragraphs; {reps} repetition(s) each", s.costs


class Scenarios:
    """The measured actions, on one document of one-chunk paragraphs."""

    def __init__(self, b: Bench, paras: list[str]) -> None:
        self.b, self.paras, self.current = b, paras, list(paras)
        self.data = _text(paras)
        self.costs = {k: Cost() for k in ("first", "duplicate_message", "redelivery", "reupload",
                                          "reupload_allowed", "reindex_unchanged", "reindex_edit_1",
                                          "own_other_kb", "other_tenant")}
        self.doc: dict[str, Any] = {}

    async def first(self) -> None:
        async def index() -> None:
            self.doc.update(await self.b.upload(self.data, "handbook.txt"))
            await self.b.wait_generation(self.doc["document_id"], 1)

        await self.b.measure(self.costs["first"], index)
        self.doc_id = int(self.doc["document_id"])
        self.objects = await self.b.stack.count_objects(f"kb/{self.b.kb}/")

    async def tenants(self, own_kb: Bench, url: str) -> None:
        """The first document's bytes again: into another KB of the same user (served from the
        cache), then by another user into their own KB (issue 18: a cache miss for every chunk,
        so the timing tells nothing about what the first user indexed)."""
        async def copy(b: Bench) -> None:
            r = await b.upload(self.data, "copy.txt")
            await b.wait_generation(int(r["document_id"]), 1)

        await own_kb.measure(self.costs["own_other_kb"], lambda: copy(own_kb))
        stack = self.b.stack
        _, token = await stack.create_user("other-tenant")
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
            other = Bench(stack, http, await stack.create_kb(http, "p3-other-user"), self.b.n)
            await other.measure(self.costs["other_tenant"], lambda: copy(other))

    async def duplicate_message(self) -> None:
        """The finished generation's message, published again."""
        from shared.domain.messages import IndexMessage

        b = self.b
        user_id = int(await b.stack.fetchval("SELECT user_id FROM index_task WHERE id = $1", self.doc["task_id"]))
        message = IndexMessage(task_id=self.doc["task_id"], document_id=self.doc_id, kb_id=b.kb, user_id=user_id,
                               generation=1).to_json()

        async def duplicate() -> None:
            skipped = await b.skips(self.doc_id)
            await b.stack.publish(message, name="bench-duplicate")

            async def skipped_again() -> bool:
                return await b.skips(self.doc_id) > skipped

            await poll(skipped_again, 120, "duplicate message skipped")

        await b.measure(self.costs["duplicate_message"], duplicate)

    async def reupload(self, i: int) -> None:
        async def again() -> None:
            r = await self.b.upload(self.data, f"copy-{i}.txt")
            if r.get("duplicate_of") != self.doc_id:
                raise RuntimeError(f"not answered as a duplicate: {r}")

        await self.b.measure(self.costs["reupload"], again)
        if await self.b.documents() != 1 or await self.b.stack.count_objects(f"kb/{self.b.kb}/") != self.objects:
            raise RuntimeError("a duplicate upload left a document or an object behind")

    async def reupload_allowed(self, i: int) -> None:
        async def again() -> None:
            r = await self.b.upload(self.data, f"allowed-{i}.txt", allow_duplicate=True)
            await self.b.wait_generation(int(r["document_id"]), 1)

        await self.b.measure(self.costs["reupload_allowed"], again)

    async def reindex_unchanged(self) -> None:
        async def reindex() -> None:
            r = await self.b.http.post(f"/api/v1/documents/{self.doc_id}/reindex", json={"force": True})
            if r.status_code != 202:
                raise RuntimeError(f"reindex: {r.status_code} {r.text}")
            await self.b.wait_generation(self.doc_id, int(r.json()["document"]["index_generation"]))

        await self.b.measure(self.costs["reindex_unchanged"], reindex)

    async def edit_one(self, i: int) -> None:
        """New content: one paragraph (a different one each time) edited."""
        k = (i * 37 + len(self.current) // 2) % len(self.current)

        async def edit() -> None:
            self.current[k] = self.current[k].replace("Paragraph", f"Edited ({i}) paragraph", 1)
            r = await self.b.http.put(f"/api/v1/documents/{self.doc_id}/content",
                                      files={"file": ("handbook.txt", _text(self.current))})
            if r.status_code != 202:
                raise RuntimeError(f"new content: {r.status_code} {r.text}")
            await self.b.wait_generation(self.doc_id, int(r.json()["generation"]))

        await self.b.measure(self.costs["reindex_edit_1"], edit)

    async def redeliveries(self, reps: int, seed: int) -> None:
        """Workers crash right after their commit, before the ack (``after_commit=exit``); the
        broker redelivers to the next worker, which must skip without calling the model. Runs
        with no other worker consuming."""
        b = self.b
        docs = [int((await b.upload(_text(paragraphs(max(2, b.n // 10), seed=seed + 1 + i)), f"redelivered-{i}.txt"))
                    ["document_id"]) for i in range(reps)]
        t0 = time.perf_counter()
        while len(await self._committed(docs)) < len(docs):
            await b.stack.crash_worker("after_commit=exit", **SHORT_LOCK)
        final = await b.stack.start_worker(**SHORT_LOCK)

        async def all_skipped() -> bool:
            for d in docs:
                if await b.skips(d) < 1:
                    return False
            return True

        await poll(all_skipped, 300, "redeliveries skipped")
        await b.stack.stop(final)
        elapsed = time.perf_counter() - t0
        for d in docs:  # every embedding step of the document after its first (the one that committed)
            r = (await b.stack.fetch(
                "SELECT count(*) FILTER (WHERE cache_misses > 0) AS calls,"
                " coalesce(sum(cache_misses), 0) AS misses, coalesce(sum(cache_hits), 0) AS hits"
                " FROM (SELECT * FROM embedding_run WHERE document_id = $1 ORDER BY id OFFSET 1) r", d))[0]
            c = self.costs["redelivery"]
            c.calls.append(int(r["calls"]))
            c.chunks.append(int(r["misses"]))
            c.hits.append(int(r["hits"]))
            c.seconds.append(elapsed / len(docs))

    async def _committed(self, docs: list[int]) -> set[int]:
        return {int(r["document_id"]) for r in await self.b.stack.fetch(
            "SELECT document_id FROM index_task WHERE document_id = ANY($1::bigint[]) AND status = 'SUCCESS'", docs)}


def _fmt(values: Sequence[float], fmt: str = "{:g}") -> str:
    med = statistics.median(values)
    return fmt.format(med) if min(values) == max(values) else \
        f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))})"


ROWS = (
    ("duplicate_message", "a duplicate message (finished generation, published again)", "0 calls"),
    ("redelivery", "a redelivery (worker crashed after its commit, before the ack; seconds include starting "
                   "the workers)", "0 calls"),
    ("reupload", "an identical re-upload (same bytes, same KB) → 200 `duplicate_of`", "0 calls"),
    ("reindex_edit_1", "a reindex after editing 1 chunk of the document (new content)", "≤ 2 chunks"),
    ("reupload_allowed", "an identical re-upload with `?allow_duplicate=true` (new document)", "—"),
    ("reindex_unchanged", "a forced reindex of unchanged content", "—"),
    ("own_other_kb", "the same bytes uploaded by the same user into another of their KBs", "0 calls"),
    ("other_tenant", "the same bytes uploaded by another user into their own KB (the cache is per user)",
     "= first"),
    ("first", "first indexing of the document (reference)", "—"),
)


def goals_hold(costs: dict[str, Cost]) -> bool:
    """P3's goals, and issue 18's: another tenant's copy costs what the first indexing cost."""
    return (max(costs["duplicate_message"].calls) == 0 and max(costs["redelivery"].calls) == 0
            and max(costs["reupload"].calls) == 0 and max(costs["reindex_edit_1"].chunks) <= 2
            and max(costs["own_other_kb"].calls) == 0
            and costs["other_tenant"].calls == costs["first"].calls
            and costs["other_tenant"].chunks == costs["first"].chunks)


def table(desc: str, costs: dict[str, Cost]) -> str:
    lines = [
        "## P3: model calls for work already done (`python -m bench.model_calls`)",
        "",
        f"Real API + worker processes on isolated resources; {desc}. A model call is an `embedding_run` row",
        "with `cache_misses > 0`; chunks embedded = Σ `cache_misses`, cache hits = Σ `cache_hits`. Median",
        "(min–max) over the repetitions; seconds = wall time of the action until it settled (for reference).",
        "",
        "| Action | Model calls | Chunks embedded | Cache hits | Goal | Seconds |",
        "|---|---|---|---|---|---|",
    ]
    for key, label, goal in ROWS:
        c = costs[key]
        lines.append(f"| {label} | {_fmt(c.calls)} | {_fmt(c.chunks)} | {_fmt(c.hits)} | {goal} | "
                     f"{_fmt(c.seconds, '{:.2f}')} |")
    held = goals_hold(costs)
    first_s, cached_s = statistics.median(costs["first"].seconds), statistics.median(costs["reindex_unchanged"].seconds)
    lines += ["", f"Goals {'hold' if held else 'NOT met'}. A reindex served from the cache took "
                  f"{cached_s / first_s:.2f}× the first indexing's time in this run."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition; RESULTS.md untouched")
    args = p.parse_args(argv)
    os.environ.setdefault("DO_NOT_TRACK", "1")
    desc, costs = asyncio.run(run(args.smoke))
    md = table(desc, costs)
    print(md)
    if not args.smoke:
        write_section("model_calls", md)
    return 0 if goals_hold(costs) else 1


if __name__ == "__main__":
    sys.exit(main())
