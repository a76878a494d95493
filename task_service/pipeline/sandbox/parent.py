"""The worker's side of the parse sandbox: :class:`SandboxedParser` starts the child
(``child.py``), sends it one document at a time and turns its answers, its death or its silence
into an ``Extraction`` or an error (the outcomes are listed in ``sandbox/__init__.py``)."""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shared.domain.errors import (
    ExtractionCancelled,
    ParseLimitError,
    ParserUnavailableError,
)
from task_service.pipeline.chunk import DEFAULT_CHUNKING, ChunkSettings
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits
from task_service.pipeline.sandbox.channel import Child, at_eof, rebuild_error, signal_name
from task_service.pipeline.sandbox.limits import MIB, SandboxLimits

if TYPE_CHECKING:
    from task_service.pipeline.extract import Extraction, StageCallback



log = logging.getLogger(__name__)
_PROJECT_ROOT = Path(__file__).resolve().parents[3]
_CHILD_CODE = "from task_service.pipeline.sandbox.child import child_main; child_main()"
# Replace the child when, after a document, its address space is above this share of the limit
# (heap fragmentation would otherwise leave the next document less room than the limit says).
RECYCLE_AT_SHARE = 0.75


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
        self._child: Child | None = None
        self._active: tuple[threading.Event, Child] | None = None  # the request being served
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
        raise rebuild_error(str(reply[1]), reply[2], str(reply[3]))

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

    def _send_to_a_child(self, data: bytes, filename: str) -> Child:
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
    def _send(child: Child, data: bytes, filename: str) -> bool:
        """False when the child was gone before it answered anything."""
        try:
            child.conn.send(filename)
            child.conn.send_bytes(data)
        except OSError:
            # It may have answered first (MemoryError while reading the document), then exited.
            return child.conn.poll() and not at_eof(child.conn)
        return True

    def _receive(self, child: Child, token: threading.Event, on_stage: StageCallback | None) -> tuple[Any, ...]:
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

    def _next_message(self, child: Child, token: threading.Event, deadline: float) -> tuple[Any, ...]:
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

    def _died(self, child: Child) -> ParseLimitError:
        """The child died while parsing: replace it; the error that explains why."""
        try:
            code: int | None = child.process.wait(10)
        except subprocess.TimeoutExpired:
            code = None
        self._replace(child, f"exit code {code}")
        if code is not None and code < 0:
            sig = signal_name(-code)
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

    def _current(self) -> Child:
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

    def _spawn(self) -> Child:
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
        return Child(process, conn, time.monotonic())

    def _wait_ready(self, child: Child) -> None:
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

    def _replace(self, child: Child, why: str) -> None:
        """Kill ``child`` and start its successor right away (it warms in the background)."""
        log.warning("parse sandbox child replaced", extra={"pid": child.process.pid, "reason": why})
        self._stop(child)
        self._child = None if self._closed else self._spawn()

    @staticmethod
    def _stop(child: Child) -> None:
        if child.alive():
            child.process.kill()
        try:
            child.process.wait(10)
        except subprocess.TimeoutExpired:  # unkillable (D state); the kernel reaps it later
            log.error("parse sandbox child did not die", extra={"pid": child.process.pid})
        child.conn.close()
