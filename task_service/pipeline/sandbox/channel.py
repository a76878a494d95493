"""The child as the worker holds it (:class:`Child`: process, socket, start time) and what its
replies and its end mean (an error rebuilt from its report, a signal's name, end-of-file)."""

from __future__ import annotations

import signal
import socket
import subprocess
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from shared.domain import errors
from shared.domain.errors import (
    IndexingError,
    ParserCrashError,
)

if TYPE_CHECKING:
    pass



@dataclass
class Child:
    process: subprocess.Popen[bytes]
    conn: Connection
    spawned: float
    ready: bool = False

    def alive(self) -> bool:
        return self.process.poll() is None


def at_eof(conn: Connection) -> bool:
    """True when the only thing left to read on ``conn`` is end-of-file."""
    try:
        with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as peek:  # a dup
            return not peek.recv(1, socket.MSG_PEEK)
    except OSError:
        return True


def rebuild_error(name: str, code: str | None, message: str) -> Exception:
    """The worker-side exception for an error the child reported as (class name, code, message);
    the class carries the code (``error_code`` is a class attribute)."""
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, IndexingError):
        return cls(message)
    if isinstance(cls, type) and issubclass(cls, errors.ConfigurationError):
        return cls(message)
    return ParserCrashError(f"{name}: {message}")


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
