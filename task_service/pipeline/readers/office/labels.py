"""List labels as Word shows them (pure): a level's template (``w:lvlText``) filled with the
counters in each level's number format (``w:numFmt``: decimal, roman, letters, ordinal...), at
most ``MAX_LABEL`` characters; ``numbering.py`` decides which counters a paragraph uses."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LABEL = 100
BULLET = "•"
_PLACEHOLDER = re.compile(r"%([1-9])")
_ROMAN = ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"), (50, "l"), (40, "xl"),
          (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i"))


@dataclass(frozen=True)
class Level:
    """One ``w:lvl``: its start value, number format, text template, restart rule and legal flag."""

    start: int = 1
    fmt: str = "decimal"
    text: str = ""
    restart: int | None = None  # w:lvlRestart (1-based level index; 0 = never); None = default
    legal: bool = False

    def restarts_after(self, used: int, own: int) -> bool:
        """Whether a use of level ``used`` (0-based) restarts this level (0-based ``own``)."""
        limit = own if self.restart is None else self.restart
        return used < limit





def render_label(level: Level, ilvl: int, levels: dict[int, Level], counters: dict[int, int]) -> str:
    if level.fmt == "bullet":
        return BULLET

    def value(match: re.Match[str]) -> str:
        index = int(match.group(1)) - 1
        shown = levels.get(index, Level())
        count = counters.get(index, shown.start)
        return format_number(count, "decimal" if level.legal else shown.fmt)

    return _PLACEHOLDER.sub(value, level.text).strip()[:MAX_LABEL]


def format_number(value: int, fmt: str) -> str:
    """``value`` written in the ``w:numFmt`` ``fmt`` (see the module docstring); "" for ``none``."""
    if fmt == "none":
        return ""
    if fmt in ("upperRoman", "lowerRoman") and 0 < value < 4000:
        roman = _roman(value)
        return roman.upper() if fmt == "upperRoman" else roman
    if fmt in ("upperLetter", "lowerLetter") and 0 < value <= 780:
        letters = chr(ord("a") + (value - 1) % 26) * ((value - 1) // 26 + 1)
        return letters.upper() if fmt == "upperLetter" else letters
    simple = {
        "decimalZero": f"{value:02d}", "ordinal": f"{value}{_ordinal_suffix(value)}",
        "decimalEnclosedParen": f"({value})", "decimalEnclosedFullstop": f"{value}.",
        "numberInDash": f"- {value} -",
    }
    return simple.get(fmt, str(value))


def _roman(value: int) -> str:
    out = []
    for amount, numeral in _ROMAN:
        count, value = divmod(value, amount)
        out.append(numeral * count)
    return "".join(out)


def _ordinal_suffix(value: int) -> str:
    if value % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(value % 10, "th")
