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

Where the replay simplifies (implied ``tbody``/``tr``, foster parenting, "in select" mode,
breaking out of foreign content), it keeps more elements open than the browser would, never
fewer: the cost is an upper bound. The replay itself is linear (each element is pushed and
popped once; scope checks are index comparisons).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPECIAL = frozenset(
    "address applet area article aside base basefont bgsound blockquote body br button caption center col "
    "colgroup dd details dialog dir div dl dt embed fieldset figcaption figure footer form frame frameset h1 h2 h3 "
    "h4 h5 h6 head header hgroup hr html iframe img input keygen li link listing main marquee menu meta nav "
    "noembed noframes noscript object ol p param plaintext pre script search section select source style summary "
    "table tbody td template textarea tfoot th thead title tr track ul wbr xmp".split()
)
_VOID = frozenset("area base basefont bgsound br col embed frame hr image img input keygen link meta param source "
                  "track wbr".split())
_SCOPE = frozenset("applet caption html table td th marquee object template".split())
_FORMATTING = frozenset("a b big code em font i nobr s small strike strong tt u".split())
_MARKERS = frozenset("applet caption marquee object td th template".split())
_HEADINGS = frozenset(f"h{n}" for n in range(1, 7))
_CLOSES_P = _HEADINGS | frozenset(
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
# Foreign (SVG/MathML) elements whose children are HTML again, and the HTML start tags that end
# foreign content (§13.2.6.5, "rules for parsing tokens in foreign content").
_INTEGRATION = {"svg": frozenset(("foreignobject", "desc", "title")),
                "math": frozenset(("mi", "mo", "mn", "ms", "mtext", "annotation-xml"))}
_BREAKOUT = _HEADINGS | frozenset(
    "b big blockquote body br center code dd div dl dt em embed head hr i img li listing menu meta nobr ol p pre "
    "ruby s small span strong strike sub sup table tt u ul var".split()
)
# Index categories: which "last index of" each element name updates when pushed.
_SPECIAL_NOT_ADP = "special-but-address-div-p"
_CATEGORIES: dict[str, frozenset[str]] = {
    "special": _SPECIAL,
    _SPECIAL_NOT_ADP: _SPECIAL - {"address", "div", "p"},
    "scope": _SCOPE,
    "button": _SCOPE | {"button"},
    "list": _SCOPE | {"ol", "ul"},
    "table": frozenset(("html", "table", "template")),
    "heading": _HEADINGS,
    "cell": frozenset(("td", "th")),
    "row": frozenset(("tr",)),
    "table-body": frozenset(("tbody", "thead", "tfoot")),
}
_NAME_CATEGORIES: dict[str, tuple[str, ...]] = {}
for _category, _names in _CATEGORIES.items():
    for _name in _names:
        _NAME_CATEGORIES[_name] = (*_NAME_CATEGORIES.get(_name, ()), _category)

# One token: a comment, a bogus comment (<!x>, <?x>, </ x>), or a tag with its attributes (a
# quoted value only after "=", as the tokenizer reads it). Group 1 "/" for end tags, 2 the name,
# 3 the attributes, 4 the closing ">" (empty at the end of the text).
_TOKEN = re.compile(
    r"<!--.*?(?:-->|\Z)|<[!?][^>]*>?|</(?![A-Za-z])[^>]*>?"
    r"|<(/?)([A-Za-z][^\t\n\f\r />]*)((?:[^>=]|=[\t\n\f\r ]*\"[^\"]*\"|=[\t\n\f\r ]*'[^']*'|=)*)(>?)",
    re.DOTALL,
)


@dataclass(slots=True)
class _Entry:
    """An entry of the list of active formatting elements: its name, its key (name and
    attributes: Noah's Ark compares both), its marker level and whether its element is open."""

    name: str
    key: str
    level: int
    open: bool = True


@dataclass(frozen=True, slots=True)
class TreeCost:
    """``depth``: the deepest stack of open elements (html and body included); ``work``: the
    elements the tree builder's scope checks may walk, summed over tags; ``complete``: False
    when the replay stopped early at a ``limit``."""

    depth: int
    work: int
    complete: bool = True


_SLOTS = {category: i for i, category in enumerate(_CATEGORIES)}
_NAME_SLOTS = {name: tuple(_SLOTS[c] for c in categories) for name, categories in _NAME_CATEGORIES.items()}
_INTEGRATION_SLOTS = tuple(_SLOTS[c] for c in ("special", _SPECIAL_NOT_ADP, "scope", "button", "list"))
_NONE = (-1,) * len(_SLOTS)


class _Stack:
    """The replayed stack of open elements and the list of active formatting elements.

    Per open element: its name, namespace (``"svg"``, ``"math"``, ``""`` for HTML), formatting
    entry, and ``tops``: the index of the topmost element of each category at or below it, so a
    scope check is one comparison and a pop needs no bookkeeping.
    """

    __slots__ = ("active", "by_key", "by_name", "entries", "foreign", "level", "names", "peak", "positions", "tops")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.foreign: list[str] = []
        self.entries: list[_Entry | None] = []
        self.tops: list[tuple[int, ...]] = []
        self.positions: dict[str, list[int]] = {}
        self.active: list[_Entry | None] = []  # None: a marker
        self.by_name: dict[str, list[_Entry]] = {}
        self.by_key: dict[str, list[_Entry]] = {}
        self.level = 0  # markers in ``active``
        self.peak = 0

    def in_foreign(self) -> bool:
        """Whether the current node is an SVG/MathML element whose children are not HTML."""
        return bool(self.foreign) and bool(self.foreign[-1]) and self.names[-1] not in _INTEGRATION[self.foreign[-1]]

    def last(self, name: str) -> int:
        found = self.positions.get(name)
        return found[-1] if found else -1

    def last_of(self, category: str) -> int:
        return self.tops[-1][_SLOTS[category]] if self.tops else -1

    def in_scope(self, name: str, scope: str = "scope") -> int:
        """The index of the topmost ``name`` if it is in ``scope``, else -1."""
        index = self.last(name)
        return index if index >= self.last_of(scope) else -1  # ">=": a name may be its own barrier

    def push(self, name: str, entry: _Entry | None = None, *, foreign: str = "") -> None:
        index = len(self.names)
        self.positions.setdefault(name, []).append(index)
        if not foreign:
            slots = _NAME_SLOTS.get(name, ())
        else:
            slots = _INTEGRATION_SLOTS if name in _INTEGRATION[foreign] else ()
        top = self.tops[-1] if self.tops else _NONE
        if slots:
            updated = list(top)
            for slot in slots:
                updated[slot] = index
            top = tuple(updated)
        self.tops.append(top)
        self.names.append(name)
        self.foreign.append(foreign)
        self.entries.append(entry)
        if name in _MARKERS and not foreign:
            self.active.append(None)
            self.level += 1
        self.peak = max(self.peak, index + 1)

    def pop_to(self, index: int, closed: _Entry | None = None) -> None:
        """Pop every element from the top down to ``index`` (included). Formatting elements
        stay in the active list (to be re-opened) except ``closed``; a marker element clears the
        list back to its marker."""
        names, entries, foreign = self.names, self.entries, self.foreign
        while len(names) > index:
            name = names.pop()
            entry = entries.pop()
            namespace = foreign.pop()
            self.tops.pop()
            self.positions[name].pop()
            if entry is not None:
                entry.open = False
                if entry is closed:
                    self.forget(entry)
            if name in _MARKERS and not namespace:
                self._clear_to_marker()

    def _clear_to_marker(self) -> None:
        while self.active:
            entry = self.active.pop()
            if entry is None:
                self.level -= 1
                return
            self._unindex(entry)

    def _unindex(self, entry: _Entry) -> None:
        self.by_name[entry.name].remove(entry)
        self.by_key[entry.key].remove(entry)

    def forget(self, entry: _Entry) -> None:
        self.active.remove(entry)
        self._unindex(entry)

    def find_active(self, name: str) -> _Entry | None:
        """The last active formatting entry named ``name`` after the last marker."""
        found = self.by_name.get(name)
        return found[-1] if found and found[-1].level == self.level else None

    def add_formatting(self, name: str, key: str) -> _Entry:
        """A new entry, after removing the earliest of three equal ones since the last marker."""
        same = self.by_key.setdefault(key, [])
        if len(same) >= 3 and same[-3].level == self.level:
            self.forget(same[-3])
        entry = _Entry(name, key, self.level)
        self.active.append(entry)
        same.append(entry)
        self.by_name.setdefault(name, []).append(entry)
        return entry

    def reconstruct(self) -> None:
        """Re-open the formatting elements closed since the last open entry or marker."""
        active = self.active
        start = len(active)
        while start > 0 and (entry := active[start - 1]) is not None and not entry.open:
            start -= 1
        for entry in active[start:]:
            assert entry is not None
            entry.open = True
            self.push(entry.name, entry)


def tree_cost(text: str, *, max_depth: int | None = None, max_work: int | None = None) -> TreeCost:
    """Replay the HTML5 tree builder's stack over the tags of ``text`` (see the module
    docstring); stop early (``complete=False``) once the depth passes ``max_depth`` or the work
    passes ``max_work``. Linear in ``len(text)``."""
    stack = _Stack()
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
        if (max_depth is not None and stack.peak + 2 > max_depth) or (max_work is not None and work > max_work):
            return TreeCost(stack.peak + 2, work, complete=False)
    return TreeCost(stack.peak + 2, work)


def _raw_text_end(text: str, name: str, start: int) -> int:
    """Where the raw text of a ``script``/``style``/... element opened at ``start`` ends (its
    end tag's start; the end of ``text`` if it has none)."""
    end = re.compile(rf"</{name}[\t\n\f\r />]", re.IGNORECASE).search(text, start)
    return len(text) if end is None else end.start()


def _start_tag(stack: _Stack, name: str, attributes: str) -> bool:
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


def _close_before(stack: _Stack, name: str) -> None:
    """The elements a start tag ``name`` closes before it is inserted."""
    if name in _CLOSES_P and (p := stack.in_scope("p", "button")) >= 0:
        stack.pop_to(p)
    if name in _HEADINGS and stack.names and stack.names[-1] in _HEADINGS:
        stack.pop_to(len(stack.names) - 1)
    elif name == "li" or name in ("dd", "dt"):
        siblings = ("li",) if name == "li" else ("dd", "dt")
        index = max(stack.last(sibling) for sibling in siblings)
        if index >= 0 and index >= stack.last_of(_SPECIAL_NOT_ADP):
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


def _leave_foreign(stack: _Stack) -> None:
    """Pop SVG/MathML elements until the current node is HTML (or an integration point)."""
    while stack.in_foreign():
        stack.pop_to(len(stack.names) - 1)


def _html_between(stack: _Stack, index: int) -> bool:
    """Whether an HTML element is open above ``index`` (bounded: checks the nearest 64)."""
    above = stack.foreign[index + 1:][-64:]
    return len(above) == 64 or not all(above)


def _close_table_part(stack: _Stack, name: str) -> None:
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


def _adopt(stack: _Stack, name: str, entry: _Entry) -> None:
    """End tag of a formatting element (the adoption agency, simplified): popped with what is
    above it when no special element is; otherwise the stack keeps its depth."""
    index = stack.last(name)
    if entry.open and index >= 0 and index > stack.last_of("special"):
        stack.pop_to(index, closed=entry)
    else:
        stack.forget(entry)
        if entry.open and index >= 0:
            stack.entries[index] = None  # moved below the block; no longer re-opened


def _end_tag(stack: _Stack, name: str) -> None:
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


def _foreign_end_tag(stack: _Stack, name: str) -> bool:
    """An end tag met in SVG/MathML content; True when it was handled there."""
    if name in ("p", "br"):
        _leave_foreign(stack)  # ends the SVG/MathML content, then handled as HTML
        return False
    index = stack.last(name)
    if index >= 0 and stack.foreign[index] and not _html_between(stack, index):
        stack.pop_to(index)
        return True
    return False


def _closed_by(stack: _Stack, name: str) -> int:
    """The index of the element an HTML end tag ``name`` closes (with all above it), or -1."""
    if name in _HEADINGS:
        index = stack.last_of("heading")
        return index if index > stack.last_of("scope") else -1
    if name in _SPECIAL:
        scope = {"p": "button", "li": "list"}.get(name, "table" if name in _TABLE_PARTS or name == "table" else "scope")
        return stack.in_scope(name, scope)
    index = stack.last(name)  # any other end tag: the topmost of that name, unless a special one is above it
    return index if index > stack.last_of("special") else -1
