"""Operator surfaces end to end: ``rag upload FOLDER`` against a running API + worker (429 honoured),
and both services' ``/metrics`` moving with it.

One API process of its own (a per-user in-flight cap of 2 and ``Retry-After: 1``, so the folder
upload meets 429 at once) and one worker serving ``/metrics`` on a free port.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner, Result

from rag_cli import app
from tests.e2e.conftest import WorkerFactory
from tests.support import Proc, child_env, free_port, poll, start, wait_consuming

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
FILES = {
    "a.md": "# Alpha\n\nThe alpha document talks about indexing queues.\n",
    "b.txt": "Bravo: a plain text note about dead-letter queues.\n",
    "sub/c.md": "# Charlie\n\nCharlie explains the outbox relay.\n",
    "sub/d.html": "<html><body><h1>Delta</h1><p>Delta covers metrics.</p></body></html>",
    "e.md": "# Echo\n\nEcho is about Retry-After.\n",
}


def scrape(url: str) -> Samples:
    r = httpx.get(url, timeout=10)
    r.raise_for_status()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def capped_api(services_env: dict[str, str], log_dir: Path) -> Iterator[tuple[str, Proc]]:
    """An API process of its own (not waited for: the test starts its worker meanwhile)."""
    port = free_port()
    env = child_env({**services_env, "KS_PORT": str(port), "MAX_IN_FLIGHT_TASKS_PER_USER": "2",
                     "IN_FLIGHT_RETRY_AFTER_S": "1"})
    proc = start("api-capped", "knowledge_service", env, log_dir)
    yield f"http://127.0.0.1:{port}", proc
    proc.stop()


def wait_ready(url: str, proc: Proc) -> None:
    def ready() -> bool:
        assert proc.alive(), f"API exited:\n{proc.tail()}"
        try:
            return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    poll(ready, timeout=120, interval=0.5, what="API ready")


def rag(*args: str, env: dict[str, str] | None = None) -> Result:
    """The ``rag`` command in-process (the entry point itself is run as a process by conftest)."""
    return CliRunner().invoke(app, list(args), env=env)


def test_rag_upload_folder_honours_429_and_metrics_move(
    capped_api: tuple[str, Proc], workers: WorkerFactory, tmp_path: Path,
) -> None:
    api_url, api_proc = capped_api
    metrics_port = free_port()
    worker = workers(wait=False, worker_metrics_port=str(metrics_port), worker_metrics_sample_s="0.5")
    worker_metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    user = f"ops-{free_port()}"
    token = json.loads(rag("create-user", user).stdout)["token"]
    made = rag("create-kb", "ops", "--user", user)
    assert made.exit_code == 0, made.output
    kb = json.loads(made.stdout)["kb_id"]
    folder = tmp_path / "docs"
    for rel, text in FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    (folder / ".hidden").write_text("not uploaded")
    wait_ready(api_url, api_proc)
    wait_consuming(worker)
    api_before, worker_before = scrape(f"{api_url}/metrics"), scrape(worker_metrics)

    user_env = {"RAG_API_URL": api_url, "RAG_TOKEN": token}
    up = rag("upload", str(folder), "--kb", str(kb), "--poll", "0.3", env=user_env)
    assert up.exit_code == 0, up.output
    assert "429" in up.stderr and "Retry-After" in up.stderr  # the cap (2) was met and waited out
    assert up.stdout.count("SUCCESS") == len(FILES)

    status = rag("status", "--kb", str(kb), "--json", env=user_env)
    docs = [json.loads(line) for line in status.stdout.splitlines()]
    assert sorted(d["filename"] for d in docs) == sorted(Path(f).name for f in FILES)
    assert {d["status"] for d in docs} == {"INDEXED"}
    again = rag("retry", str(docs[0]["task"]["task_id"]), env=user_env)  # SUCCESS cannot be retried: 409
    assert again.exit_code == 1 and "409" in again.stderr

    api_after, n = scrape(f"{api_url}/metrics"), len(FILES)
    assert value(api_after, "rag_uploads_total", result="202") - value(api_before, "rag_uploads_total",
                                                                       result="202") == n
    assert value(api_after, "rag_uploads_total", result="429") - value(api_before, "rag_uploads_total",
                                                                       result="429") >= 1
    assert ("rag_outbox_backlog", frozenset()) in api_after

    def worker_moved() -> Samples | None:
        s = scrape(worker_metrics)
        done = value(s, "rag_tasks_finished_total", status="SUCCESS", error_code="") - value(
            worker_before, "rag_tasks_finished_total", status="SUCCESS", error_code="")
        return s if done == n else None

    after = poll(worker_moved, timeout=30, what="worker counters for every document")
    for stage in ("download", "parse", "chunk", "embed", "write"):
        assert value(after, "rag_stage_duration_seconds_count", stage=stage) - value(
            worker_before, "rag_stage_duration_seconds_count", stage=stage) == n, stage
    assert value(after, "rag_embedded_chunks_total") - value(worker_before, "rag_embedded_chunks_total") >= n
    assert value(after, "rag_deliveries_total", outcome="ack") >= n
    assert ("rag_dlq_depth", frozenset()) in after
    assert ("rag_tasks_oldest_age_seconds", frozenset({("status", "RUNNING")})) in after

    # logs: JSON, one event per line; a claimed task's lines carry its ids, generation and attempt
    lines = [json.loads(x) for x in worker.log.read_text().splitlines() if x.startswith("{")]
    indexed = [x for x in lines if x["event"] == "task indexed"]
    assert len(indexed) == n
    for line in indexed + [x for x in lines if x["event"] == "task claimed"]:
        assert {"task_id", "document_id", "generation", "attempt"} <= line.keys(), line
    assert ("rag_queue_messages", frozenset({("queue", "rag.index.queue")})) in after
