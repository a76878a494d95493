"""The walk of a parsed HTML tree (selectolax/lexbor nodes) into blocks with heading paths (the
rules are ``html.py``'s module docstring): iterative, so depth costs no Python recursion."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from task_service.pipeline.document import Block, HeadingStack, ParsedDocument
from task_service.pipeline.readers.web import tags

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(frozen=True, slots=True)
class _Kind:
    """What the walk does with a node of some tag: ``enter`` returns whether to descend."""

    name: str
    enter: Callable[[Any, int], bool] | None = None
    leave: Callable[[Any, int], None] | None = None


# Text; inline (descend only: the default); skipped. Other kinds are built per walker.
_TEXT, _INLINE = _Kind("text"), _Kind("inline")
_SKIPPED = _Kind("skipped", enter=lambda node, depth: False)


@dataclass(slots=True)
class _Row:
    """An open table row: where its blocks start, and its cells so far.

    A cell is (first block, end block, text): a cell of one line keeps its text here (no block
    of its own); a cell with paragraphs, headings or a nested table has produced blocks.
    """

    start: int
    cells: list[tuple[int, int, str | None]] = field(default_factory=list)
    cell_start: int = -1


class Walker:
    """Depth-first walk over a lexbor tree that turns it into blocks (see module docstring).

    State: ``blocks`` so far; ``parts``, the text of the block being built; ``rows``, the open
    table rows (a stack: tables nest).
    """

    def __init__(self, link_targets: bool) -> None:
        self.link_targets = link_targets
        self.blocks: list[Block] = []
        self.parts: list[str] = []
        self.pre = False  # ``parts`` holds preformatted text
        self.rows: list[_Row] = []
        self.headings = HeadingStack()
        self.section: str | None = None
        self.heading_depth = -1  # stack depth of the open heading element, -1 when none
        self.pre_depth = 0
        self.links: list[tuple[str, int, int]] = []  # (href, len(blocks), len(parts)) at the link's start
        self.navs = 0
        self.data_uris = 0
        self.kinds = self._kinds()

    def _kinds(self) -> dict[str, _Kind]:
        block = _Kind("block", self._enter_block, self._leave_block)
        kinds = dict.fromkeys(tags.BLOCK_TAGS | tags.SVG_TEXT_TAGS, block)
        kinds.update(dict.fromkeys([*tags.SKIP_TAGS, "-comment", "-doctype"], _SKIPPED))
        kinds["-text"] = _TEXT
        kinds["br"] = _Kind("br", self._enter_br)
        kinds["img"] = _Kind("img", self._enter_img)
        kinds["nav"] = _Kind("nav", self._enter_nav)
        kinds["tr"] = _Kind("row", self._enter_row, self._leave_row)
        kinds["td"] = kinds["th"] = _Kind("cell", self._enter_cell, self._leave_cell)
        kinds["a"] = _Kind("link", self._enter_link, self._leave_link) if self.link_targets else _INLINE
        kinds.update(dict.fromkeys(tags.HEADINGS, _Kind("heading", self._enter_heading, self._leave_heading)))
        kinds.update(dict.fromkeys(tags.PRE_TAGS, _Kind("pre", self._enter_pre, self._leave_pre)))
        return kinds

    # ------------------------------------------------------------------ traversal

    def walk(self, root: Any) -> None:
        """Visit every node below ``root`` (iteratively: no recursion, any depth).

        The hot loop (≈0.7 million nodes in 3 MB of table-heavy HTML): inline elements cost no
        method call (text one, other elements one per enter and leave); ``open_kinds``
        parallels ``stack`` so leaving needs no lookup.
        """
        stack: list[Any] = []
        open_kinds: list[_Kind] = []
        kinds = self.kinds
        node = root
        while node is not None:
            kind = kinds.get(node.tag, _INLINE)
            if kind is _TEXT:
                self._text(node.text_content)
            elif kind is _INLINE or kind.enter(node, len(stack)):  # type: ignore[misc]
                child = node.child
                if child is not None:
                    stack.append(node)
                    open_kinds.append(kind)
                    node = child
                    continue
                if kind is not _INLINE:
                    kind.leave(node, len(stack))  # type: ignore[misc]
            node = node.next if stack else None
            while node is None and stack:
                node = stack.pop()
                kind = open_kinds.pop()
                if kind is not _INLINE:
                    kind.leave(node, len(stack))  # type: ignore[misc]
                node = node.next if stack else None

    def _text(self, text: str) -> None:
        if self.pre_depth:
            self.pre = True
            self.parts.append(text)
        elif self.parts or not text.isspace():  # a block's leading whitespace is dropped anyway
            if "\n" in text or "  " in text or "\t" in text:  # \r, \f: gone after ``sanitize``
                text = tags.WHITESPACE.sub(" ", text)
            self.parts.append(text)

    # ------------------------------------------------------------------ text and blocks

    def _take(self) -> str:
        """Return and clear the pending text, lines stripped (kept as they are in ``pre``)."""
        if not self.parts:
            return ""
        text = "".join(self.parts)
        self.parts.clear()
        if "data:" in text:
            text, count = tags.DATA_URI.subn("", text)
            self.data_uris += count
        if self.pre:
            self.pre = False
            return text.strip("\n") if text.strip() else ""
        if "\n" not in text:
            return text.strip()
        return "\n".join(line for line in (raw.strip() for raw in text.split("\n")) if line)

    def _flush(self) -> None:
        text = self._take()
        if text:
            self.blocks.append(Block(text, self.section))

    def result(self) -> ParsedDocument:
        """The blocks collected (call after ``walk``) and the warnings."""
        self._flush()
        warnings = []
        if self.navs:
            warnings.append(f"{self.navs} navigation menu(s) (<nav>) not indexed")
        if self.data_uris:
            warnings.append(f"{self.data_uris} embedded data: URI(s) removed from the text")
        return ParsedDocument(tuple(self.blocks), tuple(warnings))

    # ------------------------------------------------------------------ element handlers

    def _enter_block(self, node: Any, depth: int) -> bool:
        self._leave_block(node, depth)
        return True

    def _leave_block(self, node: Any, depth: int) -> None:
        if not self.parts:
            return
        if self.heading_depth >= 0:  # <h2><p>Title</p></h2>: the heading's text goes on
            if self.parts[-1] != " ":
                self.parts.append(" ")
        else:
            self._flush()

    def _enter_br(self, node: Any, depth: int) -> bool:
        self.parts.append("\n")
        return False

    def _enter_img(self, node: Any, depth: int) -> bool:
        alt = node.attributes.get("alt")
        if alt and not alt.isspace():
            self.parts.append(f" {tags.WHITESPACE.sub(' ', alt).strip()} ")
        return False

    def _enter_nav(self, node: Any, depth: int) -> bool:
        self.navs += 1
        return False

    def _enter_pre(self, node: Any, depth: int) -> bool:
        self._flush()
        self.pre_depth += 1
        return True

    def _leave_pre(self, node: Any, depth: int) -> None:
        self._flush()
        self.pre_depth -= 1

    def _enter_heading(self, node: Any, depth: int) -> bool:
        if self.heading_depth < 0:
            self._flush()
            self.heading_depth = depth
        return True

    def _leave_heading(self, node: Any, depth: int) -> None:
        if depth != self.heading_depth:
            return
        self.heading_depth = -1
        text = self._take()
        if not text:
            return
        level = tags.HEADINGS[node.tag]
        self.section = self.headings.enter(level, text)
        self.blocks.append(Block(text, self.section))

    def _enter_row(self, node: Any, depth: int) -> bool:
        if self.parts:
            self._flush()
        self.rows.append(_Row(len(self.blocks)))
        return True

    def _enter_cell(self, node: Any, depth: int) -> bool:
        if self.parts:
            self._flush()
        if not self.rows:
            return True
        row = self.rows[-1]
        text = None if self.pre_depth else self._lone_text(node)
        if text is not None and "data:" not in text:  # the usual cell: taken whole, not walked
            row.cells.append((len(self.blocks), len(self.blocks), text))
            return False
        row.cell_start = len(self.blocks)
        return True

    def _lone_text(self, node: Any) -> str | None:
        """The text of an element that is empty or holds one text node, possibly wrapped in
        inline elements that each hold only the next (``<td><font><span>12</span></font></td>``);
        ``None`` for anything else."""
        child = node.child
        while child is not None and child.next is None:
            kind = self.kinds.get(child.tag, _INLINE)
            if kind is _TEXT:
                return str(tags.WHITESPACE.sub(" ", child.text_content).strip())
            if kind is not _INLINE:
                return None
            child = child.child
        return "" if child is None else None

    def _leave_cell(self, node: Any, depth: int) -> None:
        """A cell that gave one line (``<td><p>12</p></td>``) becomes a text cell of the row."""
        self._flush()
        if not self.rows or self.rows[-1].cell_start < 0:
            return
        row = self.rows[-1]
        start, row.cell_start = row.cell_start, -1
        blocks = self.blocks
        if len(blocks) == start + 1 and "\n" not in blocks[-1].text:
            row.cells.append((start, start, blocks.pop().text))
        else:
            row.cells.append((start, len(blocks), None if len(blocks) > start else ""))

    def _leave_row(self, node: Any, depth: int) -> None:
        """One block "a | b | c" when every cell is one line; otherwise (a layout table, cells of
        several paragraphs) the cells' blocks in order, one-line cells as blocks of their own."""
        self._flush()
        if not self.rows:
            return
        row = self.rows.pop()
        blocks = self.blocks
        if len(blocks) == row.start:
            texts = [text or "" for _, _, text in row.cells]
            while texts and not texts[-1]:
                texts.pop()
            if texts:
                blocks.append(Block(" | ".join(texts), self.section))
            return
        merged: list[Block] = []
        position = row.start
        for _, end, text in row.cells:
            merged.extend(blocks[position:end])
            position = max(position, end)
            if text:
                merged.append(Block(text, self.section))
        merged.extend(blocks[position:])
        blocks[row.start :] = merged

    def _enter_link(self, node: Any, depth: int) -> bool:
        href = (node.attributes.get("href") or "").strip()
        self.links.append((href, len(self.blocks), len(self.parts)))
        return True

    def _leave_link(self, node: Any, depth: int) -> None:
        if not self.links:
            return
        href, block_count, start = self.links.pop()
        if not href or href.lower().startswith(tags.SKIPPED_HREF) or block_count != len(self.blocks):
            return  # no usable target, or the link's text spans blocks
        if href.removeprefix("mailto:") not in "".join(self.parts[start:]):
            self.parts.append(f" ({href})")
