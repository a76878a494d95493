"""Dead-letter CLI: ``python -m task_service.dlq list`` and ``python -m task_service.dlq replay ID``.

The scanner moves messages from ``rag.index.dlq`` into the ``dead_letter`` table (their tasks
FAILED with the reason). ``replay`` re-runs the task after a fix: a forced retry, i.e. a new
generation and a new message — never the old message, whose generation is spent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime

import asyncpg

from shared import amqp, queries
from shared.fencing import Action, EnqueueRequest, RequestKind, StaleThresholds, decide_enqueue
from shared.settings import WorkerSettings


async def list_dead(dsn: str, include_replayed: bool) -> list[dict[str, object]]:
    conn = await asyncpg.connect(dsn)
    try:
        return [dict(r.items()) for r in await queries.list_dead_letters(conn, include_replayed)]
    finally:
        await conn.close()


async def replay(settings: WorkerSettings, dead_letter_id: int) -> dict[str, object]:
    conn = await asyncpg.connect(settings.database_url)
    try:
        row = await queries.pending_dead_letter(conn, dead_letter_id)
        if row is None:
            return {"replayed": False, "detail": "no such pending dead letter"}
        if row["task_id"] is None:
            return {"replayed": False, "detail": "message was not a valid index message; nothing to replay"}
        snap = await queries.load_task_snapshot(conn, row["task_id"])
        if snap is None:
            return {"replayed": False, "detail": "task no longer exists (document deleted)"}
        decision = decide_enqueue(snap, EnqueueRequest(RequestKind.RETRY, force=True), datetime.now(UTC),
                                  StaleThresholds())
        if decision.action is not Action.ISSUE:
            return {"replayed": False, "detail": decision.reason, "task_status": snap.status.value}
        issued = await queries.try_issue_generation(conn, snap, decision, dispatch_limit=settings.dispatch_limit)
        if issued is None:
            return {"replayed": False, "detail": "task changed concurrently; try again"}
        msg, out = issued
        await queries.mark_dead_letter_replayed(conn, dead_letter_id)
        if not out.released:  # the user has K tasks in flight: the relay publishes it when a slot frees
            return {"replayed": True, "task_id": msg.task_id, "generation": msg.generation, "held": True}
        broker = await amqp.connect(settings.amqp_url.get_secret_value(), name="task_service.dlq",
                                    heartbeat_s=30, robust=False)
        try:
            pub = await amqp.Publisher.open(broker, settings.amqp_publish_timeout_s)
            await pub.publish(out.body, message_id=str(out.message_id))
            await queries.mark_published(conn, out.id)
        finally:
            await broker.close()
        return {"replayed": True, "task_id": msg.task_id, "generation": msg.generation}
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m task_service.dlq", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list", help="dead letters not yet replayed (JSON lines)")
    p.add_argument("--all", action="store_true", help="include replayed ones")
    p = sub.add_parser("replay", help="force-retry the task of a dead letter")
    p.add_argument("id", type=int)
    args = parser.parse_args(argv)
    settings = WorkerSettings()
    if args.cmd == "list":
        for item in asyncio.run(list_dead(settings.database_url, args.all)):
            print(json.dumps(item, default=str))
        return 0
    result = asyncio.run(replay(settings, args.id))
    print(json.dumps(result))
    return 0 if result["replayed"] else 1


if __name__ == "__main__":
    sys.exit(main())
