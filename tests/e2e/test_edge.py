"""Issue 28, item 2: request limits at the edge of the real API process (knowledge_service/edge.py).

A 16 MB header gets its 431 in under a second, ``/healthz`` is served while an attacker streams a
huge header, the URL and header limits hold to the byte, a slow head gets a 408, and request
bodies in progress are bounded per client (429) and in all (503). One API process of its own,
with small body caps and a short header timeout.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import child_env, free_port, poll, start
from tests.support.edge_client import huge_header, raw_request

MB = 1024 * 1024
HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def edge_port(services_env: dict[str, str], log_dir: Path) -> Iterator[int]:
    port = free_port()
    env = child_env({**services_env, "KS_PORT": str(port), "KS_HEADER_TIMEOUT_S": "1",
                     "KS_MAX_BODIES_PER_CLIENT": "2", "KS_MAX_BODIES": "3"})
    proc = start("knowledge_service-edge", "knowledge_service", env, log_dir)

    def ready() -> bool:
        assert proc.alive(), f"API exited:\n{proc.tail()}"
        try:
            return httpx.get(f"http://{HOST}:{port}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    poll(ready, timeout=120, interval=0.5, what="API ready")
    yield port
    proc.stop()


def _status(raw: bytes) -> int:
    assert raw.startswith(b"HTTP/1.1 "), raw[:200]
    return int(raw.split(b" ", 2)[1])


def test_a_16_mb_header_gets_431_in_under_a_second(edge_port: int) -> None:
    got = huge_header(HOST, edge_port, 16 * MB)
    assert got.status == 431
    assert got.seconds < 1.0, got
    assert got.sent < 16 * MB  # answered while the client was still sending


def test_healthz_is_served_while_an_attacker_sends_a_huge_header(edge_port: int) -> None:
    answers: list[int | None] = []
    attacker = threading.Thread(target=lambda: answers.append(huge_header(HOST, edge_port, 256 * MB).status))
    attacker.start()
    for _ in range(20):
        c = http.client.HTTPConnection(HOST, edge_port, timeout=5)
        c.request("GET", "/healthz")
        assert c.getresponse().status == 200
        c.close()
    attacker.join(30)
    assert answers == [431]


def test_url_and_header_limits_hold_to_the_byte(edge_port: int) -> None:
    def get(target: bytes, header: bytes = b"") -> int:
        return _status(raw_request(HOST, edge_port, b"GET " + target + b" HTTP/1.1\r\nHost: edge\r\n" + header
                                   + b"Connection: close\r\n\r\n"))

    at_url_limit = b"/healthz?" + b"q" * (8 * 1024 - len(b"/healthz?"))
    assert get(at_url_limit) == 200
    assert get(at_url_limit + b"q") == 414
    assert get(b"/healthz", b"X-Big: " + b"v" * (30 * 1024) + b"\r\n") == 200
    assert get(b"/healthz", b"X-Big: " + b"v" * (33 * 1024) + b"\r\n") == 431


def test_a_slow_head_gets_408(edge_port: int) -> None:
    with socket.create_connection((HOST, edge_port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: ed")  # and nothing more
        started = time.monotonic()
        raw = sock.recv(4096)
        assert _status(raw) == 408
        assert time.monotonic() - started < 5


def _hold_body(port: int, source: str) -> socket.socket:
    """A JSON body announced as 100 bytes, 10 sent: the API waits for the rest (FastAPI reads a
    body before its dependencies)."""
    sock = socket.create_connection((HOST, port), timeout=10, source_address=(source, 0))
    sock.sendall(b"POST /api/v1/knowledge-bases HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"name\": \"")
    return sock


def _post_body(port: int, source: str) -> bytes:
    with socket.create_connection((HOST, port), timeout=10, source_address=(source, 0)) as sock:
        sock.sendall(b"POST /api/v1/knowledge-bases HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\n"
                     b"X-Forwarded-For: 10.9.9.9\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        out = b""
        while got := sock.recv(65536):
            out += got
        return out


def test_bodies_in_progress_are_bounded_per_client_and_in_all(edge_port: int) -> None:
    held = [_hold_body(edge_port, "127.0.0.1") for _ in range(2)]
    try:
        def refused_as(source: str, status: int) -> bool:
            return _status(_post_body(edge_port, source)) == status

        # the third body of one client (X-Forwarded-For is not trusted: no KS_FORWARDED_ALLOW_IPS)
        poll(lambda: refused_as("127.0.0.1", 429), timeout=10, interval=0.1, what="429 for a third body")
        held.append(_hold_body(edge_port, "127.0.0.2"))
        poll(lambda: refused_as("127.0.0.3", 503), timeout=10, interval=0.1, what="503 past the total")
    finally:
        for sock in held:
            sock.close()
    # the slots free when the bodies end: another client's request goes through (401: no token)
    poll(lambda: _status(_post_body(edge_port, "127.0.0.3")) == 401, timeout=10, interval=0.1, what="slots freed")
