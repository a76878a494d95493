"""The API's edge: request limits decided while the bytes arrive, before anything parses them whole.

uvicorn's default HTTP parser (httptools) accumulates a header value or the URL by concatenation,
uncapped, on the event loop (uvicorn caps headers only with h11): one client sending a 128 MB
header stalled every other request for seconds (issue 28, item 2). :class:`EdgeProtocol` is
uvicorn's httptools protocol with a scan in front of the parser:

- the request line longer than ``KS_MAX_URL_BYTES`` + the method and version (or, once complete,
  its target longer than ``KS_MAX_URL_BYTES``) → **414** at once;
- the header fields (the head after the request line) over ``KS_MAX_HEADER_BYTES`` → **431**
  at once;
- a head not complete ``KS_HEADER_TIMEOUT_S`` seconds after the connection opened (first request)
  or after its first byte (later requests) → **408** (slow-header clients, "slowloris").

A refusal is written, the write side shut (FIN after the answer), reading stopped, and the socket
reset ``KS_LINGER_S`` seconds later: a lingering close that never drains. The client has the answer
in its receive buffer before the reset, and the server reads and discards nothing meanwhile (the
client's sends stop on a full TCP window; no CPU is spent on bytes that would be thrown away).

The scan keeps per connection a few counters and at most ``KS_MAX_URL_BYTES`` + 32 bytes of the
request line; it runs on each read (asyncio reads at most 256 KiB at a time). It follows the
parser's own callbacks for where a head begins (after ``on_message_complete``) and ends
(``on_headers_complete``): the bytes of a pipelined next request that share a read with the end of
the previous one are not counted (at most one read, 256 KiB).

:class:`BodyLimit` (ASGI middleware) bounds the requests with a body (``Content-Length`` > 0 or
``Transfer-Encoding``) in progress at once: ``KS_MAX_BODIES_PER_CLIENT`` per client address →
**429**, ``KS_MAX_BODIES`` in all → **503**, both with ``Retry-After`` and ``Connection: close``,
before the body is read. The client address is the peer's, or the one ``X-Forwarded-For`` names
when the peer is a proxy listed in ``KS_FORWARDED_ALLOW_IPS`` (uvicorn's proxy headers, applied
before this middleware).

Figures: ``bench/edge.py`` (bench/RESULTS.md, section "edge"). Proxy settings to use in front of
the API: README, "Deployment".
"""

from __future__ import annotations

import asyncio
import json
from asyncio import TimerHandle
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from shared.settings import KnowledgeSettings

#: the request line's bytes beyond its target: the longest method we accept, two spaces,
#: "HTTP/1.1" and CR LF
LINE_OVERHEAD = 32


@dataclass(frozen=True)
class EdgeLimits:
    """The edge's limits (``KS_*`` settings): sizes in bytes, times in seconds, bodies as counts."""

    max_url_bytes: int
    max_header_bytes: int
    header_timeout_s: float
    linger_s: float
    max_bodies_per_client: int
    max_bodies: int
    retry_after_s: int

    @classmethod
    def from_settings(cls, s: KnowledgeSettings) -> EdgeLimits:
        return cls(max_url_bytes=s.ks_max_url_bytes, max_header_bytes=s.ks_max_header_bytes,
                   header_timeout_s=s.ks_header_timeout_s, linger_s=s.ks_linger_s,
                   max_bodies_per_client=s.ks_max_bodies_per_client, max_bodies=s.ks_max_bodies,
                   retry_after_s=s.ks_busy_retry_after_s)


_REASONS = {
    408: ("Request Timeout", "request_timeout", "the request head did not arrive in time (KS_HEADER_TIMEOUT_S)"),
    414: ("URI Too Long", "uri_too_long", "the request target is too long (KS_MAX_URL_BYTES)"),
    431: ("Request Header Fields Too Large", "header_too_large",
          "the request header fields are too large (KS_MAX_HEADER_BYTES)"),
}


def refusal(status: int) -> bytes:
    """The whole HTTP/1.1 answer for an edge refusal (408, 414 or 431): a JSON body
    ``{"detail", "error_code"}`` as the API's other errors, ``Connection: close``."""
    phrase, code, detail = _REASONS[status]
    body = json.dumps({"detail": detail, "error_code": code}).encode()
    return (f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\nx-content-type-options: nosniff\r\n\r\n").encode() + body


@dataclass
class HeadScan:
    """What is known of the request head being received (pure: :meth:`feed` decides).

    ``seen`` bytes of the head so far, ``line`` the request line while it is incomplete (bounded),
    ``line_len`` its length once complete (CR LF included), ``tail`` the last 3 bytes seen (an end
    of head split across reads), ``done`` once the end of the head has been seen."""

    limits: EdgeLimits
    seen: int = 0
    line: bytes = b""
    line_len: int | None = None
    tail: bytes = b""
    done: bool = False

    def feed(self, data: bytes) -> int | None:
        """Account for ``data`` (the next bytes of the head, possibly more); 414 or 431 when a limit
        is passed, else None. Bytes after the end of the head (``CR LF CR LF``) are not counted."""
        if self.done:
            return None
        if self.line_len is None:
            verdict = self._line(data)
            if verdict is not None:
                return verdict
        window = self.tail + data
        end = window.find(b"\r\n\r\n")
        head_len = self.seen + (end - len(self.tail) + 4 if end >= 0 else len(data))
        if self.line_len is not None and head_len - self.line_len > self.limits.max_header_bytes:
            return 431
        self.done = end >= 0
        self.seen += len(data)
        self.tail = window[-3:]
        return None

    def _line(self, data: bytes) -> int | None:
        nl = data.find(b"\n")
        part = data if nl < 0 else data[: nl + 1]
        if len(self.line) + len(part) > self.limits.max_url_bytes + LINE_OVERHEAD:
            return 414
        self.line += part
        if nl < 0:
            return None
        self.line_len = self.seen + nl + 1
        fields = self.line.split(b" ")
        target = fields[1] if len(fields) >= 3 else b""
        self.line = b""
        return 414 if len(target) > self.limits.max_url_bytes else None


class EdgeProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol behind :class:`HeadScan` (see the module docstring). Built by
    :func:`protocol_class`, which binds the limits."""

    limits: ClassVar[EdgeLimits]

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._scan: HeadScan | None = HeadScan(self.limits)  # None while a body (or nothing) is expected
        self._header_timer: TimerHandle | None = None
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._scan is not None:
            if self._scan.seen == 0 and self._header_timer is None:
                self._arm()  # a later request's head starts now
            verdict = self._scan.feed(data)
            if verdict is not None:
                self.refuse(verdict)
                return
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._scan = None
        self._disarm()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._scan = HeadScan(self.limits)  # the next bytes begin the next request's head
        super().on_message_complete()

    def refuse(self, status: int) -> None:
        """Answer ``status`` (408, 414, 431) and close without reading anything more: FIN after
        the answer, reading paused, the socket reset after ``linger_s``. While an earlier request's
        response is still being sent (a pipelined head), no answer is written into it: the
        connection is reset at once."""
        self._refused = True
        self._disarm()
        transport = self.transport
        if transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            transport.abort()
            return
        transport.write(refusal(status))
        transport.pause_reading()
        if transport.can_write_eof():
            transport.write_eof()
        self.loop.call_later(self.limits.linger_s, transport.abort)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.limits.header_timeout_s, self._header_timeout)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self._scan is not None and not self._refused:
            self.refuse(408)


def protocol_class(limits: EdgeLimits) -> type[EdgeProtocol]:
    """An :class:`EdgeProtocol` class bound to ``limits`` (uvicorn's ``http=`` takes a class)."""
    return cast(type[EdgeProtocol], type("BoundEdgeProtocol", (EdgeProtocol,), {"limits": limits}))


def _has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
    return False


class BodyLimit:
    """ASGI middleware: at most ``limits.max_bodies_per_client`` requests with a body in progress
    per client address (429) and ``limits.max_bodies`` in all (503), per API process; a refusal
    carries ``Retry-After: limits.retry_after_s`` and ``Connection: close`` and reads no body."""

    def __init__(self, app: ASGIApp, limits: EdgeLimits) -> None:
        self.app = app
        self.limits = limits
        self.open: Counter[str] = Counter()  #: client address → bodies in progress
        self.total = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope["headers"]):
            await self.app(scope, receive, send)
            return
        client = scope["client"][0] if scope.get("client") else "-"
        if self.total >= self.limits.max_bodies:
            await self._refuse(send, 503, "server_busy", "too many request bodies in progress (KS_MAX_BODIES)")
            return
        if self.open[client] >= self.limits.max_bodies_per_client:
            await self._refuse(send, 429, "too_many_requests",
                               "too many request bodies in progress from this client (KS_MAX_BODIES_PER_CLIENT)")
            return
        self.open[client] += 1
        self.total += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.total -= 1
            self.open[client] -= 1
            if self.open[client] <= 0:
                del self.open[client]

    async def _refuse(self, send: Send, status: int, code: str, detail: str) -> None:
        body = json.dumps({"detail": detail, "error_code": code}).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(self.limits.retry_after_s).encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def forwarded_allow_ips(s: KnowledgeSettings) -> list[str]:
    """``KS_FORWARDED_ALLOW_IPS`` as uvicorn takes it: the proxies whose ``X-Forwarded-For`` names
    the client (addresses or networks, ``*`` any); empty: the peer is the client."""
    return [p.strip() for p in s.ks_forwarded_allow_ips.split(",") if p.strip()]


def server_config(app: ASGIApp, s: KnowledgeSettings) -> Config:
    """uvicorn's configuration of the API: the edge protocol with the settings' limits, proxy
    headers only from ``KS_FORWARDED_ALLOW_IPS``, graceful shutdown within 10 s."""
    limits = EdgeLimits.from_settings(s)
    proxies = forwarded_allow_ips(s)
    return Config(BodyLimit(app, limits), host=s.ks_host, port=s.ks_port, log_config=None,
                  timeout_graceful_shutdown=10, http=protocol_class(limits),
                  proxy_headers=bool(proxies), forwarded_allow_ips=proxies or None)
