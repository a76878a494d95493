"""AsciiDoc (``.adoc``, ``.asciidoc``) → paragraph blocks under their section titles (pure).

A section title is a line of ``=`` (or Markdown-style ``#``) signs, a space and the title
(AsciiDoc Language, "Sections"): ``= Document title`` is level 1, ``== Section`` level 2, and so on.
Delimiter lines (``----``, ``====``, ``****``) have no space after them and stay text; so does the
rest (attributes, blocks, tables), every word searchable.
"""

from __future__ import annotations

import re

from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.markup._outline import Line, decoded_lines, outline_blocks

__all__ = ["read"]

_TITLE = re.compile(r"(={1,6}|#{1,6})[ \t]+(\S.*?)(?:[ \t]+\1)?[ \t]*")
_DELIMITER = re.compile(r"(-{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|\.{4,}|/{4,})[ \t]*")


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Raises ``UndecodableTextError``."""
    del limits
    lines, warnings = decoded_lines(data)
    return outline_blocks(_lines(lines), warnings)


def _lines(lines: list[str]) -> list[Line]:
    out: list[Line] = []
    fenced: str | None = None  # inside a listing/literal block: no titles there
    for line in lines:
        if _DELIMITER.fullmatch(line):
            fenced = None if fenced == line.strip() else (fenced or line.strip())
            continue
        match = None if fenced else _TITLE.fullmatch(line)
        out.append(Line(match.group(2), len(match.group(1))) if match else Line(line))
    return out
