"""A real TCP forwarder a test controls, to take a service away from one process without touching
the service itself (PostgreSQL, here): point the process at :attr:`TcpProxy.port`, then

* :meth:`TcpProxy.cut`: the port stops listening (a new connection is refused, as from a stopped
  server) and every open connection is reset, both ways (the client sees its connection drop,
  mid-query if one is running; the server sees its client gone);
* :meth:`TcpProxy.hang`: open connections are reset, new ones are accepted and never answered
  (a server or network that does not respond: the client's connect timeout fires);
* :meth:`TcpProxy.freeze`: a partition: nothing is forwarded either way and nothing is closed
  (no FIN, no RST: bytes wait in the proxy and the socket buffers; a new connection is accepted
  and held, never connected through) — each side sees only silence, as across a dropped link;
* :meth:`TcpProxy.heal`: the partition ends: held bytes and connections flow on;
* :meth:`TcpProxy.restore`: forwards again, on the same port.

A restarted service (state lost, connections closed) is :meth:`cut` then :meth:`restore`.

asyncio, in the test's event loop; start it with ``await TcpProxy.start(host, port)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from urllib.parse import urlsplit, urlunsplit


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.forwarding = True
        self.accepted = 0
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()  # both ends of every connection, to reset them
        self._tasks: set[asyncio.Task[None]] = set()
        self._flowing = asyncio.Event()  # cleared by freeze(): every pipe waits
        self._flowing.set()

    @classmethod
    async def start(cls, target_host: str, target_port: int) -> TcpProxy:
        proxy = cls(target_host, target_port)
        await proxy._listen()
        return proxy

    def dsn(self, dsn: str) -> str:
        """``dsn`` (a URL) with its host and port replaced by the proxy's."""
        parts = urlsplit(dsn)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    @property
    def connections(self) -> int:
        """Connections being forwarded now (each has two ends)."""
        return len(self._open) // 2

    async def cut(self) -> None:
        """Refuse new connections and reset the open ones."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self._reset_all()

    async def hang(self) -> None:
        """Reset the open connections; accept new ones and never answer them."""
        self.forwarding = False
        self._reset_all()
        if self._server is None:
            await self._listen()

    def freeze(self) -> None:
        """Stop forwarding both ways, closing nothing (a partition)."""
        self._flowing.clear()

    def heal(self) -> None:
        """End a :meth:`freeze`: what waited flows on."""
        self._flowing.set()

    @property
    def frozen(self) -> bool:
        return not self._flowing.is_set()

    async def restore(self) -> None:
        """Forward again (listening on the same port; a freeze ends too)."""
        self.forwarding = True
        self._flowing.set()
        self._reset_all()  # the connections held by hang()
        if self._server is None:
            await self._listen()

    async def close(self) -> None:
        await self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # ---------------------------------------------------------------- internals

    async def _listen(self) -> None:
        # reuse_address (asyncio's default on POSIX): the port is bound again right after a cut
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def _reset_all(self) -> None:
        for writer in list(self._open):
            _reset(writer)
        self._open.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.accepted += 1
        self._open.add(writer)
        try:
            if not self.forwarding:
                await reader.read()  # hold it open, answer nothing, until reset or closed
                return
            await self._flowing.wait()  # frozen: accepted, never connected through (until heal)
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                return
            self._open.add(up_writer)
            try:
                await asyncio.gather(_pipe(reader, up_writer, self._flowing),
                                     _pipe(up_reader, writer, self._flowing))
            finally:
                self._open.discard(up_writer)
                up_writer.close()
        except (OSError, asyncio.CancelledError):  # CancelledError: close(); the task ends here, quietly
            pass
        finally:
            self._open.discard(writer)
            writer.close()
            self._tasks.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, flowing: asyncio.Event) -> None:
    """Copy until EOF or an error on either side, then close the writing side; while ``flowing``
    is clear (frozen) nothing is read, written or closed (an EOF seen is passed on after the heal)."""
    try:
        while True:
            await flowing.wait()
            data = await reader.read(65536)
            await flowing.wait()
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close at once with a TCP RST (SO_LINGER 0): the peer sees "connection reset", not a polite EOF."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
