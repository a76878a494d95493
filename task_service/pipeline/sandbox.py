"""Run ``extract`` (parse + chunk) in a resource-limited child process that survives from one
document to the next; a document that blows a limit fails with ``parse_limit`` and the worker
goes on.

Shape: one long-lived child per worker, a fresh interpreter started with ``subprocess``
(``python -c "from task_service.pipeline.sandbox import child_main; child_main()" FD``: nothing
of the worker's threads, event loop, sockets or pools is inherited, and unlike
``multiprocessing``'s spawn/forkserver it never re-imports the parent's ``__main__`` and starts
no resource-tracker process), serving requests over a socketpair wrapped in a
``multiprocessing.connection.Connection``. Importing unstructured + spaCy and warming them
takes ≈3-4 s, so the child does it once (``ensure_parsers_ready``, and the MiniLM tokenizer for
the chunker, built from the ``ChunkSettings`` sent with the limits) and then extracts any number
of documents. Chunking runs here too (it was a worker thread: a 2.9 MB Markdown table kept one
burning CPU after its task's TIMEOUT), so the limits below cover parsing and chunking together.
It is replaced only after a limit hit, a crash or memory growth. ``start()`` does not wait for
the warm-up: it overlaps the rest of the worker's start-up (tokenizer, model, migrations,
connections), and the first document waits for it (``start_timeout_s``) if needed.

Limits, all in the child only (the worker process itself is never limited):

- **Memory**: ``RLIMIT_AS`` = ``memory_bytes`` (default 2 GiB), set after the warm-up (the warm
  child maps ≈0.9 GiB of address space, 0.4 GiB resident). Python code gets ``MemoryError``;
  C code gets a failed allocation; PDFium then aborts the process (SIGABRT: a 1.5 MB PDF whose
  content stream inflates to 1.5 GiB does exactly that). ``RLIMIT_CORE`` = 0 so such a death
  never writes a 2 GiB core file.
- **CPU**: ``RLIMIT_CPU`` is cumulative over the process's life, and the child is long-lived.
  Choice: *per-request accounting by the kernel* — before each document the child re-arms the
  soft limit to ``ceil(CPU used so far) + cpu_s`` (the hard limit stays where it was, so the
  soft limit can move up again next time without privileges). A document that burns
  ``cpu_s`` CPU seconds (±1 s, the limit's granularity) gets SIGXCPU, whose default action
  kills the child; an idle child burns nothing, so the budget is exactly per document. This
  needs no recycling and no polling thread.
- **Wall clock**: the worker waits ``timeout_s`` (default 180 s) for the answer, then SIGKILLs
  the child (covers a parser blocked on I/O or starved of CPU on a busy machine).
- **Network**: the child needs none (models come from installed packages) and a Python audit
  hook makes any outbound socket / DNS call fail at once with ``PermissionError`` (defence in
  depth against a library that tries to download something; not a security boundary: code in
  C could still open sockets).

Outcomes, as the handler sees them (``self._parse(data, filename, token)`` in ``asyncio.to_thread``):

- the ``Extraction`` (chunks + warnings), or the ``IndexingError`` raised in the child, rebuilt from
  ``(class name, error_code, message)`` (exceptions are never pickled across);
- ``ParseLimitError`` (``parse_limit``, permanent) for a ``MemoryError`` in the child, a child
  killed by a signal (SIGXCPU → CPU limit; others, usually SIGABRT/SIGSEGV from a failed
  allocation in C → memory limit "or crashed"), or the wall-clock timeout; the child is then
  replaced at once (the new one warms while the task is being marked FAILED);
- ``ParserUnavailableError`` (``parser_unavailable``) when no child can be started;
- ``ExtractionCancelled`` after ``cancel(token)`` (the task timed out or was cancelled, the worker
  is shutting down): the child doing that request is SIGKILLed at once and replaced.

Threads: the handler may call the parser from several threads (prefetch > 1); requests are
serialized by a lock, one document at a time in the one child (PDFium is single-threaded
anyway and parsing is CPU-bound on a 2-core machine); a pool of children would multiply the
≈0.4 GiB resident per child.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.domain import errors
from shared.domain.errors import (
    ExtractionCancelled,
    IndexingError,
    ParseLimitError,
    ParserCrashError,
    ParserUnavailableError,
)
from task_service.pipeline.chunk import DEFAULT_CHUNKING, Chunker, ChunkSettings, load_minilm_tokenizer
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits

if TYPE_CHECKING:
    from shared.settings import WorkerSettings
    from task_service.pipeline.extract import Extraction, StageCallback

log = logging.getLogger(__name__)

GIB = 1024**3
MIB = 1024**2
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
_CHILD_CODE = "from task_service.pipeline.sandbox import child_main; child_main()"
# Replace the child when, after a document, its address space is above this share of the limit
# (heap fragmentation would otherwise leave the next document less room than the limit says).
RECYCLE_AT_SHARE = 0.75
_NETWORK_EVENTS = frozenset({
    "socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
    "socket.sendto", "socket.sendmsg",
})


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of the parser child; picklable."""

    memory_bytes: int = 2 * GIB
    cpu_s: int = 120
    timeout_s: float = 180.0
    start_timeout_s: float = 120.0

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> SandboxLimits:
        return cls(
            memory_bytes=s.parse_memory_limit_mb * MIB,
            cpu_s=s.parse_cpu_limit_s,
            timeout_s=s.parse_timeout_s,
            start_timeout_s=s.parse_start_timeout_s,
        )

    @property
    def memory_text(self) -> str:
        if self.memory_bytes % GIB == 0:
            return f"{self.memory_bytes // GIB} GiB"
        return f"{self.memory_bytes / MIB:,.0f} MiB"


@dataclass(frozen=True)
class ParserConfig:
    """The worker's extractor: sandboxed or not (``PARSE_SANDBOX``), the child's limits, the
    structural parse limits and the chunking."""

    sandbox: bool
    sandbox_limits: SandboxLimits
    limits: ParseLimits
    chunking: ChunkSettings

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> ParserConfig:
        return cls(sandbox=s.parse_sandbox, sandbox_limits=SandboxLimits.from_settings(s),
                   limits=ParseLimits.from_settings(s), chunking=ChunkSettings.from_settings(s))


def build_parser(config: ParserConfig) -> SandboxedParser | InProcessParser:
    """The extractor the worker hands to ``IndexHandler``: sandboxed unless ``config.sandbox`` is off."""
    if not config.sandbox:
        return InProcessParser(config.limits, Chunker.from_settings(load_minilm_tokenizer(), config.chunking))
    return SandboxedParser(config.sandbox_limits, config.limits, config.chunking)


class InProcessParser:
    """``extract`` with the structural limits, in this process (no resource limits; a cancelled
    request runs on to its end in its thread: development and tests only)."""

    def __init__(self, limits: ParseLimits = DEFAULT_LIMITS, chunker: Chunker | None = None) -> None:
        self.limits = limits
        self.chunker = chunker if chunker is not None else Chunker(load_minilm_tokenizer())

    def __call__(self, data: bytes, filename: str, cancel: threading.Event | None = None,
                 on_stage: StageCallback | None = None) -> Extraction:
        if cancel is not None and cancel.is_set():
            raise ExtractionCancelled("cancelled before it started")
        from task_service.pipeline.extract import extract

        return extract(data, filename, self.limits, self.chunker, on_stage)

    def cancel(self, token: threading.Event) -> None:
        token.set()

    def close(self) -> None:
        pass


@dataclass
class _Child:
    process: subprocess.Popen[bytes]
    conn: Connection
    spawned: float
    ready: bool = False

    def alive(self) -> bool:
        return self.process.poll() is None


class SandboxedParser:
    """Callable ``(data, filename, cancel) -> Extraction`` that parses and chunks in a long-lived,
    limited child process."""

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),  # frozen dataclasses: immutable defaults
        parse_limits: ParseLimits = DEFAULT_LIMITS,
        chunking: ChunkSettings = DEFAULT_CHUNKING,
        *,
        start: bool = True,
    ) -> None:
        self.limits = limits
        self.parse_limits = parse_limits
        self.chunking = chunking
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._active: tuple[threading.Event, _Child] | None = None  # the request being served
        self._closed = False
        self.children_started = 0
        atexit.register(self._kill_at_exit)
        if start:
            self.start()

    # ------------------------------------------------------------------ lifecycle

    def start(self, *, wait_ready: bool = False) -> None:
        """Start the child if none is running; with ``wait_ready``, also wait for its warm-up."""
        with self._lock:
            child = self._current()
            if wait_ready:
                self._wait_ready(child)

    def close(self) -> None:
        """Kill the child at once, even mid-request (that request ends ``ExtractionCancelled``
        or ``ParserUnavailableError``), and start no other. At interpreter exit the child is
        killed anyway, and it exits on EOF."""
        self._closed = True
        child = self._child
        if child is not None and child.alive():
            child.process.kill()
        if self._lock.acquire(timeout=2):  # a request thread sees its child's EOF at once
            try:
                if self._child is not None:
                    self._stop(self._child)
                    self._child = None
            finally:
                self._lock.release()

    def cancel(self, token: threading.Event) -> None:
        """Cancel the request made with ``token``: if the child is serving it, SIGKILL the child
        (the caller's thread then raises ``ExtractionCancelled``); if it waits for the lock, it
        raises as soon as it gets it. Thread-safe; returns at once."""
        token.set()
        active = self._active
        if active is not None and active[0] is token and active[1].alive():
            active[1].process.kill()

    def _kill_at_exit(self) -> None:
        child = self._child  # no lock: a parse may still hold it at interpreter exit
        if child is not None and child.alive():
            child.process.kill()

    @property
    def pid(self) -> int | None:
        """The current child's pid (``None`` before the first start or after ``close``)."""
        child = self._child
        return child.process.pid if child is not None else None

    # ------------------------------------------------------------------ requests

    def __call__(self, data: bytes, filename: str, cancel: threading.Event | None = None,
                 on_stage: StageCallback | None = None) -> Extraction:
        """``on_stage(name)`` is called (in this thread) when the child reports a stage
        (``"CHUNKING"`` once parsing is done), ``on_stage("OCR", share)`` per OCRed page."""
        token = cancel if cancel is not None else threading.Event()
        with self._lock:
            if token.is_set():
                raise ExtractionCancelled("cancelled before it started")
            reply = self._request(data, filename, token, on_stage)
        if reply[0] == "ok":
            from task_service.pipeline.extract import Extraction

            return Extraction.unpack(reply[1])
        raise _rebuild(str(reply[1]), reply[2], str(reply[3]))

    def _request(self, data: bytes, filename: str, token: threading.Event,
                 on_stage: StageCallback | None = None) -> tuple[Any, ...]:
        """Send one document, wait for the reply within the wall-clock limit; on a limit hit,
        replace the child and raise ``ParseLimitError`` (caller holds the lock)."""
        child = self._send_to_a_child(data, filename)
        self._active = (token, child)
        try:
            if token.is_set():  # cancelled while the document was being sent
                child.process.kill()
            return self._receive(child, token, on_stage)
        finally:
            self._active = None

    def _send_to_a_child(self, data: bytes, filename: str) -> _Child:
        for _ in range(2):
            child = self._current()
            self._wait_ready(child)
            if self._send(child, data, filename):
                break
            # Dead before it read the request (killed while idle, e.g. by the OOM killer): not
            # this document's doing, so it goes to a fresh child once.
            self._replace(child, "found dead when a document was sent")
        else:
            raise ParserUnavailableError("parser process died twice before reading the document")
        return child

    @staticmethod
    def _send(child: _Child, data: bytes, filename: str) -> bool:
        """False when the child was gone before it answered anything."""
        try:
            child.conn.send(filename)
            child.conn.send_bytes(data)
        except OSError:
            # It may have answered first (MemoryError while reading the document), then exited.
            return child.conn.poll() and not _eof(child.conn)
        return True

    def _receive(self, child: _Child, token: threading.Event, on_stage: StageCallback | None) -> tuple[Any, ...]:
        deadline = time.monotonic() + self.limits.timeout_s  # one wall-clock budget, stage reports included
        while True:
            reply = self._next_message(child, token, deadline)
            if reply[0] != "stage":
                break
            if on_stage is not None:
                on_stage(str(reply[1]), *reply[2:3])  # ("stage", name) or ("stage", "OCR", share)
        kind, vm_size = reply[0], int(reply[-1])
        if kind == "memory":
            self._replace(child, "MemoryError")
            raise ParseLimitError(
                f"parser exceeded the memory limit of {self.limits.memory_text} (PARSE_MEMORY_LIMIT_MB): "
                "MemoryError"
            )
        if vm_size > RECYCLE_AT_SHARE * self.limits.memory_bytes:
            self._replace(child, f"address space grew to {vm_size / MIB:,.0f} MiB")
        return reply

    def _next_message(self, child: _Child, token: threading.Event, deadline: float) -> tuple[Any, ...]:
        ready = wait([child.conn], max(deadline - time.monotonic(), 0.0))  # data, or EOF when the child dies
        if token.is_set():
            self._replace(child, "request cancelled")
            raise ExtractionCancelled("extraction cancelled; its parser process was killed")
        if not ready:
            self._replace(child, "wall-clock limit")
            raise ParseLimitError(
                f"parser exceeded the wall-clock limit of {self.limits.timeout_s:g} s (PARSE_TIMEOUT_S)"
            )
        try:
            message: tuple[Any, ...] = child.conn.recv()
        except (EOFError, OSError):
            raise self._died(child) from None
        return message

    def _died(self, child: _Child) -> ParseLimitError:
        """The child died while parsing: replace it; the error that explains why."""
        try:
            code: int | None = child.process.wait(10)
        except subprocess.TimeoutExpired:
            code = None
        self._replace(child, f"exit code {code}")
        if code is not None and code < 0:
            sig = _signal_name(-code)
            if -code == signal.SIGXCPU:
                return ParseLimitError(
                    f"parser exceeded {self.limits.cpu_s} s of CPU (PARSE_CPU_LIMIT_S; killed by {sig})"
                )
            return ParseLimitError(
                f"parser exceeded the memory limit of {self.limits.memory_text} (PARSE_MEMORY_LIMIT_MB) or "
                f"crashed: the parser process was killed by {sig}"
            )
        return ParseLimitError(f"parser process exited unexpectedly (exit code {code})")

    # ------------------------------------------------------------------ child management

    def _current(self) -> _Child:
        """The child to use (caller holds the lock); a dead or missing one is replaced."""
        if self._closed:
            raise ParserUnavailableError("the parser was closed (the worker is shutting down)")
        child = self._child
        if child is None or (child.ready and not child.alive()):
            if child is not None:
                log.warning("parse sandbox child found dead; replacing it",
                            extra={"pid": child.process.pid, "exitcode": child.process.returncode})
                self._stop(child)
            child = self._child = self._spawn()
        return child

    def _spawn(self) -> _Child:
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PROJECT_ROOT), env.get("PYTHONPATH")) if p)
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _CHILD_CODE, str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env, cwd=_PROJECT_ROOT,
            )
        finally:
            theirs.close()  # only the child holds its end now: its death reads as EOF here
        conn = Connection(ours.detach())
        conn.send((self.limits, self.parse_limits, self.chunking))
        self.children_started += 1
        return _Child(process, conn, time.monotonic())

    def _wait_ready(self, child: _Child) -> None:
        """Block until the child has warmed up (caller holds the lock)."""
        if child.ready:
            return
        remaining = self.limits.start_timeout_s - (time.monotonic() - child.spawned)
        message: tuple[Any, ...] | None = None
        if wait([child.conn], max(remaining, 0.0)):
            try:
                message = child.conn.recv()
            except (EOFError, OSError):
                message = None
        if message is not None and message[0] == "ready":
            child.ready = True
            log.info("parse sandbox ready", extra={
                "pid": child.process.pid, "warm_up_s": round(float(message[1]), 2),
                "address_space_mib": round(int(message[2]) / MIB), "limits": repr(self.limits),
            })
            return
        self._stop(child)
        self._child = None
        if message is not None and message[0] == "error":
            reason = f"{message[1]}: {message[3]}"
        elif message is None and child.process.returncode is None:
            reason = f"not ready after {self.limits.start_timeout_s:g} s (PARSE_START_TIMEOUT_S)"
        else:
            reason = f"exited during start-up (exit code {child.process.returncode})"
        log.error("parse sandbox failed to start", extra={"reason": reason})
        raise ParserUnavailableError(f"parser process could not be started: {reason}")

    def _replace(self, child: _Child, why: str) -> None:
        """Kill ``child`` and start its successor right away (it warms in the background)."""
        log.warning("parse sandbox child replaced", extra={"pid": child.process.pid, "reason": why})
        self._stop(child)
        self._child = None if self._closed else self._spawn()

    @staticmethod
    def _stop(child: _Child) -> None:
        if child.alive():
            child.process.kill()
        try:
            child.process.wait(10)
        except subprocess.TimeoutExpired:  # unkillable (D state); the kernel reaps it later
            log.error("parse sandbox child did not die", extra={"pid": child.process.pid})
        child.conn.close()


def _eof(conn: Connection) -> bool:
    """True when the only thing left to read on ``conn`` is end-of-file."""
    try:
        with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as peek:  # a dup
            return not peek.recv(1, socket.MSG_PEEK)
    except OSError:
        return True


def _rebuild(name: str, code: str | None, message: str) -> Exception:
    """The worker-side exception for an error the child reported as (class name, code, message);
    the class carries the code (``error_code`` is a class attribute)."""
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, IndexingError):
        return cls(message)
    if isinstance(cls, type) and issubclass(cls, errors.ConfigurationError):
        return cls(message)
    return ParserCrashError(f"{name}: {message}")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


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
