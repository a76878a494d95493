"""reStructuredText (``.rst``) → paragraph blocks under their section titles (pure).

A section title is a line of text underlined (and optionally overlined) by a line of one repeated
punctuation character at least as long as the title (docutils' rule, "Sections" of the
reStructuredText Markup Specification); levels follow the order in which each adornment style
(character, with or without overline) first appears, as docutils assigns them. A line of 4 or more
adornment characters alone between blank lines is a transition, not a title. Everything else is
kept as text (directives, literal blocks, tables), so every word stays searchable.
"""

from __future__ import annotations

import re

from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.markup._outline import Line, decoded_lines, outline_blocks

__all__ = ["read"]

#: docutils' adornment characters: any non-alphanumeric printable 7-bit ASCII character.
_ADORNMENT = re.compile(r"""([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])\1+\s*""")


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Raises ``UndecodableTextError``."""
    del limits  # one pass over the lines
    lines, warnings = decoded_lines(data)
    return outline_blocks(_lines(lines), warnings)


def _adornment(line: str) -> str | None:
    return line[0] if _ADORNMENT.fullmatch(line) and len(line.rstrip()) >= 2 else None


def _lines(lines: list[str]) -> list[Line]:
    styles: list[tuple[str, bool]] = []
    out: list[Line] = []
    i = 0
    while i < len(lines):
        title, under, over, used = _title_at(lines, i)
        if title is not None and under is not None:
            style = (under, over)
            if style not in styles:
                styles.append(style)
            out.append(Line(title, styles.index(style) + 1))
            i += used
            continue
        if _adornment(lines[i]) is None or lines[i].strip() == "":
            out.append(Line(lines[i]))
        i += 1
    return out


def _title_at(lines: list[str], i: int) -> tuple[str | None, str | None, bool, int]:
    """(title, adornment char, overlined, lines used) when a section title starts at line ``i``."""
    line = lines[i]
    char = _adornment(line)
    nxt = lines[i + 1] if i + 1 < len(lines) else ""
    if char is not None and i + 2 < len(lines) and nxt.strip() and _adornment(lines[i + 2]) == char:
        width = len(lines[i + 2].rstrip())
        if len(nxt.strip()) <= width:
            return nxt.strip(), char, True, 3
    under = _adornment(nxt)
    if char is None and line.strip() and not line.startswith((" ", "\t")) and under is not None:
        if len(nxt.rstrip()) >= len(line.rstrip()):
            return line.strip(), under, False, 2
    return None, None, False, 1
