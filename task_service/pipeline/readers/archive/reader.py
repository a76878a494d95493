"""The reader the registry names for ``zip`` and ``tar``: an archive is expanded, never read.

A whole upload of an archive never reaches a reader: the worker expands it into member
documents (``task_service.indexing.archive``, ARCHITECTURE.md "Flow 4: an archive"). Only an
archive met *inside* another document (an e-mail's attachment) comes here, and is refused with
the same sentence as an archive inside an archive (one level, no recursion).
"""

from __future__ import annotations

from shared.domain.errors import UnsupportedTypeError
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits

__all__ = ["read"]


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Raises ``UnsupportedTypeError`` always (module docstring)."""
    del data, limits
    raise UnsupportedTypeError("an archive inside another document is not expanded")
