"""Issue 19 item 3 at full size: ``python -m bench.cluster [--docs 200]``.

The scenario of ``tests/e2e/test_broker_cluster.py`` (:mod:`tests.support.broker_faults`: a three-node
RabbitMQ cluster on this host, ``AMQP_URL`` naming all three nodes, kill -9 the queue's leader,
start it again, stop a follower, start it, restart the cluster node by node, documents uploaded
throughout), with at least ``--docs`` documents (200; CI runs 30): ``docs / 16`` right before each fault, the
others at a pace that spans the faults.
Writes the ``cluster`` section of bench/RESULTS.md: per fault the documents in flight and the
recovery time (a document uploaded right after the fault, until INDEXED), and for the run the
documents indexed / lost / embedded in two attempts. Needs root (the nodes run as the rabbitmq user).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from bench.stack import LOGS, Stack
from tests.support import broker_faults
from tests.support.rabbit_cluster import available

#: Expected length of the fault sequence, seconds: uploads are spread over it.
SPAN_S = 150.0


async def run(docs: int) -> broker_faults.Outcome:
    async with Stack("cluster") as stack:
        return await asyncio.to_thread(broker_faults.run, dict(stack.env), LOGS, documents=docs,
                                       gap_s=2 * SPAN_S / docs, burst=max(1, docs // 16))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=200)
    args = ap.parse_args()
    if (why := available()) is not None:
        sys.exit(f"bench.cluster: {why}")
    out = asyncio.run(run(args.docs))
    text = "\n".join([
        "`python -m bench.cluster` (issue 19 item 3): three RabbitMQ nodes on this host, `rag.index.queue` a quorum "
        "queue on all three, the API and two workers with `AMQP_URL` naming the three nodes, an embedding stand-in "
        f"answering after {broker_faults.EMBED_LATENCY_MS} ms; documents uploaded throughout the faults below, in "
        "this order. *Recovered after*: a document uploaded right after the fault was INDEXED that many seconds "
        "after it.",
        "",
        out.table(),
        "",
        f"Outcome: {out.summary()}.",
    ])
    print(text)
    if not (out.lost == 0 and out.committing_embedded_once and out.queue_messages == 0):
        sys.exit(1)
    from bench.report import write_section

    write_section("cluster", text)


if __name__ == "__main__":
    main()
