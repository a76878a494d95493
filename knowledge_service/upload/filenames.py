"""Upload file names: display metadata only (pure; no I/O).

A client's file name is never a path and never part of an object key (keys are generated), so
``../../etc/passwd`` is stored as given. What is removed is what breaks storage or display:

* control characters (Unicode ``Cc``, incl. NUL, which PostgreSQL ``TEXT`` cannot hold), line and
  paragraph separators, and the bidirectional embedding/override/isolate controls (U+202A-U+202E,
  U+2066-U+2069) that make ``txt.exe`` display as ``exe.txt``;
* anything past 255 UTF-8 bytes (the extension is kept, so the type the name says survives).

The result is NFC-normalized and stripped; an empty result becomes ``upload``.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath

__all__ = ["FALLBACK_NAME", "MAX_NAME_BYTES", "clean_filename", "decode_form_filename"]

MAX_NAME_BYTES = 255
FALLBACK_NAME = "upload"
#: An extension longer than this (in UTF-8 bytes, dot included) is not kept whole when capping.
_MAX_KEPT_SUFFIX_BYTES = 32

_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_REMOVED_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})

# WHATWG "multipart/form-data encoding" (browsers, curl >= 7.81, httpx, urllib3 2) escapes `"` as
# %22 and CR/LF as %0D/%0A in the quoted filename; httpx escapes every C0 control except ESC.
_FORM_ESCAPE = re.compile(r"%(22|[01][0-9A-Fa-f])")


def decode_form_filename(raw: bytes) -> str:
    """The ``filename`` parameter of a part's Content-Disposition (raw header bytes) as text.

    Header bytes are UTF-8 in practice (RFC 7578 §4.2); anything else is read as Latin-1 so no
    name is ever rejected for its encoding. The WHATWG escapes are undone (``%22`` → ``"``;
    escaped controls are decoded so that :func:`clean_filename` removes them). Known ambiguity
    of that encoding: a name that literally contains ``%22`` or ``%0A`` cannot be told apart.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return _FORM_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def _keep(ch: str) -> bool:
    return ch not in _BIDI_CONTROLS and unicodedata.category(ch) not in _REMOVED_CATEGORIES


def _truncate_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``max_bytes`` (whole code points)."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max(0, max_bytes)].decode("utf-8", errors="ignore")


def clean_filename(raw: str | None) -> str:
    """Normalize a client's file name for storage and display (see the module docstring)."""
    name = unicodedata.normalize("NFC", "".join(ch for ch in (raw or "") if _keep(ch))).strip()
    if not name:
        return FALLBACK_NAME
    if len(name.encode("utf-8")) <= MAX_NAME_BYTES:
        return name
    suffix = PurePosixPath(name.replace("\\", "/")).suffix
    if not suffix or len(suffix.encode("utf-8")) > _MAX_KEPT_SUFFIX_BYTES:
        suffix = ""
    stem = name[: len(name) - len(suffix)]
    budget = MAX_NAME_BYTES - len(suffix.encode("utf-8"))
    return (_truncate_utf8(stem, budget).rstrip() or FALLBACK_NAME) + suffix


