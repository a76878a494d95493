"""Test-only fault injection at named points of the worker.

``RAG_FAULT_POINTS="after_commit=stop,during_embed=stop"`` makes the worker SIGSTOP itself when it
reaches that point, so a fault test can SIGKILL (or SIGCONT) it at an exact place — e.g. after
the commit and before the ack. Unset in production: each point is then a dict lookup.

Points: ``before_download``; ``during_embed`` (embedding run recorded, model not yet called);
``in_commit`` (inside the final transaction, chunks written, not committed); ``after_commit``
(chunks committed, delivery not yet acked); ``before_parse``; ``embed_batch`` (after each
embedding batch); ``in_split`` (inside the split's transaction, chunks staged, not committed);
``in_swap`` (inside the last part's commit, its vectors staged, the swap not yet run);
``before_expand`` (an archive's members stored, its transaction not begun); ``in_expand``
(inside an archive's expansion, after each member's rows, not committed); in the API,
``after_commit_before_publish``.

Actions: ``stop`` (SIGSTOP self), ``exit`` (``os._exit(70)``, a crash), ``sleep:<seconds>``;
``fail:<text>``: raise ``StorageUnavailableError`` (a transient fault) when the point's subject
(the document's filename at ``before_download``) contains ``<text>``, so one worker can fail one
chosen document and index the others; ``pause:<seconds>``: sleep every time the point is
reached (a slow model, so progress has steps to show). All but ``pause`` act once per process.
"""

from __future__ import annotations

import asyncio
import os
import signal
from functools import cache

from shared.domain.errors import StorageUnavailableError


@cache
def _points() -> dict[str, str]:
    raw = os.environ.get("RAG_FAULT_POINTS", "")
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        name, _, action = item.partition("=")
        out[name] = action or "stop"
    return out


_fired: set[str] = set()


async def fault_point(name: str, subject: str = "") -> None:
    """Apply the action configured for ``name`` (see the module docstring), once per process:
    a retried step after a resume must not freeze again. ``subject``: what the point is
    working on (matched by ``fail:<text>``)."""
    action = _points().get(name)
    if action is None:
        return
    if action.startswith("pause:"):
        await asyncio.sleep(float(action.removeprefix("pause:")))
        return
    if name in _fired:
        return
    if action.startswith("fail:") and action.removeprefix("fail:") not in subject:
        return
    _fired.add(name)
    if action.startswith("fail:"):
        raise StorageUnavailableError(f"fault injected at {name} (RAG_FAULT_POINTS, test only)")
    if action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action == "exit":
        os._exit(70)
    elif action.startswith("sleep:"):
        await asyncio.sleep(float(action.removeprefix("sleep:")))
