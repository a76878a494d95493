"""The ``rag`` operator commands against the real database and broker (in-process, CliRunner):
tokens, knowledge bases, requeue-stuck and the dead-letter list."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid

import asyncpg
import httpx
from typer.testing import CliRunner, Result

from rag_cli import app
from shared.domain import messages
from shared.domain.messages import IndexMessage
from tests.integration.helpers import new_document
from tests.support import MGMT, MGMT_AUTH, VHOST, poll, sql, sql_value


def rag(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def test_tokens_and_knowledge_bases(services_env: dict[str, str]) -> None:
    dsn = services_env["DATABASE_URL"]
    user = f"cli-{uuid.uuid4().hex[:8]}"
    first = json.loads(rag("create-user", user).stdout)
    second = rag("create-token", user)
    assert second.exit_code == 0, second.output
    second_token = json.loads(second.stdout)
    assert second_token["user_id"] == first["user_id"] and second_token["token"] != first["token"]

    listed = [json.loads(line) for line in rag("list-tokens", "--user", user, "--json").stdout.splitlines()]
    assert [t["fingerprint"] for t in listed] == [hashlib.sha256(t["token"].encode()).hexdigest()[:8]
                                                 for t in (first, second_token)]
    assert all(first["token"] not in json.dumps(t) for t in listed), "the secret is never listed"
    assert json.loads(rag("revoke-token", "--id", str(second_token["token_id"])).stdout) == {"revoked": True}
    assert rag("revoke-token", "--id", str(second_token["token_id"])).exit_code == 1  # already revoked
    assert sql_value(dsn, "SELECT revoked_at IS NOT NULL FROM api_token WHERE id = $1", second_token["token_id"])
    table = rag("list-tokens", "--user", user)
    assert table.exit_code == 0 and user in table.stdout

    kb = json.loads(rag("create-kb", "handbook", "--user", user).stdout)
    assert sql_value(dsn, "SELECT user_id FROM knowledge_base WHERE id = $1", kb["kb_id"]) == first["user_id"]
    missing = rag("create-kb", "x", "--user", f"nobody-{uuid.uuid4().hex}")
    assert missing.exit_code == 1 and "no user named" in missing.stderr
    assert rag("create-token", f"nobody-{uuid.uuid4().hex}").exit_code == 1


def _new_waiting_task(dsn: str) -> IndexMessage:
    async def go() -> IndexMessage:
        conn = await asyncpg.connect(dsn)
        try:
            msg, _ = await new_document(conn)
            # the inline publish never happened and nobody relayed it: a task stuck in WAITING
            await conn.execute("UPDATE outbox SET published_at = now() WHERE task_id = $1", msg.task_id)
            await conn.execute("UPDATE index_task SET update_time = now() - interval '1 hour' WHERE id = $1",
                               msg.task_id)
            return msg
        finally:
            await conn.close()

    return asyncio.run(go())


def test_requeue_stuck_republishes_a_forgotten_waiting_task(services_env: dict[str, str]) -> None:
    msg = _new_waiting_task(services_env["DATABASE_URL"])
    r = rag("requeue-stuck", "--waiting-after", "600")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert msg.task_id in report["republished"] and report["published"] >= 1

    def published() -> list[dict[str, object]]:
        got = httpx.post(f"{MGMT}/api/queues/{VHOST}/{messages.QUEUE}/get", auth=MGMT_AUTH, timeout=10,
                         json={"count": 500, "ackmode": "ack_requeue_true", "encoding": "auto"}).json()
        return [m for m in got if m["properties"].get("correlation_id") == str(msg.task_id)]

    [m] = poll(published, timeout=10, what="the re-published message")
    assert json.loads(str(m["payload"])) == msg.to_dict()
    assert sql_value(services_env["DATABASE_URL"], "SELECT count(*) FROM outbox WHERE task_id = $1"
                     " AND published_at IS NULL", msg.task_id) == 0

    again = json.loads(rag("requeue-stuck", "--waiting-after", "600").stdout)
    assert msg.task_id not in again["republished"]  # touched by the first pass
    httpx.delete(f"{MGMT}/api/queues/{VHOST}/{messages.QUEUE}/contents", auth=MGMT_AUTH, timeout=10)  # leave it empty


def test_dlq_list_shows_pending_dead_letters(services_env: dict[str, str]) -> None:
    dsn = services_env["DATABASE_URL"]
    [row] = sql(dsn, "INSERT INTO dead_letter (message_id, reason, body) VALUES ($1, 'rejected', $2) RETURNING id",
                str(uuid.uuid4()), b"{}")
    listed = [json.loads(line) for line in rag("dlq", "list", "--json").stdout.splitlines()]
    assert row["id"] in [d["id"] for d in listed]
    assert rag("dlq", "list").exit_code == 0
    replay = rag("dlq", "replay", str(row["id"]))
    assert replay.exit_code == 1 and "not a valid index message" in replay.stdout
    sql(dsn, "UPDATE dead_letter SET replayed_at = now() WHERE id = $1", row["id"])  # leave none pending
