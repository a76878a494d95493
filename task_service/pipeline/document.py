"""What a parser hands to the chunker: paragraph-level blocks with their provenance (pure).

Every format reader (``pdf.py``, ``docx.py``, ``html.py``, ``markdown.py``, plain text in
``parse.py``) returns a :class:`ParsedDocument`. A block is one paragraph, heading, list item,
table row or cell group, caption, footnote...; its ``text`` is not yet normalized (``parse.py``
normalizes every block and drops empty ones). ``section`` is the heading path at the block
("Guide > Install > Linux"; a heading block carries the path that ends with itself), ``page``
the 1-based PDF page. ``warnings`` are sentences for the document API about what was not
indexed or was altered ("3 images ignored", "NUL bytes removed").

What a reader emits is bounded as it emits it: inside :func:`text_budget` (``parse.py`` opens one
per document, ``PARSE_MAX_TEXT_CHARS``) every :class:`Block` made is charged its characters, and
the block past the budget raises ``ParseLimitError`` with the figure, so a small file that repeats
one part (an EPUB spine, a key path on every leaf, a header on every cell) stops at the budget,
not after minutes. A block that only re-states text already charged (normalized, or re-sectioned
by a container such as a mail message) is made with :meth:`Block.restated`, not charged again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from shared.domain.errors import TextBudgetError

SECTION_SEPARATOR = " > "


@dataclass(frozen=True, slots=True)
class Block:
    """One paragraph-level piece of text; ``page`` 1-based (PDF only), ``section`` a heading path."""

    text: str
    section: str | None = None
    page: int | None = None

    def __post_init__(self) -> None:
        budget = _BUDGET.get()
        if budget is not None:
            budget.charge(len(self.text))

    @classmethod
    def restated(cls, text: str, section: str | None = None, page: int | None = None) -> Block:
        """A block of text already charged to the budget (normalized, re-sectioned): not charged again."""
        block = object.__new__(cls)
        object.__setattr__(block, "text", text)
        object.__setattr__(block, "section", section)
        object.__setattr__(block, "page", page)
        return block


class TextBudget:
    """Characters of block text one document may give: ``limit`` (``PARSE_MAX_TEXT_CHARS``), ``used``."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def charge(self, chars: int) -> None:
        """Count ``chars`` more characters; ``TextBudgetError`` (``parse_limit``) naming the figure
        once past ``limit``."""
        self.used += chars
        if self.used > self.limit:
            raise TextBudgetError(
                f"the document gives more than {self.limit:,} characters of text (at least {self.used:,} so far); "
                "the limit is PARSE_MAX_TEXT_CHARS"
            )


_BUDGET: ContextVar[TextBudget | None] = ContextVar("text_budget", default=None)


@contextmanager
def text_budget(limit: int) -> Iterator[TextBudget]:
    """Charge every :class:`Block` made inside to one budget of ``limit`` characters. Inside an
    enclosing budget (a document within a document: a mail attachment) the enclosing one is kept,
    so the whole file counts once."""
    current = _BUDGET.get()
    if current is not None:
        yield current
        return
    budget = TextBudget(limit)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


@dataclass(frozen=True)
class ParsedDocument:
    """A parser's result: blocks in reading order and warnings (human-readable sentences)."""

    blocks: tuple[Block, ...]
    warnings: tuple[str, ...] = field(default=())

    @property
    def text(self) -> str:
        """All block texts joined by a blank line (what the chunker's text view sees)."""
        return "\n\n".join(block.text for block in self.blocks)


@dataclass
class HeadingStack:
    """The open headings of a document walk, as (level, text); a smaller level is a higher heading."""

    open: list[tuple[int, str]] = field(default_factory=list)

    def enter(self, level: int, text: str) -> str | None:
        """Close the headings at ``level`` or deeper, open ``text``; returns the new ``path``."""
        while self.open and self.open[-1][0] >= level:
            self.open.pop()
        self.open.append((level, text))
        return self.path

    @property
    def path(self) -> str | None:
        """The section path of the open headings (``section_path``)."""
        return section_path([text for _, text in self.open])


def section_path(headings: list[str]) -> str | None:
    """Join a heading stack into a section path; ``None`` for an empty stack."""
    parts = [" ".join(h.split()) for h in headings if h and h.strip()]
    return SECTION_SEPARATOR.join(parts) if parts else None


def count_warnings(counts: Mapping[str, int], sentences: Mapping[str, tuple[str, str]]) -> tuple[str, ...]:
    """Warnings for what a reader counted and did not read: ``"3 images ignored (no OCR)"``.

    ``sentences``: kind → (singular, plural) words after the number, in the order the warnings are
    given; kinds counted 0 (or absent from ``counts``) give none. Numbers use thousands separators.
    """
    return tuple(
        f"{n:,} {one if n == 1 else many}" for kind, (one, many) in sentences.items() if (n := counts.get(kind, 0))
    )
