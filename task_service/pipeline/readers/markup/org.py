"""Org mode (``.org``) → paragraph blocks under their headlines (pure).

A headline is a line of one or more ``*`` then a space ("Headlines" of the Org syntax); its level is
the number of stars. A TODO keyword, priority cookie and trailing tags stay in the title text (they
are words people search for). ``#+TITLE:`` lines and the rest are text.
"""

from __future__ import annotations

import re

from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.markup._outline import Line, decoded_lines, outline_blocks

__all__ = ["read"]

_HEADLINE = re.compile(r"(\*+)[ \t]+(.*)")


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Raises ``UndecodableTextError``."""
    del limits
    lines, warnings = decoded_lines(data)
    return outline_blocks((_line(line) for line in lines), warnings)


def _line(line: str) -> Line:
    match = _HEADLINE.fullmatch(line)
    return Line(match.group(2), len(match.group(1))) if match else Line(line)
