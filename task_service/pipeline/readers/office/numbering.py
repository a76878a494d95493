"""Word list labels: ``numbering.xml`` + ``styles.xml`` → the label Word shows before each numbered
paragraph ("4.", "Clause 4.2", "a)", "(iv)", "•"), so that a question about "clause 4.2" finds it.

Pure (parsed XML in, strings out). The rules are ECMA-376 Part 1, §17.9 (Numbering):

- a paragraph is numbered by ``w:pPr/w:numPr`` (``w:numId``, ``w:ilvl``) or, failing that, by the
  ``w:numPr`` of its paragraph style (``w:pStyle``, else the default paragraph style), following
  ``w:basedOn``; ``w:numId`` 0 removes inherited numbering. A style's level is its own
  ``w:ilvl``, else the level of the abstract definition whose ``w:pStyle`` names the style, else 0;
- a ``w:num`` points at a ``w:abstractNum`` (through ``w:numStyleLink`` → numbering style → its
  ``w:num`` when the definition is a list style) whose ``w:lvl`` give, per level, ``w:start``,
  ``w:numFmt``, ``w:lvlText`` (``%1``..``%9`` stand for the current value of levels 1..9),
  ``w:lvlRestart`` (restart after a use of a level up to this 1-based index; 0 = never; default:
  after any shallower level) and ``w:isLgl`` (every level shown in Arabic numerals);
- counters belong to the abstract definition, shared by every ``w:num`` that points at it, unless
  the ``w:num`` has a ``w:lvlOverride`` (``w:startOverride`` and/or a whole ``w:lvl``): Word's
  "restart numbering" writes such a new ``w:num``, which then counts on its own from the override;
- number formats: decimal, decimalZero, upper/lowerRoman (1..3999), upper/lowerLetter ("a".."z",
  "aa".."zz", ... up to 780), ordinal, decimalEnclosedParen/Fullstop, numberInDash; every other
  format (cardinalText, CJK and other scripts...) is written in Arabic numerals; ``bullet`` → "•"
  whatever the glyph (mostly a private-use Symbol or Wingdings character); ``none`` → nothing.

A label is at most ``MAX_LABEL`` characters (a hostile ``w:lvlText`` repeated on every paragraph
would otherwise multiply the document's size).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from lxml import etree

from task_service.pipeline.readers.office.labels import MAX_LABEL, Level, render_label

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_LEVELS = range(9)
_MAX_START = 2**31 - 1


@dataclass
class _Abstract:
    levels: dict[int, Level] = field(default_factory=dict)
    style_link: str | None = None  # w:numStyleLink: the definition is that numbering style's list
    styled_levels: dict[str, int] = field(default_factory=dict)  # paragraph styleId → ilvl (w:lvl/w:pStyle)


@dataclass(frozen=True)
class _Num:
    abstract: str
    overrides: dict[int, Level | None]  # ilvl → full w:lvl override (None: start override only)
    starts: dict[int, int]  # ilvl → w:startOverride


@dataclass(frozen=True)
class _List:
    """A resolved ``w:num``: the counter key and the effective levels."""

    key: str
    levels: dict[int, Level]
    styled_levels: dict[str, int]


class ListNumbering:
    """Hands out the label of each paragraph, in document order (``label`` advances the counters).

    ``numbering`` is the parsed ``word/numbering.xml`` root and ``styles`` the ``word/styles.xml``
    root (either may be None).
    """

    def __init__(self, numbering: etree._Element | None, styles: etree._Element | None) -> None:
        self._abstracts = {} if numbering is None else dict(_abstracts(numbering))
        self._nums = {} if numbering is None else dict(_nums(numbering))
        self._styles = _StyleNumbering(styles)
        self._lists: dict[str, _List | None] = {}
        self._counters: dict[str, dict[int, int]] = {}

    def label(self, ppr: etree._Element | None) -> str:
        """The label of the paragraph whose ``w:pPr`` is ``ppr`` ("" when not numbered), counting it."""
        if not self._nums:
            return ""
        num_id, ilvl, style = self._styles.numbering_of(ppr)
        found = self._list(num_id) if num_id and num_id != "0" else None
        if found is None:
            return ""
        if ilvl is None:
            ilvl = found.styled_levels.get(style or "", 0)
        level = found.levels.get(ilvl)
        if level is None:
            return ""
        counters = self._counters.setdefault(found.key, {})
        counters[ilvl] = counters[ilvl] + 1 if ilvl in counters else level.start
        for deeper in [k for k in counters if k > ilvl]:
            if deeper not in found.levels or found.levels[deeper].restarts_after(ilvl, deeper):
                del counters[deeper]
        return render_label(level, ilvl, found.levels, counters)

    def _list(self, num_id: str) -> _List | None:
        if num_id not in self._lists:
            self._lists[num_id] = self._resolve(num_id)
        return self._lists[num_id]

    def _resolve(self, num_id: str) -> _List | None:
        num = self._nums.get(num_id)
        abstract_id = None if num is None else num.abstract
        abstract = self._abstracts.get(abstract_id or "")
        for _ in range(4):  # w:numStyleLink → numbering style → its w:num → the defining abstractNum
            if abstract is None or abstract.style_link is None:
                break
            linked = self._nums.get(self._styles.numbering_style(abstract.style_link) or "")
            abstract_id = None if linked is None else linked.abstract
            abstract = self._abstracts.get(abstract_id or "")
        if num is None or abstract is None:
            return None
        levels = dict(abstract.levels)
        for ilvl, override in num.overrides.items():
            if override is not None:
                levels[ilvl] = override
        for ilvl, start in num.starts.items():
            levels[ilvl] = replace(levels.get(ilvl, Level()), start=start)
        own = bool(num.starts) or any(o is not None for o in num.overrides.values())
        return _List(f"num:{num_id}" if own else f"abstract:{abstract_id}", levels, abstract.styled_levels)


class _StyleNumbering:
    """Paragraph style → inherited (numId, ilvl) through ``w:basedOn``; numbering style → numId."""

    def __init__(self, styles: etree._Element | None) -> None:
        self.own: dict[str, tuple[str | None, int | None]] = {}
        self.based_on: dict[str, str] = {}
        self.default: str | None = None
        for style in () if styles is None else styles.iterchildren(_W + "style"):
            sid = style.get(_W + "styleId", "")
            self.own[sid] = _num_pr(style.find(_W + "pPr"))
            based = style.find(_W + "basedOn")
            if based is not None:
                self.based_on[sid] = _val(based)
            if style.get(_W + "type") == "paragraph" and style.get(_W + "default") in ("1", "true", "on"):
                self.default = sid

    def numbering_of(self, ppr: etree._Element | None) -> tuple[str | None, int | None, str | None]:
        """(numId, ilvl, styleId) of a paragraph: direct ``w:numPr`` first, then its style chain."""
        style_el = None if ppr is None else ppr.find(_W + "pStyle")
        style = self.default if style_el is None else _val(style_el)
        num_id, ilvl = _num_pr(ppr)
        inherited_id, inherited_lvl = self._inherited(style)
        return (num_id if num_id is not None else inherited_id,
                ilvl if ilvl is not None else inherited_lvl, style)

    def numbering_style(self, style: str) -> str | None:
        return self._inherited(style)[0]

    def _inherited(self, style: str | None) -> tuple[str | None, int | None]:
        num_id: str | None = None
        ilvl: int | None = None
        seen: set[str] = set()
        while style is not None and style in self.own and style not in seen:
            seen.add(style)
            own_id, own_lvl = self.own[style]
            num_id = own_id if num_id is None else num_id
            ilvl = own_lvl if ilvl is None else ilvl
            style = self.based_on.get(style)
        return num_id, ilvl


# ---------------------------------------------------------------- numbering.xml


def _abstracts(root: etree._Element) -> Iterator[tuple[str, _Abstract]]:
    for element in root.iterchildren(_W + "abstractNum"):
        abstract = _Abstract()
        link = element.find(_W + "numStyleLink")
        abstract.style_link = None if link is None else _val(link)
        for lvl in element.iterchildren(_W + "lvl"):
            ilvl = _level_index(lvl.get(_W + "ilvl"))
            if ilvl is not None:
                abstract.levels[ilvl] = _level(lvl)
                style = lvl.find(_W + "pStyle")
                if style is not None:
                    abstract.styled_levels.setdefault(_val(style), ilvl)
        yield element.get(_W + "abstractNumId", ""), abstract


def _nums(root: etree._Element) -> Iterator[tuple[str, _Num]]:
    for element in root.iterchildren(_W + "num"):
        abstract = element.find(_W + "abstractNumId")
        overrides: dict[int, Level | None] = {}
        starts: dict[int, int] = {}
        for override in element.iterchildren(_W + "lvlOverride"):
            ilvl = _level_index(override.get(_W + "ilvl"))
            if ilvl is None:
                continue
            lvl = override.find(_W + "lvl")
            if lvl is not None:
                overrides[ilvl] = _level(lvl)
            start = _int(_child_val(override, "startOverride"))
            if start is not None:
                starts[ilvl] = _clamp(start)
        yield element.get(_W + "numId", ""), _Num("" if abstract is None else _val(abstract), overrides, starts)


def _level(lvl: etree._Element) -> Level:
    start = _int(_child_val(lvl, "start"))
    restart = _int(_child_val(lvl, "lvlRestart"))
    legal = lvl.find(_W + "isLgl")
    return Level(
        start=1 if start is None else _clamp(start),
        fmt=_child_val(lvl, "numFmt") or "decimal",
        text=(_child_val(lvl, "lvlText") or "")[: MAX_LABEL * 2],
        restart=None if restart is None else max(restart, 0),
        legal=legal is not None and _val(legal, "1") not in ("0", "false", "off"),
    )


def _num_pr(ppr: etree._Element | None) -> tuple[str | None, int | None]:
    num_pr = None if ppr is None else ppr.find(_W + "numPr")
    if num_pr is None:
        return None, None
    num_id = num_pr.find(_W + "numId")
    return None if num_id is None else _val(num_id), _level_index(_child_val(num_pr, "ilvl"))


def _val(element: etree._Element, default: str = "") -> str:
    return str(element.get(_W + "val", default)).strip()


def _child_val(element: etree._Element, tag: str) -> str | None:
    child = element.find(_W + tag)
    return None if child is None else _val(child)


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text.strip())
    except ValueError:
        return None


def _level_index(text: str | None) -> int | None:
    """A ``w:ilvl`` value: 0..8, else None."""
    value = _int(text)
    return value if value is not None and value in _LEVELS else None


def _clamp(value: int) -> int:
    return min(max(value, 0), _MAX_START)
