"""A big document in parts (issue 31, ARCHITECTURE.md "Flow 3") through real processes: the API,
workers with a small ``SPLIT_MIN_CHUNKS`` / ``PART_CHUNKS`` (set in their environment), real
SIGSTOP / SIGKILL and a partition (the TCP proxies of ``test_partitions``); assertions read the
database (chunks, ``embedding_run`` rows per part, the split's staged rows).
"""

from __future__ import annotations

import signal
from typing import Any

import pytest

from tests.e2e.conftest import WorkerFactory
from tests.e2e.test_partitions import RIVAL_BOUND_S, SHORT, Proxies, light, proxies  # noqa: F401 (its fixtures)
from tests.support import Api, Proc, assert_one_chunk_set, poll, queue_depth, sql, sql_value, wait_stopped
from tests.support.bigtext import big_line

pytestmark = pytest.mark.e2e

#: ~20 KB of short words: about 30 chunks, so 8 / 6 make about 5 parts.
PARTS = {"split_min_chunks": "8", "part_chunks": "6"}
# Short lock/heartbeat timings (as in test_recovery) so a dead worker's part lock expires in seconds.
FAST = {"lock_ttl_s": "4", "lock_renew_s": "1", "heartbeat_s": "1", "lock_retry_delay_s": "1",
        "amqp_heartbeat_s": "2"}
#: One delivery at a time: a worker stopped inside a part holds that part only.
ONE = {"prefetch": "1"}


def _text(seed: int) -> bytes:
    return big_line(20_000, seed=seed).encode()


def _task_id(dsn: str, document_id: int) -> int:
    return int(sql_value(dsn, "SELECT id FROM index_task WHERE document_id = $1", document_id))


def _parts(dsn: str, task_id: int) -> dict[str, int]:
    """``{status: count}`` of the task's ``index_part`` rows (empty once the split is gone)."""
    rows = sql(dsn, "SELECT status, count(*) AS n FROM index_part WHERE task_id = $1 GROUP BY status", task_id)
    return {r["status"]: int(r["n"]) for r in rows}


def _runs_per_part(dsn: str, document_id: int) -> dict[int | None, int]:
    """``embedding_run`` rows of the document by part (None: the single path)."""
    rows = sql(dsn, "SELECT part, count(*) AS n FROM embedding_run WHERE document_id = $1 GROUP BY part", document_id)
    return {r["part"]: int(r["n"]) for r in rows}


def _staged(dsn: str, task_id: int) -> dict[str, int]:
    """Rows of the task's split still in the database, per table."""
    out = {}
    for table in ("index_split", "index_part", "staged_chunk", "staged_vector"):
        out[table] = int(sql_value(dsn, f"SELECT count(*) FROM {table} WHERE task_id = $1", task_id))
    out["outbox"] = int(sql_value(dsn, "SELECT count(*) FROM outbox WHERE published_at IS NULL AND part IS NOT NULL"
                                       " AND task_id = $1", task_id))
    return out


def _split_into(dsn: str, task_id: int) -> int:
    return int(poll(lambda: sql_value(dsn, "SELECT parts FROM index_split WHERE task_id = $1", task_id),
                    timeout=120, what="the document split"))


def _start(workers: WorkerFactory, **env: str) -> Proc:
    return workers(**{**PARTS, **FAST, **env})


def test_a_big_document_is_indexed_through_parts_as_one_contiguous_chunk_set(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    _start(workers)
    _start(workers)
    kb = api.create_kb()
    doc = api.upload(kb, name="big-in-parts.txt", data=_text(1))
    final = api.wait_terminal(doc["document_id"], timeout=240)
    assert final["status"] == "INDEXED", (final["error_message"], final["task"])
    ids = assert_one_chunk_set(api, dsn, doc["document_id"])
    parts = -(-len(ids) // 6)
    assert len(ids) >= 8 and parts >= 2, len(ids)
    # every part embedded once, by a part run (none by the single path), and nothing left staged
    assert _runs_per_part(dsn, doc["document_id"]) == dict.fromkeys(range(parts), 1)
    task_id = _task_id(dsn, doc["document_id"])
    assert not any(_staged(dsn, task_id).values()), _staged(dsn, task_id)
    text = " ".join(c["content"] for c in api.chunks(doc["document_id"]))
    assert text.split()[:5] == _text(1).decode().split()[:5]


def test_a_worker_killed_inside_a_part_loses_that_part_only(
    api: Api, workers: WorkerFactory, services_env: dict[str, str]
) -> None:
    dsn = services_env["DATABASE_URL"]
    a = _start(workers, rag_fault_points="during_embed=stop", **ONE)  # freezes in its first part
    kb = api.create_kb()
    doc = api.upload(kb, name="killed-in-a-part.txt", data=_text(2))
    task_id = _task_id(dsn, doc["document_id"])
    parts = _split_into(dsn, task_id)
    wait_stopped(a)
    frozen = _runs_per_part(dsn, doc["document_id"])
    assert sum(frozen.values()) == 1, frozen  # recorded its embedding run, then froze
    (killed_part,) = frozen
    _start(workers)  # does every other part meanwhile
    poll(lambda: _parts(dsn, task_id).get("DONE") == parts - 1 or None, timeout=240, what="the other parts done")
    a.kill(signal.SIGKILL)
    a.popen.wait(30)
    final = api.wait_terminal(doc["document_id"], timeout=240)
    assert final["status"] == "INDEXED", (final["error_message"], final["task"])
    assert_one_chunk_set(api, dsn, doc["document_id"])
    # the killed part was redone (its lost attempt's row + the redo's); the DONE ones never again
    expected: dict[int | None, int] = {**dict.fromkeys(range(parts), 1), killed_part: 2}
    assert _runs_per_part(dsn, doc["document_id"]) == expected
    assert not any(_staged(dsn, task_id).values()), _staged(dsn, task_id)


@pytest.mark.parametrize("change", ["delete", "replace"])
def test_a_delete_or_replacement_while_parts_run_leaves_nothing_staged(
    api: Api, workers: WorkerFactory, services_env: dict[str, str], change: str
) -> None:
    dsn = services_env["DATABASE_URL"]
    a = _start(workers, rag_fault_points="during_embed=stop", **ONE)
    kb = api.create_kb()
    doc = api.upload(kb, name=f"{change}-while-parts-run.txt", data=_text(3 if change == "delete" else 4))
    doc_id = doc["document_id"]
    task_id = _task_id(dsn, doc_id)
    _split_into(dsn, task_id)
    wait_stopped(a)  # inside part 0's embedding, the other parts waiting in the queue
    assert _staged(dsn, task_id)["staged_chunk"] > 0
    if change == "delete":
        assert api.http.delete(f"/api/v1/documents/{doc_id}").status_code == 204
    else:
        r = api.http.put(f"/api/v1/documents/{doc_id}/content",
                         files={"file": ("v2.txt", b"The second version is short.", "text/plain")})
        assert r.status_code == 202, r.text
    assert not any(_staged(dsn, task_id).values()), _staged(dsn, task_id)  # at once, by the change itself
    a.kill(signal.SIGCONT)  # the frozen part run resumes and is fenced out
    b = _start(workers)  # takes the other parts' messages (and the new version's)
    if change == "replace":
        final: dict[str, Any] = api.wait_terminal(doc_id, timeout=240)
        assert final["status"] == "INDEXED" and final["task"]["generation"] == 2, final
        assert [c["content"] for c in api.chunks(doc_id)] == ["The second version is short."]
        assert_one_chunk_set(api, dsn, doc_id)
    poll(lambda: sql_value(dsn, "SELECT count(*) FROM delivery_skip WHERE task_id = $1 AND reason IN"
                                " ('stale_generation', 'task_missing', 'not_runnable')", task_id) or None,
         timeout=120, what="late part messages skipped")
    assert a.alive() and b.alive(), a.tail()
    assert not any(_staged(dsn, task_id).values()), _staged(dsn, task_id)
    assert sql_value(dsn, "SELECT count(*) FROM document_chunk WHERE document_id = $1", doc_id) == (
        0 if change == "delete" else 1)


def test_a_worker_partitioned_inside_the_swap_loses_that_part_only(
    api: Api, workers: WorkerFactory, services_env: dict[str, str],
    light: dict[str, str], proxies: Proxies,  # noqa: F811 (the imported fixtures)
) -> None:
    """A does every part and stops inside the last one's commit (``in_swap``: its transaction
    holds the document row and the part row), then is partitioned from all four services.
    PostgreSQL ends its silent session (``DB_IDLE_IN_TRANSACTION_TIMEOUT_S``): the swap rolls
    back, the served version stays; B redoes that part only and swaps. A's late commit, after the
    heal, changes nothing."""
    dsn = services_env["DATABASE_URL"]
    a = workers(rag_fault_points="in_swap=stop", **proxies.env(services_env), **SHORT, **light, **PARTS)
    kb = api.create_kb()
    doc = api.upload(kb, name="cut-in-the-swap.txt", data=_text(5))
    task_id = _task_id(dsn, doc["document_id"])
    parts = _split_into(dsn, task_id)
    wait_stopped(a)
    proxies.freeze()
    a.kill(signal.SIGCONT)
    b = workers(**SHORT, **light, **PARTS)
    poll(lambda: api.document(doc["document_id"])["status"] == "INDEXED", timeout=RIVAL_BOUND_S, interval=0.5,
         what="the rival redoes the last part and swaps while A is cut off")
    runs = _runs_per_part(dsn, doc["document_id"])
    assert sum(runs.values()) == parts + 1 and max(runs.values()) == 2, runs  # only A's last part was redone
    proxies.heal()
    b.stop()
    assert_one_chunk_set(api, dsn, doc["document_id"])
    assert not any(_staged(dsn, task_id).values()), _staged(dsn, task_id)
    poll(lambda: queue_depth("rag.index.queue") == 0, timeout=30, what="queue drained")
    assert _runs_per_part(dsn, doc["document_id"]) == runs  # A's late run changed nothing
