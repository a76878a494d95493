"""The edge's decisions (knowledge_service/edge.py): the head scan's 414/431 as bytes arrive, in
any split, and the bound on concurrent request bodies per client and in all."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pytest

from knowledge_service.edge import BodyLimit, EdgeLimits, HeadScan, forwarded_allow_ips, refusal
from shared.settings import KnowledgeSettings

LIMITS = EdgeLimits(max_url_bytes=100, max_header_bytes=200, header_timeout_s=1, linger_s=1,
                    max_bodies_per_client=2, max_bodies=3, retry_after_s=2)


def _verdict(data: bytes, split: int) -> int | None:
    scan = HeadScan(LIMITS)
    for i in range(0, len(data), split):
        got = scan.feed(data[i:i + split])
        if got is not None:
            return got
    return None


def _head(target_len: int, header_len: int) -> bytes:
    value = b"v" * (header_len - len(b"X-A: \r\n") - 2)  # header fields + the blank line's CR LF
    return b"GET /" + b"u" * (target_len - 1) + b" HTTP/1.1\r\nX-A: " + value + b"\r\n\r\n"


@pytest.mark.parametrize("split", [1, 3, 7, 64, 10_000])
def test_limits_hold_exactly_in_any_split(split: int) -> None:
    assert _verdict(_head(100, 200), split) is None  # at the limits
    assert _verdict(_head(101, 50), split) == 414
    assert _verdict(_head(50, 201), split) == 431


def test_a_huge_header_is_refused_within_the_limit_plus_one_read() -> None:
    scan = HeadScan(LIMITS)
    assert scan.feed(b"GET / HTTP/1.1\r\nX-Big: ") is None
    got = None
    fed = 0
    while got is None:
        got = scan.feed(b"a" * 64)
        fed += 64
    assert got == 431 and fed <= LIMITS.max_header_bytes + 64


def test_a_request_line_without_end_is_refused_as_414() -> None:
    scan = HeadScan(LIMITS)
    assert scan.feed(b"GET /" + b"x" * 100) is None  # within target + the line's overhead
    assert scan.feed(b"x" * 200) == 414


def test_bytes_after_the_head_are_not_header_bytes() -> None:
    body = b"b" * 10_000
    assert _verdict(_head(10, 150) + body, 10_000) is None
    assert _verdict(b"GET / HTTP/1.1\r\n\r\n" + body, 4096) is None


def test_refusals_are_whole_http_answers() -> None:
    for status in (408, 414, 431):
        raw = refusal(status)
        head, body = raw.split(b"\r\n\r\n", 1)
        assert head.startswith(f"HTTP/1.1 {status} ".encode())
        assert b"connection: close" in head and f"content-length: {len(body)}".encode() in head
        assert b'"error_code"' in body


def test_forwarded_allow_ips_are_read_from_the_settings() -> None:
    base = KnowledgeSettings.model_construct()
    assert forwarded_allow_ips(base) == []
    assert forwarded_allow_ips(base.model_copy(update={"ks_forwarded_allow_ips": "10.0.0.1, 10.1.0.0/16"})) == [
        "10.0.0.1", "10.1.0.0/16"]


class _Held:
    """An ASGI app that holds each request until ``release`` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = 0
        self._entry = asyncio.Event()

    async def until_entered(self, n: int) -> None:
        while self.entered < n:
            self._entry.clear()
            await self._entry.wait()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.entered += 1
        self._entry.set()
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def _scope(client: str, body: bool = True) -> dict[str, Any]:
    headers = [(b"content-length", b"10")] if body else []
    return {"type": "http", "client": (client, 1234), "headers": headers}


async def _call(app: BodyLimit, scope: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def test_bodies_are_bounded_per_client_and_in_all() -> None:
    inner = _Held()
    app = BodyLimit(inner, LIMITS)
    held = [asyncio.create_task(_call(app, _scope("10.0.0.1"))) for _ in range(2)]
    await inner.until_entered(2)
    [start, _] = await _call(app, _scope("10.0.0.1"))
    assert start["status"] == 429 and (b"retry-after", b"2") in start["headers"]
    held.append(asyncio.create_task(_call(app, _scope("10.0.0.2"))))
    await inner.until_entered(3)
    [start, _] = await _call(app, _scope("10.0.0.3"))
    assert start["status"] == 503 and (b"connection", b"close") in start["headers"]
    no_body = asyncio.create_task(_call(app, _scope("10.0.0.1", body=False)))  # requests without a body pass
    await inner.until_entered(4)
    inner.release.set()
    for task in [*held, no_body]:
        assert (await task)[0]["status"] == 200
    assert app.total == 0 and not app.open
    assert (await _call(app, _scope("10.0.0.1")))[0]["status"] == 200


class _Transport(asyncio.Transport):
    """What the protocol does to its socket: bytes written, EOF, paused reading, abort."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.eof = self.paused = self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True

    def close(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8000)}.get(name, default)


def _protocol(app: Any, limits: EdgeLimits = LIMITS) -> tuple[Any, _Transport]:
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from knowledge_service.edge import protocol_class

    config = Config(app, http=protocol_class(limits), log_config=None, lifespan="off")
    config.load()
    proto = protocol_class(limits)(config, ServerState(), {}, asyncio.get_running_loop())
    transport = _Transport()
    proto.connection_made(transport)
    return proto, transport


async def test_the_protocol_answers_431_then_stops_reading_and_resets_after_the_linger() -> None:
    app = _Held()
    proto, transport = _protocol(app, dataclasses.replace(LIMITS, linger_s=0.05))
    proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 500)
    assert transport.written.startswith(b"HTTP/1.1 431 ") and transport.eof and transport.paused
    assert app.entered == 0  # the application never saw the request
    proto.data_received(b"b" * 1000)  # ignored: nothing parsed, nothing answered again
    assert transport.written.count(b"HTTP/1.1") == 1
    await _until(lambda: transport.aborted)


async def test_a_slow_head_gets_408() -> None:
    proto, transport = _protocol(_Held(), dataclasses.replace(LIMITS, header_timeout_s=0.05, linger_s=0.05))
    proto.data_received(b"GET / HTTP/1.1\r\nHo")
    await _until(lambda: transport.written.startswith(b"HTTP/1.1 408 "))


async def test_a_pipelined_head_over_the_limit_resets_a_response_in_progress() -> None:
    app = _Held()
    proto, transport = _protocol(app)
    proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await app.until_entered(1)  # its response is not sent yet
    proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 500)
    assert transport.aborted and b"431" not in transport.written  # nothing written into the response
    app.release.set()


async def _until(condition: Any, deadline_s: float = 5.0) -> None:
    """Poll ``condition()`` (the protocol's timers run on the loop) until true; AssertionError after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")
