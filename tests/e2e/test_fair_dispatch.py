"""Fair dispatch, end to end: user A queues 200 documents, then user B uploads one; B's document
is indexed after at most K of A's, A's 200 are all indexed, and no user ever has more than K
tasks in the broker or running (K = 2 x DISPATCH_WORKERS = 2: one worker, prefetch 1). The
session's API runs the product defaults of both (tests/conftest.py TEST_OVERRIDES)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from tests.e2e.conftest import WorkerFactory, _create_user
from tests.support import Api, child_env, free_port, mgmt_queue, poll, sql, sql_value

K = 2
A_DOCS = 200


def _user(url: str, env: dict[str, str], name: str) -> Api:
    return Api(url, _create_user(child_env(env), f"{name}-{free_port()}"))


def test_one_users_backlog_does_not_delay_another_user(
    api_url: str, services_env: dict[str, str], workers: WorkerFactory
) -> None:
    dsn = services_env["DATABASE_URL"]
    workers(dispatch_workers="1", prefetch="1")
    a, b = _user(api_url, services_env, "fair-a"), _user(api_url, services_env, "fair-b")
    kb_a, kb_b = a.create_kb("a"), b.create_kb("b")
    user_a = sql_value(dsn, "SELECT user_id FROM knowledge_base WHERE id = $1", kb_a)
    peak = {"dispatched": 0, "queue": 0}

    def sample() -> None:
        per_user = sql(dsn, "SELECT user_id, count(*) AS n FROM index_task WHERE dispatched_at IS NOT NULL"
                            " AND status IN ('WAITING','RETRYING','RUNNING') GROUP BY user_id")
        peak["dispatched"] = max([peak["dispatched"], *(int(r["n"]) for r in per_user)])
        q = mgmt_queue("rag.index.queue")
        peak["queue"] = max(peak["queue"], int(q.get("messages", 0)))

    def upload_a(i: int) -> None:
        a.upload(kb_a, name=f"a{i}.txt", data=f"Ferry timetable note {i} for the harbour.".encode())
        if i % 20 == 0:
            sample()

    with ThreadPoolExecutor(4) as pool:  # 4 uploads at a time: the API's work, not the test's, is timed
        list(pool.map(upload_a, range(A_DOCS)))
    t0 = time.monotonic()
    doc_b = b.upload(kb_b, name="b.txt", data=b"A single note about the lighthouse keeper.")

    def b_indexed() -> bool:
        sample()
        return sql_value(dsn, "SELECT status FROM index_task WHERE id = $1", doc_b["task_id"]) == "SUCCESS"

    poll(b_indexed, timeout=120, interval=0.1, what="B's document indexed")
    [b_task] = sql(dsn, "SELECT create_time, end_time, extract(epoch FROM end_time - create_time) AS waited"
                        " FROM index_task WHERE id = $1", doc_b["task_id"])
    # A's documents that finished while B's waited (one was possibly running when B arrived)
    a_ran_before_b = sql_value(
        dsn, "SELECT count(*) FROM index_task WHERE user_id = $1 AND end_time > $2 AND end_time < $3",
        user_a, b_task["create_time"], b_task["end_time"])
    a_done_before = sql_value(dsn, "SELECT count(*) FROM index_task WHERE user_id = $1 AND end_time < $2",
                              user_a, b_task["create_time"])
    waited_s = float(b_task["waited"])

    def all_a_indexed() -> bool:
        sample()
        return sql_value(dsn, "SELECT count(*) FROM index_task WHERE user_id = $1 AND status = 'SUCCESS'",
                         user_a) == A_DOCS

    poll(all_a_indexed, timeout=600, interval=0.5, what=f"A's {A_DOCS} documents indexed")
    total_s = time.monotonic() - t0
    print(f"\nfairness: B waited {waited_s:.2f} s (upload to indexed); {a_ran_before_b} of A's documents finished "
          "meanwhile "
          f"({a_done_before} had finished before B uploaded); A's backlog drained {total_s:.1f} s after B's "
          f"upload; peak dispatched per user {peak['dispatched']}, peak rag.index.queue depth {peak['queue']}")
    assert a_ran_before_b <= K, f"{a_ran_before_b} of A's documents ran before B's"
    assert peak["dispatched"] <= K
    assert peak["queue"] <= 2 * K, "the broker holds at most K messages per user"
    assert sql_value(dsn, "SELECT count(*) FROM document_info WHERE kb_id = $1 AND status = 'INDEXED'", kb_a) == A_DOCS
    # nothing twice: one embedding run per document of A
    assert sql_value(dsn, "SELECT count(*) FROM embedding_run r JOIN index_task t ON t.id = r.task_id"
                          " WHERE t.user_id = $1", user_a) == A_DOCS
