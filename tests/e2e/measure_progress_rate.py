"""Progress update rate on the 3.2 MB novel, seen through the task's event stream (issue 12).

Not collected by default (name does not start with ``test_``): run it on purpose with
``pytest tests/e2e/measure_progress_rate.py -s``. It takes a few minutes (the novel is embedded on the CPU).
"""

from __future__ import annotations

import itertools
import json
import time

import httpx

from tests.e2e.conftest import WorkerFactory
from tests.support import CORPUS, Api


def test_measure_progress_rate_on_the_novel(api: Api, workers: WorkerFactory) -> None:
    workers()
    kb = api.create_kb()
    up = api.upload(kb, CORPUS / "book-war-and-peace-1225p.txt")
    events: list[tuple[float, dict[str, object]]] = []
    with api.http.stream("GET", f"/api/v1/tasks/{up['task_id']}/events",
                         timeout=httpx.Timeout(60, read=600)) as r:
        name = ""
        for line in r.iter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and name == "task":
                events.append((time.monotonic(), json.loads(line.split(":", 1)[1])))
    embedding = [(t, e) for t, e in events if e["status"] == "RUNNING" and e["stage"] == "EMBEDDING"]
    stages = []
    for _, e in events:
        if not stages or stages[-1] != (e["status"], e["stage"]):
            stages.append((e["status"], e["stage"]))
    span = embedding[-1][0] - embedding[0][0] if len(embedding) > 1 else 0.0
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(embedding)]
    distinct = len({e["progress"] for _, e in embedding})
    print(f"\nPROGRESS-RATE stages={stages}")
    print(f"PROGRESS-RATE events={len(events)} embedding_events={len(embedding)} distinct_progress={distinct} "
          f"embedding_span_s={span:.1f} updates_per_s={len(embedding) / span if span else 0:.2f} "
          f"min_gap_s={min(gaps) if gaps else 0:.2f} median_gap_s={sorted(gaps)[len(gaps) // 2] if gaps else 0:.2f}")
    doc = api.document(up["document_id"])
    print(f"PROGRESS-RATE chunks={doc['chunk_count']} status={doc['status']}")
    assert doc["status"] == "INDEXED"
