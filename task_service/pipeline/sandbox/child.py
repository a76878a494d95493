"""The parser child process: warm up, limit itself (address space, CPU per document, no network),
then extract documents one by one until EOF (the protocol is :func:`_serve`'s)."""

from __future__ import annotations

import math
import os
import resource
import signal
import socket
import sys
import time
import traceback
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from shared.domain import errors
from shared.domain.errors import (
    IndexingError,
)
from task_service.pipeline.chunk import Chunker, ChunkSettings, load_minilm_tokenizer
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.sandbox.limits import SandboxLimits

if TYPE_CHECKING:
    pass

_NETWORK_EVENTS = frozenset({
    "socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
    "socket.sendto", "socket.sendmsg",
})


# ---------------------------------------------------------------------- the child process


def child_main() -> None:
    """Entry point of the child process: ``argv[1]`` = the file descriptor of its socket,
    ``argv[2]`` = the worker's pid."""
    conn = Connection(int(sys.argv[1]))
    _die_with_parent(int(sys.argv[2]))
    try:
        limits, parse_limits, chunking = conn.recv()
        _serve(conn, limits, parse_limits, chunking)
    except (EOFError, OSError):  # the worker went away mid-conversation: nobody to answer
        pass


def _die_with_parent(parent: int) -> None:
    """Linux: get SIGKILL when the worker dies (e.g. SIGKILLed mid-parse), instead of parsing on
    as an orphan until the CPU limit. The signal follows the worker *thread* that started us,
    which is the main thread or an ``asyncio.to_thread`` pool thread, both alive until the
    worker shuts down. Elsewhere the child still exits on EOF, once it next reads."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the prctl
        os._exit(0)


def _serve(conn: Connection, limits: SandboxLimits, parse_limits: ParseLimits, chunking: ChunkSettings) -> None:
    """Warm up, limit, then answer requests until EOF.

    Protocol: the worker first sends ``(SandboxLimits, ParseLimits, ChunkSettings)``, then per
    document ``filename`` (pickled) then the document (raw bytes); the child may first report
    ``("stage", "CHUNKING")`` once parsing is done, then answers ``("ok", Extraction.pack(), vm)``,
    ``("error", class_name, error_code, message, vm)`` or ``("memory", vm)`` (and exits); ``vm`` = its
    address space afterwards, bytes. At start-up it sends ``("ready", warm_up_s, vm)`` or ``("error", ...)``.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle; it stops us
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    started = time.monotonic()
    try:
        from task_service.pipeline.parse import ensure_parsers_ready

        ensure_parsers_ready()
        chunker = Chunker.from_settings(load_minilm_tokenizer(), chunking)
        chunker.split("warm up")
        sys.addaudithook(_refuse_network)
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    except BaseException as exc:
        conn.send(("error", type(exc).__name__, getattr(exc, "error_code", None), str(exc), _vm_size()))
        return
    conn.send(("ready", time.monotonic() - started, _vm_size()))
    while True:
        filename = conn.recv()  # EOFError when the worker is gone or closed the socket
        _arm_cpu_limit(limits.cpu_s)
        reply = _extract_one(conn, filename, parse_limits, chunker)
        try:
            conn.send((*reply, _vm_size()))  # pickled whole before the first byte is written
        except MemoryError:  # no room to pickle a huge text
            reply = ("memory",)
            conn.send((*reply, _vm_size()))
        if reply[0] == "memory":
            return  # a process that hit MemoryError is not trusted with the next document


def _extract_one(conn: Connection, filename: str, limits: ParseLimits, chunker: Chunker) -> tuple[Any, ...]:
    from task_service.pipeline.extract import extract

    def on_stage(stage: str, *progress: float) -> None:
        conn.send(("stage", stage, *progress))

    try:
        return ("ok", extract(conn.recv_bytes(), filename, limits, chunker, on_stage).pack())
    except MemoryError:
        return ("memory",)
    except Exception as exc:
        if not isinstance(exc, IndexingError | errors.ConfigurationError):
            traceback.print_exc()  # a bug: the worker log gets the child's traceback
        return ("error", type(exc).__name__, getattr(exc, "error_code", None), str(exc))


def _arm_cpu_limit(budget_s: int) -> None:
    """Let the coming document use ``budget_s`` more CPU seconds (see the module docstring)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime) + budget_s
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _refuse_network(event: str, args: tuple[Any, ...]) -> None:
    if event in _NETWORK_EVENTS:
        if event == "socket.connect" and args and getattr(args[0], "family", None) == socket.AF_UNIX:
            return  # local sockets (e.g. /dev/log) are not the network
        raise PermissionError(f"network access is disabled in the parse sandbox ({event})")


def _vm_size() -> int:
    """This process's address space (VmSize), bytes; 0 where /proc is not available."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
