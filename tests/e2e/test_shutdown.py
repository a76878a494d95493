"""Issue 8: SIGTERM stops a worker within 10 s whatever it is doing, and the next worker finishes
the abandoned document (one committed chunk set, attempt 2).

Mid-chunking: a 40 MB text of long Cyrillic words, so the sandbox child spends many seconds
chunking after parsing; "mid-chunking" is established from the child's CPU time (``/proc``)
against the CPU the same parse takes in this process. Its chunks are embedded by a fake
OpenAI-compatible server (this test is about stopping, not vectors). Mid-embedding: the local
model's forward passes, in a worker thread (``embedding_run`` recorded and the worker burning CPU).
Each test prints ``SHUTDOWN-TIMING`` lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from tests.e2e.conftest import WorkerFactory
from tests.e2e.test_hostile_files import _sandbox_children
from tests.support import (
    FAST,
    Api,
    Proc,
    assert_one_chunk_set,
    embedding_runs,
    poll,
    process_state,
    sql,
)

pytestmark = pytest.mark.e2e

EXIT_WITHIN_S = 10.0
#: These documents (600-700 chunks) stay on the single path they test (one claim, one embedding
#: run per attempt): above the default SPLIT_MIN_CHUNKS (512) they would be split into parts
#: (issue 31; a worker stopped inside a part: tests/e2e/test_parts.py). 2 x (300 + 1099 x 0.5)
#: stays under the start-up guard's CONSUMER_TIMEOUT_S.
SINGLE = {"split_min_chunks": "1100", **FAST}
_TICKS = os.sysconf("SC_CLK_TCK")


class _FakeEmbeddings(BaseHTTPRequestHandler):
    """``POST /v1/embeddings``: a deterministic unit vector of 384 floats per input text."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = []
        for i, text in enumerate(body["input"]):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
            v = np.random.default_rng(seed).standard_normal(384)
            data.append({"index": i, "embedding": (v / np.linalg.norm(v)).round(6).tolist()})
        payload = json.dumps({"data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_embeddings() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeEmbeddings)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _sigterm(proc: Proc, what: str) -> float:
    """SIGTERM ``proc``; seconds until it exited (polled; fails after 30 s)."""
    started = time.monotonic()
    proc.kill(signal.SIGTERM)
    poll(lambda: not proc.alive(), timeout=30, interval=0.05, what=f"{proc.name} to exit after SIGTERM")
    elapsed = time.monotonic() - started
    print(f"SHUTDOWN-TIMING {what}: exited {elapsed:.2f} s after SIGTERM (exit code {proc.popen.returncode})",
          flush=True)
    return elapsed


def _task(dsn: str, document_id: int) -> dict[str, Any]:
    return sql(dsn, "SELECT * FROM index_task WHERE document_id = $1", document_id)[0]



def long_word_text(lines: int = 20_000, seed: int = 3) -> bytes:
    """≈40 MB of UTF-8: lines of 8 words of 120 random Cyrillic letters (each word is one [UNK])."""
    rng = random.Random(seed)
    letters = "абвгдежзийклмнопрстуфхцчшщыэюя"
    return "\n".join(" ".join("".join(rng.choices(letters, k=120)) for _ in range(8))
                     for _ in range(lines)).encode()


def test_sigterm_mid_chunking(api: Api, workers: WorkerFactory, services_env: dict[str, str],
                              fake_embeddings: str) -> None:
    from task_service.pipeline.parse import parse_document

    dsn = services_env["DATABASE_URL"]
    data = long_word_text()
    started = time.process_time()
    parse_document(data, "long-words.txt")
    parse_cpu = time.process_time() - started
    env = {"embedding_provider": "openai", "embedding_base_url": fake_embeddings, "chunk_max_chars": "100000",
           **SINGLE}
    a = workers(**env)
    (child,) = poll(lambda: _sandbox_children(a.pid), timeout=60, what="parse sandbox child")
    kb = api.create_kb("shutdown-chunking")
    doc = api.upload(kb, name="long-words.txt", data=data)
    past_parsing = 1.3 * parse_cpu + 1.0
    poll(lambda: _cpu_s(child) >= past_parsing or not _sandbox_children(a.pid), timeout=300, interval=0.1,
         what="the sandbox child past parsing")
    child_cpu = _cpu_s(child)
    assert child_cpu >= past_parsing, "the child finished before it could be caught chunking"
    assert _task(dsn, doc["document_id"])["status"] == "RUNNING"
    assert embedding_runs(dsn, doc["document_id"]) == 0  # still extracting: chunks not handed over yet
    print(f"SHUTDOWN-TIMING mid-chunking: parse alone {parse_cpu:.1f} s CPU here; child at {child_cpu:.1f} s CPU",
          flush=True)

    assert _sigterm(a, "mid-chunking") < EXIT_WITHIN_S, a.tail()
    assert a.popen.returncode == 0, a.tail()
    assert process_state(child) in ("X", "Z"), "the sandbox child outlived its worker"
    assert "abandoning in-flight deliveries" in a.log.read_text(errors="replace")

    workers(**env)
    api.wait_terminal(doc["document_id"], timeout=600)
    assert_one_chunk_set(api, dsn, doc["document_id"])
    assert _task(dsn, doc["document_id"])["attempt"] == 2
    assert embedding_runs(dsn, doc["document_id"]) == 1


def test_sigterm_mid_embedding(api: Api, workers: WorkerFactory, services_env: dict[str, str]) -> None:
    from tests.support.bigtext import big_line

    dsn = services_env["DATABASE_URL"]
    a = workers(**SINGLE)
    kb = api.create_kb("shutdown-embedding")
    paragraphs = "\n\n".join(big_line(1_500, seed=i) for i in range(300))  # ≈ 300 chunks for the local model
    doc = api.upload(kb, name="embed-me.txt", data=paragraphs.encode())
    poll(lambda: embedding_runs(dsn, doc["document_id"]) >= 1, timeout=300, interval=0.1, what="embedding started")
    cpu_then = _cpu_s(a.pid)
    poll(lambda: _cpu_s(a.pid) >= cpu_then + 1.0, timeout=60, interval=0.1, what="forward passes running")
    assert _task(dsn, doc["document_id"])["status"] == "RUNNING"

    assert _sigterm(a, "mid-embedding") < EXIT_WITHIN_S, a.tail()
    assert a.popen.returncode == 0, a.tail()  # a clean exit, not an abort in a thread left running

    workers(**SINGLE)
    api.wait_terminal(doc["document_id"], timeout=600)
    assert_one_chunk_set(api, dsn, doc["document_id"])
    assert _task(dsn, doc["document_id"])["attempt"] == 2
    assert embedding_runs(dsn, doc["document_id"]) == 2  # the abandoned run's and the one that committed
