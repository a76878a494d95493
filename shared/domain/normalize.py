"""Pure text clean-up shared by every document type (no I/O, no third-party imports).

``sanitize`` removes what must never reach a parser or the database (NUL, control characters,
lone surrogates) and normalizes line breaks; ``normalize_text`` additionally removes invisible
format characters (``strip_invisible``), applies NFC, whitespace clean-up and blank-line
collapsing; ``reflow_plain_text`` rebuilds paragraphs of a plain-text file whose lines were
hard-wrapped for display. Document blocks (``task_service/pipeline/parse.py``) and search queries
(``knowledge_service/schemas.py``) both go through ``normalize_text``: one clean-up for both.

Invisible characters (Unicode category ``Cf``, "format"). PostgreSQL's text-search parser ends
a word at any of them, so "mark\u200ber" was indexed as "mark" + "er" and typing "marker" found
nothing. Removed everywhere: the soft hyphen U+00AD (also HTML ``&shy;``), ZERO WIDTH SPACE
U+200B, the bidi marks, embeddings, overrides and isolates (U+061C, U+200E-U+200F,
U+202A-U+202E, U+2066-U+2069), WORD JOINER and the invisible operators (U+2060-U+2064), the
deprecated format characters U+206A-U+206F, U+FEFF, the interlinear annotation characters
U+FFF9-U+FFFB, the musical beam/slur controls U+1D173-U+1D17A, the language tag U+E0001, and
tag characters U+E0020-U+E007F except inside an emoji tag sequence (a subdivision flag).
Kept where the script needs them (Unicode 15 §23.2 "Layout Controls"):

* ZERO WIDTH JOINER U+200D between two emoji (a ZWJ sequence such as a family emoji; an emoji
  may carry VS16 U+FE0F or a skin-tone modifier before the joiner) and after a letter or mark
  of an Indic script (U+0900-U+0DFF, U+1000-U+109F, U+1780-U+17FF: half forms, explicit
  virama); removed elsewhere.
* ZERO WIDTH NON-JOINER U+200C between two characters of an Arabic-script block (Persian
  "می\u200cخواهم": the prefix must not join) or after a letter or mark of an Indic script
  (a virama that must stay visible); removed elsewhere.
* Characters that are visible or shape their script: the Arabic, Syriac and Kaithi number and
  end-of-ayah signs (U+0600-U+0605, U+06DD, U+070F, U+0890-U+0891, U+08E2, U+110BD, U+110CD),
  the Mongolian vowel separator U+180E, the Egyptian hieroglyph format controls
  (U+13430-U+13438) and the shorthand format controls (U+1BCA0-U+1BCA3).
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
# Invisible format characters (module docstring): always removed, and the two joiners and the
# tag characters that are removed unless their neighbours need them.
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U0001d173-\U0001d17a\U000e0001]"
)
_JOINERS = re.compile("[\u200c\u200d\U000e0020-\U000e007f]+")
_INDIC = re.compile("[\u0900-\u0dff\u1000-\u109f\u1780-\u17ff]")
_ARABIC = re.compile("[\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff]")
# Emoji (Extended_Pictographic, approximated by its blocks), VS16 and skin-tone modifiers.
_EMOJI = re.compile(
    "[\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u21aa\u231a-\u23ff\u24c2\u25aa-\u27bf\u2934\u2935"
    "\u2b05-\u2b55\u3030\u303d\u3297\u3299\ufe0f\U0001f000-\U0001faff]"
)
_BLACK_FLAG = "\U0001f3f4"  # the base of an emoji tag sequence (subdivision flags)
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
    text = unicodedata.normalize("NFC", strip_invisible(sanitize(text)))
    text = _TRAILING_HSPACE.sub("", text)
    text = _HSPACE_RUN.sub(" ", text)
    text = _BLANK_LINE_RUN.sub("\n\n", text)
    return text.strip()


def strip_invisible(text: str) -> str:
    """Return ``text`` without the invisible format characters a reader cannot see and a search
    would split a word at; ZWJ, ZWNJ and tag characters stay where the script or an emoji
    sequence needs them (rules and sources in the module docstring). Linear in ``len(text)``."""
    text = _INVISIBLE.sub("", text)
    return _JOINERS.sub(_keep_needed_joiners, text) if _JOINERS.search(text) else text


def _keep_needed_joiners(match: re.Match[str]) -> str:
    """The run of joiners/tags ``match`` as far as its neighbours need it (possibly empty)."""
    text, run = match.string, match.group()
    before = text[match.start() - 1] if match.start() else ""
    after = text[match.end()] if match.end() < len(text) else ""
    if before == _BLACK_FLAG and all("\U000e0020" <= ch <= "\U000e007f" for ch in run):
        return run  # an emoji tag sequence: a subdivision flag
    return _needed_joiner(run, before, after)


def _needed_joiner(run: str, before: str, after: str) -> str:
    """The one joiner of ``run`` its neighbours need (``before``/``after``: the characters around
    it, "" at an edge), or ""."""
    if not after or not before:
        return ""
    indic = bool(_INDIC.match(before))
    if "\u200d" in run and (indic or (_EMOJI.match(before) and _EMOJI.match(after))):
        return "\u200d"
    if "\u200c" in run and (indic or (_ARABIC.match(before) and _ARABIC.match(after))):
        return "\u200c"
    return ""


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
