"""Office Math (OMML, ECMA-376 Part 1 §22.1) → one line of linear text per equation, close to Word's
own linear format (UnicodeMath), with separators so that every word and number in an equation is a
token of its own for PostgreSQL's ``simple`` text-search parser and for the embedding model's BERT
tokenizer.

Pure: an lxml element in, a string out.

- ``m:r``/``m:t``: the text as written (runs next to each other join: "E=m" + c² → "E=mc^2");
- fraction ``m:f`` → ``num / den`` with spaces (``a/b`` would be one "file path" token for
  PostgreSQL: ``ZELTRONI/BC``), ``¦`` for a bar-less stack (binomial); scripts ``m:sSub``,
  ``m:sSup``, ``m:sSubSup``, ``m:sPre`` → ``x_2``, ``c^2``, ``x_i^2``; ``m:limLow``/``m:limUpp`` →
  ``lim_(n → ∞)``; ``m:nary`` → ``∑_(i=1)^n x_i`` (``∫`` when no character is given); ``m:rad`` →
  ``√x``, ``√(3&x)`` with a degree; ``m:d`` → its begin/end characters around its arguments joined
  by the separator (default ``(``, ``)``, ``|``); ``m:func`` → ``sin x``; ``m:eqArr`` rows and
  the equations of an ``m:oMathPara`` → one line each; ``m:m`` → cells joined by ", ", rows by "; ";
  accents, bars, boxes, group characters, phantoms → their base. A script or operand of more than
  one token is parenthesized (``x^(-1)``, ``(a+b) / c``);
- separators: a structure is set apart from a neighbouring letter or digit by a space ("k" + a
  fraction → "k ZELTRONI / BC"; "H" + sub 2 + "O" → "H_2 O", as Word's linear format ends a
  script), except that a script's base joins what precedes it; a non-ASCII math symbol next to a
  letter or digit gets a space (the BERT tokenizer does not split at symbols: "√x" would be one
  word, "√" + "##x");
- tracked deletions inside math (``w:del``, ``w:moveFrom``) are dropped, insertions kept;
  properties (``*Pr``) are skipped; of an ``mc:AlternateContent`` only the last branch is read.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from lxml import etree

M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_ALTERNATE = "{http://schemas.openxmlformats.org/markup-compatibility/2006}AlternateContent"
GAP = "\x00"  # a soft boundary: a space between two word characters, else nothing (never in XML text)
_DROPPED = frozenset({_W + "del", _W + "moveFrom"})
_TOKEN = re.compile(r"[^\W_]+(?:[.,][^\W_]+)*|.", re.DOTALL)
_GAPS = re.compile(GAP + "+")
_ON = ("1", "true", "on")


def math_text(element: etree._Element) -> str:
    """The linear text of an OMML element (``m:oMathPara``, ``m:oMath`` or any part of one);
    equations and equation-array rows separated by newlines; no leading or trailing space."""
    return _spaced_symbols(resolve_gaps(_render(element))).strip()


def resolve_gaps(text: str) -> str:
    """Replace each run of ``GAP`` by a space between two letters or digits, by nothing elsewhere."""
    if GAP not in text:
        return text
    return _GAPS.sub(lambda m: " " if _word_char(text, m.start() - 1) and _word_char(text, m.end()) else "", text)


def _word_char(text: str, index: int) -> bool:
    return 0 <= index < len(text) and (text[index].isalnum())


def _spaced_symbols(text: str) -> str:
    """A space between a non-ASCII symbol (Unicode category S*) and a letter or digit next to it."""
    out: list[str] = []
    previous = ""
    for ch in text:
        if previous and ((_symbol(previous) and ch.isalnum()) or (previous.isalnum() and _symbol(ch))):
            out.append(" ")
        out.append(ch)
        previous = ch
    return "".join(out)


def _symbol(ch: str) -> bool:
    return ord(ch) > 0x7F and unicodedata.category(ch)[0] == "S"


# ---------------------------------------------------------------- rendering


def _render(element: etree._Element) -> str:
    tag = element.tag
    if not isinstance(tag, str) or tag.endswith("Pr") or tag in _DROPPED:
        return ""
    if tag == _ALTERNATE:
        return _render(element[-1]) if len(element) else ""
    handler = _HANDLERS.get(tag)
    return handler(element) if handler is not None else _children(element)


def _children(element: etree._Element) -> str:
    return "".join(_render(child) for child in element)


def _text(element: etree._Element) -> str:
    return element.text or ""


def _part(element: etree._Element, tag: str) -> str:
    """The rendered child ``m:<tag>`` ("" when absent), its soft boundaries resolved."""
    child = element.find(M + tag)
    return "" if child is None else resolve_gaps(_render(child)).strip()


def _operand(text: str) -> str:
    """``text`` as one operand: parenthesized unless it is a single token or already in parentheses."""
    if _TOKEN.fullmatch(text) or _parenthesized(text):
        return text
    return f"({text})"


def _parenthesized(text: str) -> bool:
    if not (text.startswith("(") and text.endswith(")")):
        return False
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and i < len(text) - 1:
            return False
    return True


def _structure(text: str) -> str:
    return f"{GAP}{text}{GAP}"


def _scripts(sub: str, sup: str) -> str:
    return (f"_{_operand(sub)}" if sub else "") + (f"^{_operand(sup)}" if sup else "")


def _script(element: etree._Element) -> str:
    """sSub, sSup, sSubSup: the base joins what precedes it; a boundary follows."""
    return f"{_part(element, 'e')}{_scripts(_part(element, 'sub'), _part(element, 'sup'))}{GAP}"


def _pre_script(element: etree._Element) -> str:
    return _structure(f"{_scripts(_part(element, 'sub'), _part(element, 'sup'))}{GAP}{_part(element, 'e')}")


def _fraction(element: etree._Element) -> str:
    kind = _property(element, "fPr", "type") or "bar"
    bar = " ¦ " if kind == "noBar" else " / "
    return _structure(f"{_operand(_part(element, 'num'))}{bar}{_operand(_part(element, 'den'))}")


def _limit(script: str) -> Callable[[etree._Element], str]:
    def render(element: etree._Element) -> str:
        limit = _part(element, "lim")
        return _structure(f"{_part(element, 'e')}{script}{_operand(limit)}" if limit else _part(element, "e"))

    return render


def _nary(element: etree._Element) -> str:
    char = _property(element, "naryPr", "chr")
    char = "∫" if char is None else char[:1]
    sub = "" if _flag(element, "naryPr", "subHide") else _part(element, "sub")
    sup = "" if _flag(element, "naryPr", "supHide") else _part(element, "sup")
    return _structure(f"{char}{_scripts(sub, sup)} {_part(element, 'e')}")


def _radical(element: etree._Element) -> str:
    degree = "" if _flag(element, "radPr", "degHide") else _part(element, "deg")
    base = _part(element, "e")
    return _structure(f"√({degree}&{base})" if degree else f"√{_operand(base)}")


def _delimiter(element: etree._Element) -> str:
    begin, separator, end = (_property(element, "dPr", name) for name in ("begChr", "sepChr", "endChr"))
    args = [resolve_gaps(_render(e)).strip() for e in element.iterchildren(M + "e")]
    inner = ("|" if separator is None else separator[:1]).join(args)
    return _structure(f"{'(' if begin is None else begin[:1]}{inner}{')' if end is None else end[:1]}")


def _function(element: etree._Element) -> str:
    return _structure(f"{_part(element, 'fName')} {_part(element, 'e')}")


def _equation_array(element: etree._Element) -> str:
    return _structure("\n".join(resolve_gaps(_render(e)).strip() for e in element.iterchildren(M + "e")))


def _matrix(element: etree._Element) -> str:
    rows = (
        ", ".join(resolve_gaps(_render(e)).strip() for e in row.iterchildren(M + "e"))
        for row in element.iterchildren(M + "mr")
    )
    return _structure("; ".join(rows))


def _math_paragraph(element: etree._Element) -> str:
    equations = (resolve_gaps(_render(child)).strip() for child in element)
    return "\n".join(e for e in equations if e)


def _base_only(element: etree._Element) -> str:
    return _structure(_part(element, "e"))


def _property(element: etree._Element, props: str, name: str) -> str | None:
    """``m:<props>/m:<name>/@m:val`` (None when the property is absent)."""
    node = element.find(f"{M}{props}/{M}{name}")
    return None if node is None else node.get(M + "val", "")


def _flag(element: etree._Element, props: str, name: str) -> bool:
    value = _property(element, props, name)
    return value is not None and (value or "1").strip().lower() in _ON


_HANDLERS: dict[str, Callable[[etree._Element], str]] = {
    M + "t": _text, _W + "t": _text,
    M + "f": _fraction,
    M + "sSub": _script, M + "sSup": _script, M + "sSubSup": _script, M + "sPre": _pre_script,
    M + "limLow": _limit("_"), M + "limUpp": _limit("^"),
    M + "nary": _nary, M + "rad": _radical, M + "d": _delimiter, M + "func": _function,
    M + "eqArr": _equation_array, M + "m": _matrix, M + "oMathPara": _math_paragraph,
    M + "acc": _base_only, M + "bar": _base_only, M + "box": _base_only, M + "borderBox": _base_only,
    M + "groupChr": _base_only, M + "phant": _base_only,
}
