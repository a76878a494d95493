"""Text with headings → paragraph blocks carrying their heading path (pure).

A format reader turns its lines into :class:`Line` values (a heading with its level, or a text line)
and :func:`outline_blocks` does the rest: paragraphs are runs of text lines between blank lines or
headings; a heading is a block of its own whose ``section`` ends with itself (``HeadingStack``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shared.domain.normalize import sanitize
from task_service.pipeline.decode import decode
from task_service.pipeline.document import Block, HeadingStack, ParsedDocument

__all__ = ["Line", "decoded_lines", "outline_blocks"]


@dataclass(frozen=True, slots=True)
class Line:
    """One line: ``level`` > 0 for a heading (1 = top), 0 for text; ``text`` without its markup."""

    text: str
    level: int = 0


def decoded_lines(data: bytes) -> tuple[list[str], tuple[str, ...]]:
    """The document's lines (``\\n`` ends) and the decoder's warnings. Raises ``UndecodableTextError``."""
    decoded = decode(data)
    return sanitize(decoded.text).split("\n"), decoded.warnings


def outline_blocks(lines: Iterable[Line], warnings: tuple[str, ...] = ()) -> ParsedDocument:
    """Blocks of ``lines``: each heading, then each paragraph under the innermost open heading."""
    stack = HeadingStack()
    blocks: list[Block] = []
    paragraph: list[str] = []

    def flush() -> None:
        if any(p.strip() for p in paragraph):
            blocks.append(Block("\n".join(paragraph).strip("\n"), stack.path))
        paragraph.clear()

    for line in lines:
        if line.level:
            flush()
            title = " ".join(line.text.split())
            if title:
                blocks.append(Block(title, stack.enter(line.level, title)))
        elif line.text.strip():
            paragraph.append(line.text.rstrip())
        else:
            flush()
    flush()
    return ParsedDocument(tuple(blocks), warnings)
