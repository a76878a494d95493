"""Both services as real processes: HTTP in, database out."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import (
    MGMT,
    MGMT_AUTH,
    ROOT,
    VHOST,
    Api,
    Proc,
    child_env,
    consumer_count,
    free_port,
    poll,
    sql,
    start,
    wait_consuming,
)


@pytest.fixture(scope="session")
def api_url(services_env: dict[str, str], log_dir: Path) -> Iterator[str]:
    port = free_port()
    # event streams close after 0.3 s: a fuzzer's request to an /events route never waits long
    env = child_env({**services_env, "KS_PORT": str(port), "EVENTS_MAX_STREAM_S": "0.3"})
    proc = start("knowledge_service", "knowledge_service", env, log_dir)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.alive(), f"API exited:\n{proc.tail()}"
        try:
            return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    poll(ready, timeout=120, interval=0.5, what="API ready")
    yield url
    proc.stop()


def _create_user(env: dict[str, str], name: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "rag_cli", "create-user", name],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True,
    ).stdout
    return str(json.loads(out)["token"])


@pytest.fixture
def make_user(api_url: str, services_env: dict[str, str], request: pytest.FixtureRequest) -> Callable[[str], Api]:
    counter = iter(range(1000))

    def make(suffix: str = "") -> Api:
        name = f"{request.node.name[:40]}-{suffix or next(counter)}-{free_port()}"
        return Api(api_url, _create_user(child_env(services_env), name))

    return make


@pytest.fixture
def api(make_user: Callable[[str], Api]) -> Api:
    return make_user("a")


@pytest.fixture(autouse=True)
def empty_queues(services_env: dict[str, str]) -> None:
    """Each test starts with empty queues and no pending outbox rows: a message a previous test
    left (e.g. an upload nobody indexed) must not reach this test's fault-injected worker first."""
    sql(services_env["DATABASE_URL"], "UPDATE outbox SET published_at = now(),"
        " released_at = coalesce(released_at, now()) WHERE published_at IS NULL")
    with httpx.Client(base_url=MGMT, auth=MGMT_AUTH, timeout=30) as c:
        for q in c.get(f"/api/queues/{VHOST}").raise_for_status().json():
            if q["name"].startswith("rag.index."):
                c.delete(f"/api/queues/{VHOST}/{q['name']}/contents")


WorkerFactory = Callable[..., Proc]


@pytest.fixture
def workers(services_env: dict[str, str], log_dir: Path, request: pytest.FixtureRequest) -> Iterator[WorkerFactory]:
    """Start worker processes (``workers(**env_overrides)``); all are stopped after the test."""
    started: list[Proc] = []

    def factory(wait: bool = True, **overrides: str) -> Proc:
        n = len(started)
        name = f"worker-{request.node.name[:40]}-{n}"
        env = child_env({**services_env, "WORKER_NAME": name, **{k.upper(): v for k, v in overrides.items()}})
        proc = start(name, "task_service", env, log_dir)
        started.append(proc)
        if wait:
            wait_consuming(proc)
        return proc

    yield factory
    for p in started:
        p.stop()
    poll(lambda: consumer_count() == 0 or None, timeout=30, interval=0.05, what="consumers gone")  # type: ignore[arg-type]
