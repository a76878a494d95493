"""Pure text clean-up shared by every document type (no I/O, no third-party imports).

``sanitize`` removes what must never reach a parser or the database (NUL, control characters,
lone surrogates) and normalizes line breaks; ``normalize_text`` additionally applies NFC,
whitespace clean-up and blank-line collapsing; ``reflow_plain_text`` rebuilds paragraphs of a
plain-text file whose lines were hard-wrapped for display.
"""

from __future__ import annotations

import re
import unicodedata

# Paragraph-level breaks become a blank line; other line separators a single newline.
_PARAGRAPH_BREAKS = re.compile("[\f\u2029]")
_LINE_BREAKS = re.compile("\r\n|[\r\v\x1c\x1d\x1e\x85\u2028]")
# NUL and the other C0/C1 controls except TAB and LF, DEL, lone surrogates (a Python ``str`` may
# hold them after ``surrogatepass`` decoding; they cannot be encoded to UTF-8), the BOM /
# zero-width no-break space, and the non-characters U+FFFE / U+FFFF.
_INVALID_CHARS = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f-\x9f\ud800-\udfff\ufeff\ufffe\uffff]")
# Horizontal whitespace: TAB and every Unicode space separator (category Zs).
_HSPACE = "[\t\u0020\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]"
_HSPACE_RUN = re.compile(f"(?<=\\S){_HSPACE}+")
_TRAILING_HSPACE = re.compile(f"{_HSPACE}+$", re.MULTILINE)
_BLANK_LINE_RUN = re.compile(r"\n{3,}")
# A line that starts a list item keeps its own line when paragraphs are reflowed.
_LIST_ITEM = re.compile(
    r"^\s*(?:[-*+\u2022\u25e6\u25aa\u2023\u00b7\u25cb\u25cf\u25a0\u25a1\u2013\u2014]"
    r"|\(?\d{1,3}[.)]|\(?[A-Za-z][.)])\s"
)
# Heuristic taken from unstructured 0.27 ``cleaners.core.auto_paragraph_grouper``: a file in
# which fewer than 10 % of its first 2,000 lines are blank uses one line per paragraph.
_GROUPER_SAMPLE_LINES = 2000
_GROUPER_BLANK_RATIO = 0.1


def sanitize(text: str) -> str:
    """Remove characters that are never text and normalize line breaks to ``\\n``.

    Removes NUL (PostgreSQL text cannot hold it), other control characters except TAB/LF, lone
    surrogates, U+FEFF and non-characters; maps CR LF, CR, VT, NEL, U+2028 to LF, and form feed
    and U+2029 to a blank line. Safe to run on markup before it is parsed.
    """
    text = _LINE_BREAKS.sub("\n", text)
    text = _PARAGRAPH_BREAKS.sub("\n\n", text)
    return _INVALID_CHARS.sub("", text)


def normalize_text(text: str) -> str:
    """Return ``text`` sanitized, NFC-normalized, with whitespace cleaned up.

    Trailing whitespace of each line is removed, inner runs of spaces/tabs become one space
    (leading indentation is kept), runs of blank lines become one blank line, and the whole text
    is stripped. The result may be empty; callers decide whether that is an error.
    """
    text = unicodedata.normalize("NFC", sanitize(text))
    text = _TRAILING_HSPACE.sub("", text)
    text = _HSPACE_RUN.sub(" ", text)
    text = _BLANK_LINE_RUN.sub("\n\n", text)
    return text.strip()


def has_visible_text(text: str) -> bool:
    """True if ``text`` holds at least one character that is not whitespace, control or format."""
    return any(not ch.isspace() and unicodedata.category(ch)[0] not in "CZ" for ch in text)


def has_model_token(text: str) -> bool:
    """True if the embedding model's tokenizer (BERT uncased, as all-MiniLM-L6-v2's) would make at
    least one token of ``text``: a character left once it has dropped what its normalizer drops
    — every "other" character (categories Cc, Cf, Cs, Co, Cn), U+FFFD, whitespace, and the
    non-spacing marks that accent stripping removes after NFD. A lone combining accent or a
    zero-width joiner is no query; any letter, digit, punctuation or symbol is (maybe ``[UNK]``).
    """
    return any(
        ch != "\ufffd" and not ch.isspace() and unicodedata.category(ch)[0] not in "CZ"
        and unicodedata.category(ch) != "Mn"
        for ch in unicodedata.normalize("NFD", text)
    )


def reflow_plain_text(text: str) -> str:
    """Rebuild paragraphs of normalized plain text; paragraphs end up separated by blank lines.

    If the text uses blank lines between paragraphs, lines inside a paragraph are joined with
    a space (hard wraps removed; no space between two CJK characters) except lines that start
    a list item. If it does not (fewer
    than 10 % blank lines), every line is its own paragraph. This is what unstructured's
    ``partition_text`` does with its paragraph grouper, without its slow per-paragraph spaCy
    classification (measured in ``parse.py``).
    """
    lines = text.split("\n")
    sample = lines[:_GROUPER_SAMPLE_LINES]
    blank = sum(1 for line in sample if not line.strip())
    if blank / len(sample) < _GROUPER_BLANK_RATIO:
        return "\n\n".join(line.strip() for line in lines if line.strip())
    paragraphs = []
    for block in text.split("\n\n"):
        out: list[str] = []
        for line in block.split("\n"):
            if not line.strip():
                continue
            if out and not _LIST_ITEM.match(line):
                out[-1] = _join_wrapped(out[-1], line.strip())
            else:
                out.append(line.strip())
        if out:
            paragraphs.append("\n".join(out))
    return "\n\n".join(paragraphs)


def _join_wrapped(head: str, tail: str) -> str:
    """Join a hard-wrapped line; Chinese/Japanese (East Asian wide) text has no word spaces."""
    wide = ("W", "F")
    if unicodedata.east_asian_width(head[-1]) in wide and unicodedata.east_asian_width(tail[0]) in wide:
        return head + tail
    return f"{head} {tail}"
