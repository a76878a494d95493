"""Structured (JSON-lines) logging; task_id, document_id and generation ride on contextvars."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

_context: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("log_context", default={})  # noqa: B039

_STD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


@contextlib.contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add fields (task_id=..., document_id=..., generation=...) to every log line in this block."""
    token = _context.set({**_context.get(), **fields})
    try:
        yield
    finally:
        _context.reset(token)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "event": record.getMessage(),
        }
        out.update(_context.get())
        out.update({k: v for k, v in record.__dict__.items() if k not in _STD})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class _PlainFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extra = {**_context.get(), **{k: v for k, v in record.__dict__.items() if k not in _STD}}
        base = super().format(record)
        return base + ("  " + " ".join(f"{k}={v}" for k, v in extra.items()) if extra else "")


def configure(level: str, *, json_lines: bool) -> None:
    """Install one stderr handler on the root logger (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    plain = _PlainFormatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    handler.setFormatter(JsonFormatter() if json_lines else plain)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("aiormq", "aio_pika", "httpx", "urllib3", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
