"""What an HTML document costs the HTML5 tree builder, before it is parsed (pure).

lexbor (like every WHATWG tree builder) checks "has an element in scope" by walking the stack of
open elements for most start and end tags (``<p>``, ``<div>``, ``<li>``, ``</p>``...): the
walk is as long as the stack, so parse time is ``Σ stack depth`` over such tags, quadratic in
the nesting (measured, selectolax 1.0.2 on this machine: 7-12 ns per element walked;
``<ul><li></x>`` × 40,000: 38 s; 40,000 ``<x>`` then ``<p></p>`` × 20,000: 10 s). Counting
tags (start minus end) misjudges the stack: the tree builder ignores an end tag whose element
is not open, or is hidden behind a "special" element, and re-opens formatting elements that a
block closed. So :func:`tree_cost` replays the tree builder's stack of open elements on the
tags alone, following the WHATWG HTML standard §13.2.6.4.7 "in body" rules that push and pop
(https://html.spec.whatwg.org/multipage/parsing.html#parsing-main-inbody):

- end tags close only an element in scope (default, button, list-item or table scope) or, for
  other names, one with no special element above it; ``</html>``, ``</body>`` close nothing;
- ``<p>``-closing start tags close an open ``<p>``; ``<li>``, ``<dd>``/``<dt>``, headings,
  ``<option>``, ``<a>``, ``<nobr>``, ``<button>`` and table parts close their predecessor;
- formatting elements (``b``, ``font``, ``a``...) closed by a block are re-opened at the next
  start tag (the list of active formatting elements, with its "Noah's Ark" limit of three
  equal entries and its markers at cells and captions); an end tag with a block above its
  element (the adoption agency) leaves the stack as deep as it was;
- comments, bogus comments, quoted attribute values and the text of ``script``, ``style``,
  ``textarea``, ``title``... are not tags; ``/>`` closes an element only inside SVG or MathML.

Cost: ``work`` counts, per tag, the open elements a scope check may walk (7-12 ns each in
lexbor), plus ``RECONSTRUCT_WORK`` for every formatting element re-opened: each is a new element
that lexbor creates and inserts (0.2-0.27 µs measured, selectolax 1.0.2) and our walker then
visits, ≈100 scope steps. Without that term, 8,000 ``<b c=i>`` (distinct attributes, so Noah's
Ark keeps them all) closed by one ``</div>``, then 9,000 ``<div>x</div>``, re-open 72 million
elements: 126 s, then a failed allocation. The active formatting list is capped at the depth
limit (each entry would be re-opened as one more level of nesting).

Where the replay simplifies (implied ``tbody``/``tr``, foster parenting, "in select" mode,
breaking out of foreign content), it keeps more elements open than the browser would, never
fewer: the cost is an upper bound. The replay itself is linear (each element is pushed and
popped once; scope checks are index comparisons).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from task_service.pipeline.readers.web.stack import HEADINGS, SPECIAL, SPECIAL_NOT_ADP, Entry, Stack

_VOID = frozenset("area base basefont bgsound br col embed frame hr image img input keygen link meta param source "
                  "track wbr".split())
_FORMATTING = frozenset("a b big code em font i nobr s small strike strong tt u".split())
_CLOSES_P = HEADINGS | frozenset(
    "address article aside blockquote center details dialog dir div dl fieldset figcaption figure footer header "
    "hgroup main menu nav ol p search section summary ul pre listing form plaintext table hr xmp li dd dt".split()
)
_TABLE_PARTS = frozenset("caption colgroup tbody thead tfoot tr td th".split())
# Start tags that insert without re-opening formatting elements first (the others, and text, do).
_NO_RECONSTRUCT = (_CLOSES_P | _TABLE_PARTS | frozenset("table textarea iframe noembed noframes noscript script style "
                                                        "template title".split())) - {"xmp"}
_NOT_PUSHED = frozenset("html head body frameset".split())
_RAW_TEXT = frozenset("script style textarea title xmp iframe noembed noframes".split())
_FOREIGN = ("svg", "math")
_BREAKOUT = HEADINGS | frozenset(
    "b big blockquote body br center code dd div dl dt em embed head hr i img li listing menu meta nobr ol p pre "
    "ruby s small span strong strike sub sup table tt u ul var".split()
)

# One token: a comment, a bogus comment (<!x>, <?x>, </ x>), or a tag with its attributes (a
# quoted value only after "=", as the tokenizer reads it). Group 1 "/" for end tags, 2 the name,
# 3 the attributes, 4 the closing ">" (empty at the end of the text).
_TOKEN = re.compile(
    r"<!--.*?(?:-->|\Z)|<[!?][^>]*>?|</(?![A-Za-z])[^>]*>?"
    r"|<(/?)([A-Za-z][^\t\n\f\r />]*)((?:[^>=]|=[\t\n\f\r ]*\"[^\"]*\"|=[\t\n\f\r ]*'[^']*'|=)*)(>?)",
    re.DOTALL,
)


#: Scope-walk steps one re-opened formatting element costs (module docstring).
RECONSTRUCT_WORK = 100


@dataclass(frozen=True, slots=True)
class TreeCost:
    """``depth``: the deepest stack of open elements (html and body included), or the active
    formatting elements when more; ``work``: the elements the tree builder's scope checks may
    walk, summed over tags, plus ``RECONSTRUCT_WORK`` per re-opened element (``reopened``);
    ``complete``: False when the replay stopped early at a ``limit``."""

    depth: int
    work: int
    complete: bool = True
    reopened: int = 0


def tree_cost(text: str, *, max_depth: int | None = None, max_work: int | None = None) -> TreeCost:
    """Replay the HTML5 tree builder's stack over the tags of ``text`` (see the module
    docstring); stop early (``complete=False``) once the depth passes ``max_depth`` or the work
    passes ``max_work`` (the active formatting list counts as depth). Linear in ``len(text)``
    up to those limits."""
    stack = Stack()
    work = 0
    position = 0
    search = _TOKEN.search
    while (match := search(text, position)) is not None:
        if match.start() > position and not text[position:match.start()].isspace():
            stack.reconstruct()  # text re-opens the formatting elements a block closed
        position = match.end()
        name = match.group(2)
        if name is None:
            continue  # a comment
        name = name.lower()
        work += len(stack.names) + 2
        if match.group(1):
            _end_tag(stack, name)
        elif _start_tag(stack, name, match.group(3)):
            position = len(text) if name == "plaintext" else _raw_text_end(text, name, position)
            stack.pop_to(len(stack.names) - 1)
        depth = max(stack.peak, len(stack.active)) + 2
        spent = work + RECONSTRUCT_WORK * stack.reconstructed
        if (max_depth is not None and depth > max_depth) or (max_work is not None and spent > max_work):
            return TreeCost(depth, spent, complete=False, reopened=stack.reconstructed)
    depth = max(stack.peak, len(stack.active)) + 2
    return TreeCost(depth, work + RECONSTRUCT_WORK * stack.reconstructed, reopened=stack.reconstructed)


def _raw_text_end(text: str, name: str, start: int) -> int:
    """Where the raw text of a ``script``/``style``/... element opened at ``start`` ends (its
    end tag's start; the end of ``text`` if it has none)."""
    end = re.compile(rf"</{name}[\t\n\f\r />]", re.IGNORECASE).search(text, start)
    return len(text) if end is None else end.start()


def _start_tag(stack: Stack, name: str, attributes: str) -> bool:
    """Apply a start tag; True when it opened a raw-text element (its content is no markup)."""
    if stack.in_foreign():
        if name not in _BREAKOUT:
            if not attributes.rstrip().endswith("/"):
                stack.push(name, foreign=stack.foreign[-1])
            return False
        _leave_foreign(stack)
    if name in _FOREIGN:
        stack.reconstruct()
        if not attributes.rstrip().endswith("/"):
            stack.push(name, foreign=name)
        return False
    if name in _NOT_PUSHED or (name in _TABLE_PARTS and stack.last("table") < 0 and stack.last("template") < 0):
        return False  # merged into html/body, or a table part outside a table: ignored
    _close_before(stack, name)
    if name not in _NO_RECONSTRUCT:
        stack.reconstruct()
    if name in _VOID:
        return False
    if name == "plaintext":
        stack.push(name)
        return True  # the rest of the document is text
    entry = stack.add_formatting(name, f"{name} {attributes.strip()}") if name in _FORMATTING else None
    stack.push(name, entry)
    return name in _RAW_TEXT


def _close_before(stack: Stack, name: str) -> None:
    """The elements a start tag ``name`` closes before it is inserted."""
    if name in _CLOSES_P and (p := stack.in_scope("p", "button")) >= 0:
        stack.pop_to(p)
    if name in HEADINGS and stack.names and stack.names[-1] in HEADINGS:
        stack.pop_to(len(stack.names) - 1)
    elif name == "li" or name in ("dd", "dt"):
        siblings = ("li",) if name == "li" else ("dd", "dt")
        index = max(stack.last(sibling) for sibling in siblings)
        if index >= 0 and index >= stack.last_of(SPECIAL_NOT_ADP):
            stack.pop_to(index)
    elif name in ("a", "nobr"):
        entry = stack.find_active(name)
        if entry is not None:
            _adopt(stack, name, entry)
    elif name == "button" and (index := stack.in_scope("button")) >= 0:
        stack.pop_to(index)
    elif name in ("option", "optgroup") and stack.names and stack.names[-1] == "option":
        stack.pop_to(len(stack.names) - 1)
    elif name in _TABLE_PARTS or name == "table":
        _close_table_part(stack, name)


def _leave_foreign(stack: Stack) -> None:
    """Pop SVG/MathML elements until the current node is HTML (or an integration point)."""
    while stack.in_foreign():
        stack.pop_to(len(stack.names) - 1)


def _html_between(stack: Stack, index: int) -> bool:
    """Whether an HTML element is open above ``index`` (bounded: checks the nearest 64)."""
    above = stack.foreign[index + 1:][-64:]
    return len(above) == 64 or not all(above)


def _close_table_part(stack: Stack, name: str) -> None:
    """A cell closes the open cell; a row the open row (and cell); a body, caption or nested
    table in table context everything back to the table."""
    table = stack.last_of("table")
    cell = stack.last_of("cell")
    if name in ("td", "th", "tr") and cell > table:
        stack.pop_to(cell)
    row = stack.last_of("row")
    if name == "tr" and row > table:
        stack.pop_to(row)
    elif name == "table" and table >= 0 and table > max(cell, stack.last("caption")):
        stack.pop_to(table)  # <table> in a table (not in a cell): closes it
    elif name in ("tbody", "thead", "tfoot", "caption", "colgroup") and table >= 0:
        stack.pop_to(table + 1)
    if name in ("tr", "td", "th") and stack.last_of("table-body") < stack.last_of("table"):
        stack.push("tbody")  # implied
    if name in ("td", "th") and stack.last_of("row") < stack.last_of("table"):
        stack.push("tr")  # implied


def _adopt(stack: Stack, name: str, entry: Entry) -> None:
    """End tag of a formatting element (the adoption agency, simplified): popped with what is
    above it when no special element is; otherwise the stack keeps its depth."""
    index = stack.last(name)
    if entry.open and index >= 0 and index > stack.last_of("special"):
        stack.pop_to(index, closed=entry)
    else:
        stack.forget(entry)
        if entry.open and index >= 0:
            stack.entries[index] = None  # moved below the block; no longer re-opened


def _end_tag(stack: Stack, name: str) -> None:
    if stack.in_foreign() and _foreign_end_tag(stack, name):
        return
    if name == "form":  # removes the form element only, not what is open inside it
        if stack.names and stack.names[-1] == "form":
            stack.pop_to(len(stack.names) - 1)
        return
    if name in _NOT_PUSHED or name == "br":
        return
    if name in _FORMATTING and (entry := stack.find_active(name)) is not None:
        if not entry.open:
            stack.forget(entry)
        elif stack.in_scope(name) >= 0:
            _adopt(stack, name, entry)
        return
    index = _closed_by(stack, name)
    if index >= 0:
        stack.pop_to(index)


def _foreign_end_tag(stack: Stack, name: str) -> bool:
    """An end tag met in SVG/MathML content; True when it was handled there."""
    if name in ("p", "br"):
        _leave_foreign(stack)  # ends the SVG/MathML content, then handled as HTML
        return False
    index = stack.last(name)
    if index >= 0 and stack.foreign[index] and not _html_between(stack, index):
        stack.pop_to(index)
        return True
    return False


def _closed_by(stack: Stack, name: str) -> int:
    """The index of the element an HTML end tag ``name`` closes (with all above it), or -1."""
    if name in HEADINGS:
        index = stack.last_of("heading")
        return index if index > stack.last_of("scope") else -1
    if name in SPECIAL:
        scope = {"p": "button", "li": "list"}.get(name, "table" if name in _TABLE_PARTS or name == "table" else "scope")
        return stack.in_scope(name, scope)
    index = stack.last(name)  # any other end tag: the topmost of that name, unless a special one is above it
    return index if index > stack.last_of("special") else -1
