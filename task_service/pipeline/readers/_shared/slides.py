"""What the slide readers (PPTX, ODP) share: a slide's reading order and its blocks (pure).

A slide's shapes become ``Item``s (their texts and position); ``slide_blocks`` orders them: the
title first, then top to bottom, left to right (ties keep document order, ``list.sort`` being
stable), names the section after the title (or "Slide N"; "(hidden slide)" appended) and puts
the speaker notes last, as one block "Speaker notes: …".
"""

from __future__ import annotations

from dataclasses import dataclass

from task_service.pipeline.document import Block

SLIDE_WARNINGS = {
    "image": ("image not read (no OCR)", "images not read (no OCR)"),
    "chart": ("chart read as its titles only", "charts read as their titles only"),
    "object": ("embedded object (OLE, media) not read", "embedded objects (OLE, media) not read"),
    "comment": ("comment not indexed", "comments not indexed"),
}
"""Warnings of what the slide readers count (``document.count_warnings``'s sentences)."""


@dataclass
class Item:
    """One shape's texts (paragraphs, table rows, alt text) with its position (y, x); groups are flattened."""

    position: tuple[float, float]
    texts: list[str]
    title: bool = False


def slide_blocks(number: int, items: list[Item], notes: list[str], *, hidden: bool = False) -> list[Block]:
    """The blocks of slide ``number`` (1-based, the blocks' ``page``): ``items`` in reading order, then
    ``notes`` as one block; ``items`` is sorted in place."""
    items.sort(key=lambda item: (not item.title, item.position))
    titles = [text for item in items if item.title for text in item.texts]
    section = " ".join(" ".join(titles).split()) or f"Slide {number}"
    if hidden:
        section += " (hidden slide)"
    blocks = [Block(text, section, number) for item in items for text in item.texts]
    if notes:
        blocks.append(Block("Speaker notes: " + "\n".join(notes), section, number))
    return blocks
