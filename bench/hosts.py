"""Issue 19 item 5: workers on many (simulated) hosts against a remote 200 ms embedding model.

``python -m bench.hosts [--smoke]`` gives every worker a host of its own: a Linux network namespace
(``ip netns``) joined to this one by a veth pair (10.213.<h>.1 here, 10.213.<h>.2 there). A worker
sees only its namespace's loopback and the veth: it reaches PostgreSQL, RabbitMQ, Redis, the S3
server and the embedding stand-in through ``socat`` forwarders listening on this side's veth
address (every byte crosses the veth, as between hosts; the services themselves stay on loopback).
The stand-in (:mod:`bench.fake_embeddings`) answers every ``/v1/embeddings`` request after a fixed
200 ms, like a remote model.

In one run, on one stack: 1, 2, 4 and 8 workers (on hosts 1..n) each index ``DOCS_PER_WORKER`` x n
distinct text documents of ``WORDS`` words in a fresh KB (uploaded by 8 concurrent clients, faster
than the workers index them; embedding cache off, batch size ``BATCH``). Throughput = chunks /
seconds from the first claim to the last SUCCESS; the scaling is each throughput over the
one-worker one (goal: 4 workers >= 3.6x). Per step the bench samples the
machine's CPU (busy share of all cores, from ``/proc/stat``) and the CPU seconds the workers (and
their parse sandboxes) used per second: the first to reach its ceiling is what saturates. Writes
the ``hosts`` section of bench/RESULTS.md (``--smoke``: 1 and 2 workers, 2 documents each, print only).
Needs root, ``ip`` and ``socat`` (``make netns-tools``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import httpx

from bench.stack import LOGS, NO_CACHE, ROOT, Stack, children, indexing_span, upload_all
from bench.workers import documents, fake_server, words
from shared.settings import KnowledgeSettings
from tests.support import Proc, free_port

LATENCY_MS = 200
WORDS = 2_000
BATCH = 4
DOCS_PER_WORKER = 15
SUBNET = "10.213"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass
class Host:
    """One simulated host: namespace ``ns``, veth ``outside`` (here) / ``inside`` (there), and the
    socat forwarders on this side's address."""

    index: int
    tag: str
    forwarders: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def ns(self) -> str:
        return f"rag{self.tag}h{self.index}"

    @property
    def outside(self) -> str:  # interface names: at most 15 characters
        return f"rh{self.tag}x{self.index}"

    @property
    def address(self) -> str:
        """This side's veth address: what the worker on the host connects to."""
        return f"{SUBNET}.{self.index}.1"

    def create(self, ports: list[int]) -> None:
        _ip("netns", "add", self.ns)
        _ip("link", "add", self.outside, "type", "veth", "peer", "name", "eth0", "netns", self.ns)
        _ip("addr", "add", f"{self.address}/30", "dev", self.outside)
        _ip("link", "set", self.outside, "up")
        _ip("-n", self.ns, "addr", "add", f"{SUBNET}.{self.index}.2/30", "dev", "eth0")
        _ip("-n", self.ns, "link", "set", "eth0", "up")
        _ip("-n", self.ns, "link", "set", "lo", "up")
        for port in ports:
            self.forwarders.append(subprocess.Popen(
                ["socat", f"TCP-LISTEN:{port},bind={self.address},reuseaddr,fork", f"TCP:127.0.0.1:{port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def destroy(self) -> None:
        for f in self.forwarders:
            f.terminate()
            f.wait(10)
        subprocess.run(["ip", "link", "del", self.outside], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with every service address replaced by this side's veth address."""
        out = dict(env)
        for key in ("DATABASE_URL", "AMQP_URL", "REDIS_URL", "EMBEDDING_BASE_URL"):
            u = urlsplit(out[key])
            netloc = u.netloc.rsplit("@", 1)
            hostport = netloc[-1].replace("127.0.0.1", self.address).replace("localhost", self.address)
            out[key] = urlunsplit(u._replace(netloc="@".join([*netloc[:-1], hostport])))
        out["S3_ENDPOINT"] = out["S3_ENDPOINT"].replace("127.0.0.1", self.address).replace("localhost", self.address)
        return out


def service_ports(env: dict[str, str]) -> list[int]:
    """The TCP ports of PostgreSQL, RabbitMQ, Redis, S3 and the embedding endpoint named in ``env``."""
    ports = [urlsplit(env[k]).port or d for k, d in
             (("DATABASE_URL", 5432), ("AMQP_URL", 5672), ("REDIS_URL", 6379), ("EMBEDDING_BASE_URL", 80))]
    return [*ports, int(env["S3_ENDPOINT"].rsplit(":", 1)[1])]


def start_worker(host: Host, env: dict[str, str], name: str) -> Proc:
    log = open(LOGS / f"{name}.log", "ab")
    popen = subprocess.Popen(["ip", "netns", "exec", host.ns, sys.executable, "-m", "task_service"], cwd=ROOT,
                             env={**host.env(env), "WORKER_NAME": name}, stdout=log, stderr=subprocess.STDOUT)
    return Proc(name, popen, LOGS / f"{name}.log", {"name": name})


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all cores since boot, from ``/proc/stat``."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def tree_cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) of ``pids`` and their children (the sandboxes)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids + [c for p in pids for c in children(p)]:
        try:
            with open(f"/proc/{pid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            total += (int(parts[11]) + int(parts[12])) / tick
        except (OSError, ValueError, IndexError):
            continue
    return total


@dataclass
class Step:
    workers: int
    documents: int
    chunks: int
    chunks_per_s: float
    cpu_busy: float  # share of all cores busy (0..1), whole machine
    worker_cpu: float  # CPU seconds per second used by the workers and their sandboxes
    task_s: float  # mean seconds from claim to SUCCESS of one document
    busy: float  # share of the span the workers spent inside a task (1 - idle)


def _worker_pids(procs: list[Proc]) -> list[int]:
    """The python processes under ``ip netns exec`` (it execs: the pid is the worker's)."""
    return [p.pid for p in procs]


async def wait_consuming(procs: list[Proc], limit_s: float = 300) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for p in procs:
            if not p.alive():
                raise RuntimeError(f"{p.name} exited:\n{p.tail()}")
        if all('"consuming"' in p.log.read_text(errors="replace") for p in procs):
            return
        await asyncio.sleep(0.3)
    raise RuntimeError("workers not consuming")


async def upload_concurrently(http: httpx.AsyncClient, kb_id: int, files: list[tuple[str, bytes]],
                              clients: int = 8) -> list[int]:
    """:func:`upload_all` from ``clients`` concurrent uploaders: the uploads outpace the workers, so
    the indexing span measures the workers, not one client's upload rate."""
    parts = [files[i::clients] for i in range(clients)]
    ids = await asyncio.gather(*(upload_all(http, kb_id, part) for part in parts if part))
    return [i for part in ids for i in part]


async def one_step(stack: Stack, http: httpx.AsyncClient, hosts: list[Host], env: dict[str, str], n: int,
                   per_worker: int, words_each: int) -> Step:
    procs = [start_worker(hosts[i], env, f"{stack.db}-h{i + 1}-n{n}") for i in range(n)]
    try:
        await wait_consuming(procs)
        kb = await stack.create_kb(http, f"hosts-{n}")
        files = documents(words(), per_worker * n, words_each, seed=1000 + n)
        busy0, total0 = cpu_busy()
        cpu0, t0 = tree_cpu_s(_worker_pids(procs)), time.monotonic()
        ids = await upload_concurrently(http, kb, files)
        by = await stack.wait_indexed(ids)
        busy1, total1 = cpu_busy()
        cpu1, t1 = tree_cpu_s(_worker_pids(procs)), time.monotonic()
        if by.get("FAILED"):
            raise RuntimeError(f"{by['FAILED']} documents FAILED; see {LOGS}")
        span, chunks = await indexing_span(stack.dsn, ids)
        task_s = float(await stack.fetchval(
            "SELECT avg(extract(epoch FROM end_time - start_time)) FROM index_task"
            " WHERE document_id = ANY($1::bigint[]) AND status = 'SUCCESS'", ids))
        return Step(n, len(ids), chunks, chunks / span, (busy1 - busy0) / max(1.0, total1 - total0),
                    (cpu1 - cpu0) / (t1 - t0), task_s, task_s * len(ids) / (n * span))
    finally:
        for p in procs:
            await asyncio.to_thread(p.stop)


async def run(counts: list[int], per_worker: int, words_each: int) -> list[Step]:
    port = free_port()
    server = await fake_server(port)
    tag = str(os.getpid() % 100000)
    hosts = [Host(i + 1, tag) for i in range(max(counts))]
    steps: list[Step] = []
    try:
        async with Stack("hosts") as stack:
            env = stack.child_env(embedding_provider="openai", embedding_base_url=f"http://127.0.0.1:{port}",
                                  embedding_model="all-MiniLM-L6-v2", embedding_batch_size=str(BATCH),
                                  dispatch_workers=str(max(counts)), prefetch="1",
                                  **NO_CACHE)
            env.setdefault("S3_ENDPOINT", KnowledgeSettings().s3_endpoint)  # else read from .env
            for h in hosts:
                h.create(service_ports(env))
            url = await stack.start_api(embedding_provider="openai", dispatch_workers=str(max(counts)),
                                        max_in_flight_tasks_per_user="1000")
            _, token = await stack.create_user()
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                         timeout=120) as http:
                for n in counts:
                    step = await one_step(stack, http, hosts, env, n, per_worker, words_each)
                    steps.append(step)
                    print(f"{n} workers: {step.chunks_per_s:.1f} chunks/s, {step.task_s:.2f} s per document, workers "
                          f"busy {step.busy:.0%}, CPU {step.cpu_busy:.0%} busy, workers {step.worker_cpu:.2f} CPU-s/s",
                          flush=True)
    finally:
        for h in hosts:
            h.destroy()
        server.terminate()
        server.wait(10)
    return steps


def report(steps: list[Step], per_worker: int, words_each: int, load: tuple[float, float]) -> str:
    base = steps[0].chunks_per_s
    four = next((s for s in steps if s.workers == 4), None)
    goal = "" if four is None else (" — goal met" if four.chunks_per_s / base >= 3.6 else " — **goal not met**")
    rows = ["| workers (hosts) | documents | chunks | chunks/s | × one worker | s per document | workers busy "
            "| machine CPU busy | workers' CPU-s/s |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows += [f"| {s.workers} | {s.documents} | {s.chunks} | {s.chunks_per_s:.1f} | {s.chunks_per_s / base:.2f} | "
             f"{s.task_s:.2f} | {s.busy:.0%} | {s.cpu_busy:.0%} | {s.worker_cpu:.2f} |" for s in steps]
    return "\n".join([
        f"`python -m bench.hosts`: each worker in a network namespace of its own (a simulated host), reaching the "
        f"services over a veth pair (socat forwarders); an OpenAI-compatible embedding stand-in answering after "
        f"{LATENCY_MS} ms, batch size {BATCH}, cache off; {per_worker} documents of {words_each:,} words per worker, "
        f"prefetch 1; chunks/s from the first claim to the last SUCCESS, all steps in one run on "
        f"{os.cpu_count()} cores (load average {load[0]:.1f} before, {load[1]:.1f} after){goal}. *s per document*: "
        "mean claim → SUCCESS (it grows when something the workers share saturates); *workers busy*: share of the "
        "span the workers spent inside a task (the rest: waiting for a delivery).",
        "",
        *rows,
        "",
        saturation(steps),
    ])


def saturation(steps: list[Step]) -> str:
    """What saturates first, read off the steps: the growth of the per-document time (a shared
    resource queueing) and the machine's CPU share per worker (where the one machine would run out)."""
    first, last = steps[0], steps[-1]
    growth = last.task_s / first.task_s
    per_worker = last.cpu_busy / last.workers
    ceiling = 1 / per_worker if per_worker > 0 else float("inf")
    return (f"What saturates first: from {first.workers} to {last.workers} workers the time per document went "
            f"{first.task_s:.2f} → {last.task_s:.2f} s (×{growth:.2f}); it is the model calls' fixed latency plus "
            f"what the workers share (PostgreSQL, Redis, the broker, S3). The machine's CPU was "
            f"{last.cpu_busy:.0%} busy at {last.workers} workers, about {per_worker:.1%} per worker, so these "
            f"simulated hosts, which share its {os.cpu_count()} cores, would run out of CPU near {ceiling:.0f} "
            f"workers; before that, the workers lose only the gap between an ack and the next delivery at "
            f"prefetch 1 (busy {first.busy:.0%} → {last.busy:.0%}).")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="1 and 2 workers, 2 documents each, print only (CI)")
    args = ap.parse_args()
    missing = [t for t in ("ip", "socat") if shutil.which(t) is None]
    if os.geteuid() != 0 or missing:
        sys.exit(f"bench.hosts needs root and {', '.join(missing) or 'ip, socat'} (make netns-tools)")
    counts, per_worker, words_each = ([1, 2], 2, 400) if args.smoke else ([1, 2, 4, 8], DOCS_PER_WORKER, WORDS)
    before = os.getloadavg()[0]
    steps = asyncio.run(run(counts, per_worker, words_each))
    text = report(steps, per_worker, words_each, (before, os.getloadavg()[0]))
    print(text)
    if not args.smoke:
        from bench.report import write_section

        write_section("hosts", text)


if __name__ == "__main__":
    main()
