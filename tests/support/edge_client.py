"""A client that sends one request with a huge header, as the attacks of issue 28 did, and reads
the answer while it still sends (what a client must do to see an early 431): used by
``tests/e2e/test_edge.py`` and ``bench/edge.py``."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

PIECE = b"a" * 65536


@dataclass(frozen=True)
class Answer:
    """``status`` of the answer's status line (None: the connection ended without one),
    ``seconds`` from connecting to that line, ``sent`` bytes of the header value sent by then."""

    status: int | None
    seconds: float
    sent: int


def huge_header(host: str, port: int, size: int, *, timeout_s: float = 30.0) -> Answer:
    """``GET /healthz`` with one header of ``size`` bytes, streamed by a thread while this one
    waits for the status line; the connection is shut down once it has come (or after ``timeout_s``)."""
    sock = socket.create_connection((host, port), timeout=timeout_s)
    sent = [0]

    def pump() -> None:
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: edge\r\nX-Big: ")
            while sent[0] < size:
                sock.sendall(PIECE)
                sent[0] += len(PIECE)
            sock.sendall(b"\r\n\r\n")
        except OSError:
            pass  # reset by the server after its answer: expected

    started = time.perf_counter()
    sender = threading.Thread(target=pump, daemon=True)
    sender.start()
    head = b""
    try:
        while b"\r\n" not in head:
            got = sock.recv(4096)
            if not got:
                break
            head += got
    except OSError:
        pass
    seconds = time.perf_counter() - started
    at = sent[0]
    try:
        sock.shutdown(socket.SHUT_RDWR)  # wakes the sender blocked on a full window
    except OSError:
        pass
    sock.close()
    sender.join(timeout_s)
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") and b" " in head[9:] else None
    return Answer(status, seconds, at)


def raw_request(host: str, port: int, request: bytes, *, timeout_s: float = 10.0) -> bytes:
    """Send ``request`` (bytes as they go on the wire) and return everything answered until the
    server closes (or ``timeout_s``)."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        try:
            sock.sendall(request)
        except OSError:
            pass
        out = b""
        try:
            while got := sock.recv(65536):
                out += got
        except OSError:
            pass
    return out
