"""The HTML tree builder's stack of open elements and list of active formatting elements, as
:func:`tree.tree_cost` replays them (pure; WHATWG HTML §13.2.4.2 and §13.2.4.3, with the
"Noah's Ark" clause): a scope check is one comparison, a pop needs no bookkeeping."""

from __future__ import annotations

from dataclasses import dataclass

SPECIAL = frozenset(
    "address applet area article aside base basefont bgsound blockquote body br button caption center col "
    "colgroup dd details dialog dir div dl dt embed fieldset figcaption figure footer form frame frameset h1 h2 h3 "
    "h4 h5 h6 head header hgroup hr html iframe img input keygen li link listing main marquee menu meta nav "
    "noembed noframes noscript object ol p param plaintext pre script search section select source style summary "
    "table tbody td template textarea tfoot th thead title tr track ul wbr xmp".split()
)
SCOPE = frozenset("applet caption html table td th marquee object template".split())
_MARKERS = frozenset("applet caption marquee object td th template".split())
HEADINGS = frozenset(f"h{n}" for n in range(1, 7))
# Foreign (SVG/MathML) elements whose children are HTML again, and the HTML start tags that end
# foreign content (§13.2.6.5, "rules for parsing tokens in foreign content").
_INTEGRATION = {"svg": frozenset(("foreignobject", "desc", "title")),
                "math": frozenset(("mi", "mo", "mn", "ms", "mtext", "annotation-xml"))}
# Index categories: which "last index of" each element name updates when pushed.
SPECIAL_NOT_ADP = "special-but-address-div-p"
_CATEGORIES: dict[str, frozenset[str]] = {
    "special": SPECIAL,
    SPECIAL_NOT_ADP: SPECIAL - {"address", "div", "p"},
    "scope": SCOPE,
    "button": SCOPE | {"button"},
    "list": SCOPE | {"ol", "ul"},
    "table": frozenset(("html", "table", "template")),
    "heading": HEADINGS,
    "cell": frozenset(("td", "th")),
    "row": frozenset(("tr",)),
    "table-body": frozenset(("tbody", "thead", "tfoot")),
}
_NAME_CATEGORIES: dict[str, tuple[str, ...]] = {
    name: tuple(category for category, names in _CATEGORIES.items() if name in names)
    for name in frozenset().union(*_CATEGORIES.values())
}


@dataclass(slots=True)
class Entry:
    """An entry of the list of active formatting elements: its name, its key (name and
    attributes: Noah's Ark compares both), its marker level and whether its element is open."""

    name: str
    key: str
    level: int
    open: bool = True


_SLOTS = {category: i for i, category in enumerate(_CATEGORIES)}
_NAME_SLOTS = {name: tuple(_SLOTS[c] for c in categories) for name, categories in _NAME_CATEGORIES.items()}
_INTEGRATION_SLOTS = tuple(_SLOTS[c] for c in ("special", SPECIAL_NOT_ADP, "scope", "button", "list"))
_NONE = (-1,) * len(_SLOTS)


class Stack:
    """The replayed stack of open elements and the list of active formatting elements.

    Per open element: its name, namespace (``"svg"``, ``"math"``, ``""`` for HTML), formatting
    entry, and ``tops``: the index of the topmost element of each category at or below it, so a
    scope check is one comparison and a pop needs no bookkeeping.
    """

    __slots__ = ("active", "by_key", "by_name", "entries", "foreign", "level", "names", "peak", "positions",
                 "reconstructed", "tops")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.foreign: list[str] = []
        self.entries: list[Entry | None] = []
        self.tops: list[tuple[int, ...]] = []
        self.positions: dict[str, list[int]] = {}
        self.active: list[Entry | None] = []  # None: a marker
        self.by_name: dict[str, list[Entry]] = {}
        self.by_key: dict[str, list[Entry]] = {}
        self.level = 0  # markers in ``active``
        self.peak = 0
        self.reconstructed = 0  # elements re-opened so far (each one a new element for the tree builder)

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

    def push(self, name: str, entry: Entry | None = None, *, foreign: str = "") -> None:
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

    def pop_to(self, index: int, closed: Entry | None = None) -> None:
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

    def _unindex(self, entry: Entry) -> None:
        self.by_name[entry.name].remove(entry)
        self.by_key[entry.key].remove(entry)

    def forget(self, entry: Entry) -> None:
        self.active.remove(entry)
        self._unindex(entry)

    def find_active(self, name: str) -> Entry | None:
        """The last active formatting entry named ``name`` after the last marker."""
        found = self.by_name.get(name)
        return found[-1] if found and found[-1].level == self.level else None

    def add_formatting(self, name: str, key: str) -> Entry:
        """A new entry, after removing the earliest of three equal ones since the last marker."""
        same = self.by_key.setdefault(key, [])
        if len(same) >= 3 and same[-3].level == self.level:
            self.forget(same[-3])
        entry = Entry(name, key, self.level)
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
        self.reconstructed += len(active) - start
        for entry in active[start:]:
            assert entry is not None
            entry.open = True
            self.push(entry.name, entry)
