"""Issue 4 (access): every route authenticates and checks ownership; the worker trusts the row,
not the message; schemathesis finds no server errors or schema violations."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared.adapters.rabbitmq import Publisher, connect
from shared.domain.messages import IndexMessage
from tests.e2e.conftest import WorkerFactory
from tests.support import Api, poll, ready_count, sql, sql_value

pytestmark = pytest.mark.e2e

BODIES: dict[str, Any] = {"name": "x", "query": "x", "force": True, "top_k": 1, "mode": "hybrid", "generation": 1}


def _routes(api_url: str) -> list[tuple[str, str, dict[str, Any]]]:
    """``(METHOD, path, operation)`` for every /api/v1 operation, with JSON body schemas resolved."""
    schema = httpx.get(f"{api_url}/openapi.json", timeout=10).json()
    components = schema.get("components", {}).get("schemas", {})
    out = []
    for path, ops in schema["paths"].items():
        if not path.startswith("/api/v1"):
            continue
        for method, op in ops.items():
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body is not None:
                refs = [body, *body.get("anyOf", [])]
                ref = next((r["$ref"] for r in refs if "$ref" in r), None)
                op = {**op, "_json": components[ref.rsplit("/", 1)[1]] if ref else body}
            out.append((method.upper(), path, op))
    return out


def _call(http: httpx.Client, method: str, path: str, op: dict[str, Any]) -> httpx.Response:
    """A request that would succeed for the owner: a file for multipart routes, a JSON body
    with exactly the properties the route's schema declares."""
    content = op.get("requestBody", {}).get("content", {})
    if "multipart/form-data" in content:
        return http.request(method, path, files={"file": ("x.txt", b"hello there", "text/plain")})
    if "_json" in op:
        props = op["_json"].get("properties", {})
        return http.request(method, path, json={k: BODIES[k] for k in props})
    return http.request(method, path)


def test_every_api_route_requires_a_token(api_url: str) -> None:
    routes = _routes(api_url)
    assert len(routes) >= 11
    with httpx.Client(base_url=api_url, timeout=30) as anon:
        for method, path, op in routes:
            concrete = re.sub(r"\{[^}]+\}", "1", path)
            r = _call(anon, method, concrete, op)
            assert r.status_code == 401, (method, path, r.status_code, r.text)
            assert r.json()["detail"]
        bad = httpx.Client(base_url=api_url, headers={"Authorization": "Bearer rag_not-a-token"}, timeout=30)
        assert bad.get("/api/v1/knowledge-bases").status_code == 401


def test_user_b_gets_404_for_every_object_of_user_a(
    api_url: str, make_user: Callable[[str], Api], services_env: dict[str, str]
) -> None:
    """Walks the OpenAPI schema, so a new route without an ownership check fails here."""
    a, b = make_user("owner"), make_user("intruder")
    kb = a.create_kb("private")
    doc = a.upload(kb, name="secret.txt", data=b"The vault code is 4-8-15-16-23-42.")
    ids = {"kb_id": kb, "document_id": doc["document_id"], "task_id": doc["task_id"]}
    dsn = services_env["DATABASE_URL"]
    before = sql(dsn, "SELECT index_generation, filename FROM document_info WHERE id = $1", doc["document_id"])
    checked = 0
    for method, path, op in _routes(api_url):
        names = re.findall(r"\{([^}]+)\}", path)
        if not names:
            continue  # collection routes: scoped to the caller, checked below
        r = _call(b.http, method, path.format(**{n: ids[n] for n in names}), op)
        assert r.status_code in (403, 404), (method, path, r.status_code, r.text)
        checked += 1
    assert checked >= 9
    assert b.http.get("/api/v1/knowledge-bases").json()["items"] == []
    assert sql(dsn, "SELECT index_generation, filename FROM document_info WHERE id = $1",
               doc["document_id"]) == before, "user B changed nothing"
    assert a.document(doc["document_id"])["filename"] == "secret.txt"


async def _publish(amqp_url: str, body: bytes) -> None:
    conn = await connect(amqp_url, name="test-forged", heartbeat_s=30, robust=False)
    try:
        await (await Publisher.open(conn, 10)).publish(body)
    finally:
        await conn.close()


def test_message_whose_ids_disagree_with_the_row_goes_to_the_dlq(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    kb = api.create_kb()
    doc = api.upload(kb, name="victim.txt", data=b"Only the owner's worker may index this.")
    real_user = sql_value(dsn, "SELECT user_id FROM index_task WHERE id = $1", doc["task_id"])
    forged = IndexMessage(task_id=doc["task_id"], document_id=doc["document_id"], kb_id=kb,
                          user_id=real_user + 1000, generation=1)
    dlq_before = ready_count("rag.index.dlq")  # nothing consumes the DLQ
    asyncio.run(_publish(services_env["AMQP_URL"], forged.to_json()))
    workers(scan_interval_s="0")  # no scanner: the DLQ keeps what the worker rejected
    poll(lambda: ready_count("rag.index.dlq") > dlq_before, timeout=60, what="forged message dead-lettered")
    d = api.wait_terminal(doc["document_id"])  # the genuine message still indexes it
    assert d["status"] == "INDEXED" and d["task"]["attempt"] == 1


SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"  # the running venv's
# per operation and phase: bounds CI time whatever routes the app has (~15 s a run for 14 routes);
# RAG_SCHEMATHESIS_MAX_EXAMPLES=200 for a deeper hunt by hand
MAX_EXAMPLES = int(os.environ.get("RAG_SCHEMATHESIS_MAX_EXAMPLES", "15"))


def _schemathesis(api_url: str, api: Api, out: Path, *extra: str,
                  config: Path | None = None) -> tuple[subprocess.CompletedProcess[str], str]:
    """One schemathesis run over every operation of the app's live OpenAPI schema, with the
    ``not_a_server_error`` and schema-conformance checks; returns the process and its summary."""
    token = api.http.headers["Authorization"]
    pre = ["--config-file", str(config)] if config is not None else []
    proc = subprocess.run(
        [str(SCHEMATHESIS), *pre, "run", f"{api_url}/openapi.json", "-H", f"Authorization: {token}",
         "--checks", "not_a_server_error,response_schema_conformance", "--max-examples", str(MAX_EXAMPLES),
         "--seed", "1", "--report-dir", str(out), *extra],
        capture_output=True, text=True, timeout=900, cwd=out,  # its cache stays out of the repo
    )
    lines = proc.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("API Operations")), max(0, len(lines) - 30))
    summary = "\n".join(lines[start:])
    print(f"\nschemathesis {'(ids bound to real resources)' if config else '(random ids)'}:\n{summary}")
    return proc, summary


@pytest.mark.skipif(not SCHEMATHESIS.exists(), reason="schemathesis not installed")
def test_schemathesis_finds_no_server_errors_or_schema_violations(api_url: str, api: Api, tmp_path: Path) -> None:
    """Every route of the running app (new ones included: the schema is read at run time), random ids."""
    # the session API closes event streams after 0.3 s (EVENTS_MAX_STREAM_S), so /events is fuzzed too
    proc, _ = _schemathesis(api_url, api, tmp_path)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


@pytest.mark.skipif(not SCHEMATHESIS.exists(), reason="schemathesis not installed")
def test_schemathesis_on_a_real_knowledge_base_document_and_task(api_url: str, api: Api, tmp_path: Path) -> None:
    """The same checks with the path ids bound to the user's own KB, document and task, so that
    requests get past the 404 into each route's own handling. DELETE is left out (it would
    remove the document the other operations need; the random-id run covers it). Event streams
    are in: the session API closes them after 0.3 s."""
    kb = api.create_kb("schemathesis")
    doc = api.upload(kb, name="fuzz.txt", data=b"Fuzzing target: a short note about tides and ferries.")
    (tmp_path / "schemathesis.toml").write_text(
        "[parameters]\n"
        f'"path.kb_id" = {kb}\n"path.document_id" = {doc["document_id"]}\n"path.task_id" = {doc["task_id"]}\n'
    )
    proc, _ = _schemathesis(api_url, api, tmp_path, "--exclude-method", "DELETE",
                            config=tmp_path / "schemathesis.toml")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_revoked_token_is_refused(api_url: str, services_env: dict[str, str]) -> None:
    import json
    import sys

    from tests.support import ROOT, child_env

    def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "rag_cli", *args], cwd=ROOT, input=stdin,
                              env=child_env(services_env), capture_output=True, text=True, timeout=60)

    token = json.loads(cli("create-user", "revocable").stdout)["token"]
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{api_url}/api/v1/knowledge-bases", headers=headers).status_code == 200
    dsn = services_env["DATABASE_URL"]
    assert sql_value(dsn, "SELECT count(*) FROM api_token t WHERE t::text LIKE '%' || $1 || '%'", token) == 0, \
        "the token is never stored in clear"
    assert sql_value(dsn, "SELECT count(*) FROM api_token WHERE token_sha256 = sha256(convert_to($1, 'UTF8'))",
                     token) == 1, "only its SHA-256"
    assert cli("revoke-token", token).returncode == 2  # never from argv (visible in ps)
    assert cli("revoke-token", "-", stdin=token).returncode == 0
    assert httpx.get(f"{api_url}/api/v1/knowledge-bases", headers=headers).status_code == 401
    assert cli("revoke-token", "-", stdin=token).returncode == 1  # already revoked
