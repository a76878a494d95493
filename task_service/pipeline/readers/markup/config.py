"""Configuration and log files (YAML, TOML, INI / .cfg, .log) → blocks with their sections (pure).

Lines are kept as they are (indentation and line breaks: a key and its value stay on one line);
blank lines separate blocks. Sections: an INI / TOML table header (``[server]``, ``[[servers]]``)
opens section ``server``; in YAML a top-level key (``database:`` at column 0) does, and a
``---`` line ends a document. A log (``log.py``) has no sections. This is all the structure search needs from
such files: a value is found with the key and table that name it.
"""

from __future__ import annotations

import re

from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.markup._outline import decoded_lines

__all__ = ["line_blocks", "read"]

_TABLE = re.compile(r"\[\[?\s*([^\]\n]+?)\s*\]\]?\s*(?:[#;].*)?")
_YAML_KEY = re.compile(r"""([A-Za-z0-9_][\w .\-/]*|"[^"]+"|'[^']+')\s*:(?:\s|$)""")


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of a configuration or log file (module docstring). Raises ``UndecodableTextError``."""
    del limits
    lines, warnings = decoded_lines(data)
    return ParsedDocument(tuple(line_blocks(lines)), warnings)


def _section(line: str) -> str | None:
    table = _TABLE.fullmatch(line)
    if table:
        return table.group(1)
    key = _YAML_KEY.match(line)
    return key.group(1).strip("\"'") if key and not line.startswith(("-", "#", " ", "\t")) else None


def line_blocks(lines: list[str], *, sections: bool = True) -> list[Block]:
    """Blocks of ``lines`` split at blank lines (and ``---``); with ``sections``, at each table
    header or top-level key too, which becomes the ``section`` of what follows."""
    blocks: list[Block] = []
    section: str | None = None
    paragraph: list[str] = []

    def flush() -> None:
        if any(line.strip() for line in paragraph):
            blocks.append(Block("\n".join(paragraph), section))
        paragraph.clear()

    for line in lines:
        if line.strip() == "---":
            flush()
            section = None
            continue
        name = _section(line) if sections else None
        if name is not None and name != section:
            flush()
            section = name
        if line.strip():
            paragraph.append(line.rstrip())
        else:
            flush()
    flush()
    return blocks
