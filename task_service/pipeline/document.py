"""What a parser hands to the chunker: paragraph-level blocks with their provenance (pure).

Every format reader (``pdf.py``, ``docx.py``, ``html.py``, ``markdown.py``, plain text in
``parse.py``) returns a :class:`ParsedDocument`. A block is one paragraph, heading, list item,
table row or cell group, caption, footnote...; its ``text`` is not yet normalized (``parse.py``
normalizes every block and drops empty ones). ``section`` is the heading path at the block
("Guide > Install > Linux"; a heading block carries the path that ends with itself), ``page``
the 1-based PDF page. ``warnings`` are sentences for the document API about what was not
indexed or was altered ("3 images ignored", "NUL bytes removed").
"""

from __future__ import annotations

from dataclasses import dataclass, field

SECTION_SEPARATOR = " > "


@dataclass(frozen=True, slots=True)
class Block:
    """One paragraph-level piece of text; ``page`` 1-based (PDF only), ``section`` a heading path."""

    text: str
    section: str | None = None
    page: int | None = None


@dataclass(frozen=True)
class ParsedDocument:
    """A parser's result: blocks in reading order and warnings (human-readable sentences)."""

    blocks: tuple[Block, ...]
    warnings: tuple[str, ...] = field(default=())

    @property
    def text(self) -> str:
        """All block texts joined by a blank line (what the chunker's text view sees)."""
        return "\n\n".join(block.text for block in self.blocks)


def section_path(headings: list[str]) -> str | None:
    """Join a heading stack into a section path; ``None`` for an empty stack."""
    parts = [" ".join(h.split()) for h in headings if h and h.strip()]
    return SECTION_SEPARATOR.join(parts) if parts else None
