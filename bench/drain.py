"""P6 (issue 13): a worker draining stale or duplicate messages, against raw aio-pika.

``python -m bench.drain [--smoke] [--runs N] [--messages N]`` (isolated stack,
:mod:`bench.stack`) writes 100 documents straight to the database, half INDEXED with their task
SUCCESS at generation 1, half re-armed to generation 2 (WAITING). Each run then:

- **worker**: publishes ``--messages`` (default 10,000) generation-1 messages for them (a
  redelivery after success → ``not_runnable``; an old generation → ``stale_generation``) to
  ``rag.index.queue`` while no worker runs, starts one worker (``python -m task_service``,
  default settings, prefetch 1; embedding provider ``openai``, never called, so start-up loads no
  model) and times the drain from its first ``delivery_skip`` row to its last;
- **raw**: publishes the same bodies to a quorum queue of its own and consumes them in this
  process with aio-pika (prefetch 1, the worker's), acking each, timed from first to last
  delivery.

Figure: messages/s of each, median over ``--runs`` runs (min–max), and the ratio worker / raw
within a run. Goal ≥ 0.5. Writes the ``drain`` section of bench/RESULTS.md (``--smoke``: 200
messages, one run, print only).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import aio_pika
import asyncpg

from bench.stack import Stack, median_spread

DOCS = 100
RAW_QUEUE = "bench.raw"


async def seed(dsn: str) -> list[bytes]:
    """The documents and tasks; one message body per document (generation 1)."""
    from shared.domain.messages import IndexMessage

    conn = await asyncpg.connect(dsn)
    try:
        user = await conn.fetchval("INSERT INTO app_user (name) VALUES ('drain') RETURNING id")
        kb = await conn.fetchval("INSERT INTO knowledge_base (user_id, name, embedding_model, embedding_dim)"
                                 " VALUES ($1, 'drain', 'all-MiniLM-L6-v2', 384) RETURNING id", user)
        bodies = []
        for i in range(DOCS):
            gen = 1 + i % 2  # odd documents were re-armed: their generation-1 messages are stale
            doc = await conn.fetchval(
                "INSERT INTO document_info (kb_id, user_id, filename, size_bytes, sha256, object_key, status,"
                " index_generation) VALUES ($1, $2, $3, 1, '0', $4, $5, $6) RETURNING id",
                kb, user, f"d{i}.txt", f"k/{i}", "INDEXED" if gen == 1 else "INDEXING", gen)
            task = await conn.fetchval(
                "INSERT INTO index_task (document_id, kb_id, user_id, generation, status) VALUES ($1, $2, $3, $4, $5)"
                " RETURNING id", doc, kb, user, gen, "SUCCESS" if gen == 1 else "WAITING")
            bodies.append(IndexMessage(task_id=task, document_id=doc, kb_id=kb, user_id=user, generation=1).to_json())
        return bodies
    finally:
        await conn.close()


async def publish(url: str, queue: str, bodies: list[bytes], n: int) -> None:
    """``n`` persistent messages, cycling through ``bodies``, with confirms (pipelined)."""
    from shared.domain import messages

    conn = await aio_pika.connect(url)
    try:
        ch = await conn.channel(publisher_confirms=True)
        if queue == RAW_QUEUE:
            await ch.declare_queue(RAW_QUEUE, durable=True, arguments={"x-queue-type": "quorum"})
            exchange, key = ch.default_exchange, RAW_QUEUE
        else:
            exchange, key = await ch.get_exchange(messages.EXCHANGE), messages.ROUTING_KEY
        for start in range(0, n, 500):
            await asyncio.gather(*(
                exchange.publish(aio_pika.Message(bodies[i % len(bodies)], content_type="application/json",
                                                  delivery_mode=aio_pika.DeliveryMode.PERSISTENT), routing_key=key)
                for i in range(start, min(n, start + 500))))
    finally:
        await conn.close()


async def raw_drain(url: str, n: int, prefetch: int) -> float:
    """Consume + ack ``n`` messages of the raw queue; messages/s from first to last delivery."""
    conn = await aio_pika.connect(url)
    try:
        ch = await conn.channel()
        await ch.set_qos(prefetch_count=prefetch)
        queue = await ch.declare_queue(RAW_QUEUE, durable=True, arguments={"x-queue-type": "quorum"})
        seen = 0
        first = last = 0.0
        done = asyncio.Event()

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            nonlocal seen, first, last
            now = time.perf_counter()
            first = first or now
            await message.ack()
            seen += 1
            last = time.perf_counter()
            if seen >= n:
                done.set()

        tag = await queue.consume(on_message)
        await asyncio.wait_for(done.wait(), 600)
        await queue.cancel(tag)
        return (n - 1) / (last - first)
    finally:
        await conn.close()


async def worker_drain(stack: Stack, n: int) -> float:
    """Start a worker on the full queue; messages/s from its first skip row to its last."""
    conn = await asyncpg.connect(stack.dsn)
    try:
        before = await conn.fetchval("SELECT coalesce(max(id), 0) FROM delivery_skip")
        proc = await stack.start_worker(embedding_provider="openai")
        deadline = time.monotonic() + 900
        while await conn.fetchval("SELECT count(*) FROM delivery_skip WHERE id > $1", before) < n:
            if time.monotonic() > deadline or not proc.alive():
                raise RuntimeError(f"worker did not drain {n} messages:\n{proc.tail()}")
            await asyncio.sleep(0.2)
        span = await conn.fetchval("SELECT extract(epoch FROM max(create_time) - min(create_time))"
                                   " FROM delivery_skip WHERE id > $1", before)
        await stack.stop(proc)
        return (n - 1) / float(span)
    finally:
        await conn.close()


async def run(n: int, runs: int) -> str:
    from shared.settings import WorkerSettings

    worker_rates: list[float] = []
    raw_rates: list[float] = []
    async with Stack("drain") as stack:
        os.environ.update(stack.env)
        prefetch = WorkerSettings().prefetch
        url = stack.env["AMQP_URL"]
        # topology: one worker start declares it; then the queue is filled while no worker runs
        await stack.stop(await stack.start_worker(embedding_provider="openai"))
        bodies = await seed(stack.dsn)
        for r in range(runs):
            await publish(url, "rag.index.queue", bodies, n)
            await publish(url, RAW_QUEUE, bodies, n)
            if r % 2 == 0:
                w, raw = await worker_drain(stack, n), await raw_drain(url, n, prefetch)
            else:
                raw, w = await raw_drain(url, n, prefetch), await worker_drain(stack, n)
            worker_rates.append(w)
            raw_rates.append(raw)
            print(f"run {r + 1}: worker {w:.0f} msg/s, raw {raw:.0f} msg/s, ratio {w / raw:.2f}", flush=True)
    ratios = [w / r for w, r in zip(worker_rates, raw_rates, strict=True)]
    ok = "met" if sorted(ratios)[len(ratios) // 2] >= 0.5 else "**not met**"
    return "\n".join([
        f"`python -m bench.drain` (P6): {n:,} messages for documents whose task already succeeded (duplicate "
        "delivery) or whose generation moved on (stale), drained by one worker (prefetch "
        f"{prefetch}; timed from its first `delivery_skip` row to its last) against raw aio-pika consume + ack of "
        f"the same bodies from a quorum queue (same prefetch). Messages/s, median over {runs} runs (min–max).",
        "",
        "| worker msg/s | raw msg/s | ratio | goal ≥ 0.5 |",
        "|---:|---:|---:|---|",
        f"| {median_spread(worker_rates, '{:.0f}')} | {median_spread(raw_rates, '{:.0f}')} | "
        f"{median_spread(ratios)} | {ok} |",
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="200 messages, one run, print only (CI)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--messages", type=int, default=10_000)
    args = ap.parse_args()
    n, runs = (200, 1) if args.smoke else (args.messages, max(5, args.runs))
    text = asyncio.run(run(n, runs))
    print(text)
    if not args.smoke and n == 10_000:
        from bench.report import write_section

        write_section("drain", text)


if __name__ == "__main__":
    main()
