"""HTML → paragraph-level blocks with heading paths (pure; selectolax's lexbor HTML5 parser).

Parsing: lexbor (``selectolax.lexbor``) builds the tree the way a browser does (WHATWG HTML
tree construction), with no depth limit and no text-node or attribute size limit (measured,
selectolax 1.0.2: 100,000 nested ``<div>``, a 12 MB text node, a 12 MB attribute: every word
after them kept), unlike libxml2 (lxml, hence unstructured), which silently drops everything
after 256 levels of nesting or a 10 MB text node. Speed: ≈10 MB/s of CPU on a generated 3 MB
page of SEC-filing-like tables, ≈40× unstructured (``bench/RESULTS.md``, section parsers).

Walking (our own, iterative, so depth costs no Python recursion):

- block elements (``p``, ``div``, ``li``, ``dt``/``dd``, ``blockquote``, ``figcaption``,
  ``summary``, ``details``, ``address``, ``section``, ``center``, ...) end the current block;
  other elements (``span``, ``b``, ``font``, ``a``, ``ins``, ``del``, ``mark``, custom elements)
  are inline and join their text without adding spaces, as a browser renders them;
- ``br`` ends a line; ``pre`` keeps its line breaks and indentation; elsewhere whitespace runs
  become one space;
- ``h1``-``h6`` set the heading path (``Block.section`` "Guide > Install > Linux"); a heading
  block carries the path ending with itself;
- a table row is one block, its cells joined by ``" | "``; a row whose cells hold several
  blocks (a layout table, a nested table) gives those blocks one by one instead;
- the ``<title>`` comes first, as a block of its own; SVG ``text``/``title``/``desc`` are blocks;
- ``<img alt>`` text is kept; ``script``, ``style``, ``template``, ``noscript``,
  ``iframe``, the rest of ``head`` and comments never become text; ``<nav>`` menus are dropped with a
  warning; ``<del>`` text is kept (it is visible on the page); nothing outside ``<main>`` is
  dropped (``aside``, ``header``, ``footer`` are content);
- ``data:`` URIs never become text (removed with a warning);
- ``link_targets=True`` (the Markdown reader) appends a link's target after its text:
  ``the portal (https://host/path)``.

Limits: lexbor's tree construction costs, per tag, a walk over the open elements (scope
checks), so it is quadratic in the nesting (measured, selectolax 1.0.2: 10,000 nested ``<div>``
0.15 s, 40,000 → 3.2 s; 40,000 × ``<ul><li></x>`` 38 s; 40,000 ``<x>`` then ``<p></p>`` ×
20,000: 10 s). Before parsing, ``tree.tree_cost`` replays the tree builder's stack on the
tags (unmatched end tags ignored as the builder ignores them, formatting elements re-opened):
a document nesting deeper than ``MAX_DEPTH`` or costing more than ``max_tree_work`` steps is
refused with ``ParseLimitError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.domain.errors import DependencyMissingError, ParseLimitError
from shared.domain.normalize import sanitize
from task_service.pipeline.decode import decode, sniff_html_charset
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.web.tree import tree_cost
from task_service.pipeline.readers.web.walker import Walker

if TYPE_CHECKING:
    pass


MAX_DEPTH = 10_000
"""Element nesting (as the HTML5 tree builder opens elements) above which a document is refused
(``ParseLimitError``)."""
TREE_WORK_BASE = 200_000_000
TREE_WORK_PER_CHAR = 20
# A document of n tags costs at most n² × (1 + RECONSTRUCT_WORK) (each tag walks ≤ n open elements,
# each text run re-opens ≤ n formatting elements): 1,000² × 101 ≈ 1.0e8, half TREE_WORK_BASE.
_FEW_TAGS = 1_000


def extract_html(text: str, *, link_targets: bool = False) -> ParsedDocument:
    """Return the blocks of an HTML document (decoded text), in reading order, with warnings.

    Blocks are not yet normalized (``parse.py`` does that). ``link_targets`` appends each
    link's target to its text. Raises ``ParseLimitError`` when the element nesting exceeds
    ``MAX_DEPTH`` or the tree builder's work ``max_tree_work``, or when lexbor fails to allocate
    the tree; ``DependencyMissingError`` when selectolax is not installed.
    """
    _check_depth(text)
    try:
        from selectolax.lexbor import LexborHTMLParser, SelectolaxError
    except ImportError as exc:  # pragma: no cover - declared dependency
        raise DependencyMissingError(f"selectolax is not installed: install 'selectolax>=1,<2' ({exc})") from exc
    try:
        tree = LexborHTMLParser(text)
        title = tree.css_first("head > title")
    except (SelectolaxError, RuntimeError) as exc:  # lexbor's status when it cannot allocate its tree
        raise ParseLimitError(
            f"the HTML parser could not build this document's tree ({exc}): it needs more memory than "
            "the parser may use (PARSE_MEMORY_LIMIT_MB)"
        ) from exc
    walker = Walker(link_targets)
    if title is not None:  # the page's name (browser tab, search results): content, before the body
        walker.walk(title)
    if tree.root is not None:
        walker.walk(tree.root)
    return walker.result()


def _check_depth(text: str) -> None:
    """Refuse (``ParseLimitError``) markup whose tree would nest deeper than ``MAX_DEPTH`` or
    cost lexbor's tree builder more than ``max_tree_work(len(text))`` scope-walk steps
    (:mod:`task_service.pipeline.readers.web.tree`). A document of at most ``_FEW_TAGS`` tags needs no
    replay: its work is below ``tags²``."""
    tags = text.count("<")
    if tags <= _FEW_TAGS:
        return
    cost = tree_cost(text, max_depth=MAX_DEPTH, max_work=max_tree_work(len(text)))
    if cost.depth > MAX_DEPTH:
        raise ParseLimitError(
            f"elements (HTML tags, or Markdown lists and block quotes) nested about {cost.depth} levels deep; "
            f"at most {MAX_DEPTH} levels are read (parse time grows with the square of the depth)"
        )
    if not cost.complete:
        raise ParseLimitError(
            f"elements nested so deep, so often (over {cost.work:,} steps of the HTML tree builder: open elements "
            f"re-checked, {cost.reopened:,} formatting elements re-opened) that parsing would take minutes"
        )


def max_tree_work(chars: int) -> int:
    """The tree-builder work (see ``tree.TreeCost.work``) allowed for a document of
    ``chars`` characters: ``TREE_WORK_BASE`` plus ``TREE_WORK_PER_CHAR`` per character (at
    7-12 ns per step in lexbor, ≈2-4 s for any document of a few MB)."""
    return TREE_WORK_BASE + TREE_WORK_PER_CHAR * chars


def with_warnings(parsed: ParsedDocument, warnings: tuple[str, ...]) -> ParsedDocument:
    """``parsed`` with the decoder's ``warnings`` first."""
    return ParsedDocument(parsed.blocks, (*warnings, *parsed.warnings)) if warnings else parsed


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """The HTML reader: decoded (BOM, ``<meta charset>``, detection), then :func:`extract_html`.

    Raises ``UndecodableTextError``, ``ParseLimitError`` (nesting)."""
    decoded = decode(data, declared=sniff_html_charset(data))
    return with_warnings(extract_html(sanitize(decoded.text)), decoded.warnings)
