"""Test-only fault injection at named points of the worker.

``RAG_FAULT_POINTS="after_commit=stop,during_embed=stop"`` makes the worker SIGSTOP itself when it
reaches that point, so a fault test can SIGKILL (or SIGCONT) it at an exact place — e.g. after
the commit and before the ack. Unset in production: each point is then a dict lookup.

Points: ``before_download``; ``during_embed`` (embedding run recorded, model not yet called);
``in_commit`` (inside the final transaction, chunks written, not committed); ``after_commit``
(chunks committed, delivery not yet acked); ``before_parse``; in the API,
``after_commit_before_publish``. Actions: ``stop`` (SIGSTOP self), ``exit`` (``os._exit(70)``,
a crash), ``sleep:<seconds>``.
"""

from __future__ import annotations

import asyncio
import os
import signal
from functools import cache


@cache
def _points() -> dict[str, str]:
    raw = os.environ.get("RAG_FAULT_POINTS", "")
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        name, _, action = item.partition("=")
        out[name] = action or "stop"
    return out


_fired: set[str] = set()


async def fault_point(name: str) -> None:
    """Apply the action configured for ``name`` (see the module docstring), once per process:
    a retried step after a resume must not freeze again."""
    action = _points().get(name)
    if action is None or name in _fired:
        return
    _fired.add(name)
    if action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "exit":
        os._exit(70)
    elif action.startswith("sleep:"):
        await asyncio.sleep(float(action.removeprefix("sleep:")))
