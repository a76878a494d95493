"""The RTF body of an Outlook message → plain text or its encapsulated HTML (pure).

Outlook stores a message whose only body is RTF as ``PR_RTF_COMPRESSED`` (MS-OXRTFCP, undone by
the ``compressed-rtf`` package). That RTF is either plain RTF, or HTML encapsulated in RTF
(``\\fromhtml1``, MS-OXRTFEX): the HTML is the text of ``{\\*\\htmltag …}`` groups plus the text
outside ``\\htmlrtf`` … ``\\htmlrtf0`` runs. :func:`rtf_body` returns ``(text, is_html)``.

This is a small tokenizer, not an RTF reader: control words and groups, ``\\'hh`` bytes in the
document's ``\\ansicpg`` code page, ``\\uN`` characters (skipping ``\\ucN`` fallback
characters), ``\\par``/``\\line``/``\\tab``; destinations that hold no body text (font and
colour tables, style sheet, info, pictures, objects, and other ``{\\*\\…}`` groups) are skipped.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

_TOKEN = re.compile(rb"\\([a-zA-Z]+)(-?\d+)? ?|\\'([0-9a-fA-F]{2})|\\(.)|([{}])|[\r\n]+|([^\\{}\r\n]+)", re.S)
_SKIP = frozenset(
    b"fonttbl colortbl stylesheet info pict object header footer headerl headerr footerl footerr "
    b"listtable listoverridetable rsidtbl generator themedata colorschememapping latentstyles datastore "
    b"xmlnstbl mmathPr filetbl revtbl fldinst".split()
)
_BREAKS = {b"par": "\n", b"line": "\n", b"tab": "\t", b"page": "\n", b"sect": "\n", b"cell": " ", b"row": "\n"}


@dataclass
class _Group:
    skip: bool = False
    suppressed: bool = False  # inside \htmlrtf … \htmlrtf0 (RTF-only text of encapsulated HTML)
    in_tag: bool = False  # inside {\*\htmltag …}
    uc: int = 1


@dataclass
class _State:
    codec: str = "cp1252"
    html: bool = False
    stack: list[_Group] = field(default_factory=lambda: [_Group()])
    out: list[str] = field(default_factory=list)
    pending: bytearray = field(default_factory=bytearray)
    skip_chars: int = 0
    group_start: bool = False
    starred: bool = False

    @property
    def top(self) -> _Group:
        return self.stack[-1]

    def emit_bytes(self, data: bytes) -> None:
        if self.visible():
            self.pending += data

    def emit(self, text: str) -> None:
        if self.visible():
            self.flush()
            self.out.append(text)

    def flush(self) -> None:
        if self.pending:
            self.out.append(bytes(self.pending).decode(self.codec, errors="replace"))
            self.pending.clear()

    def visible(self) -> bool:
        group = self.top
        return not group.skip and (group.in_tag or not group.suppressed)


def rtf_body(rtf: bytes) -> tuple[str, bool]:
    """``(text, is_html)``: the body text, or the encapsulated HTML when the RTF says ``\\fromhtml1``."""
    state = _State(html=b"\\fromhtml1" in rtf[:4096])
    for match in _TOKEN.finditer(rtf):
        word, arg, hexbyte, symbol, brace, text = match.groups()
        if brace is not None:
            _brace(state, brace)
        elif word is not None:
            _control(state, word, None if arg is None else int(arg))
        elif hexbyte is not None:
            _char(state, partial(state.emit_bytes, bytes.fromhex(hexbyte.decode())))
        elif symbol is not None:
            _symbol(state, symbol)
        elif text is not None:
            state.group_start = state.starred = False
            _text(state, text)
    state.flush()
    return "".join(state.out), state.html


def _brace(state: _State, brace: bytes) -> None:
    state.flush()
    if brace == b"{":
        parent = state.top
        state.stack.append(_Group(parent.skip, parent.suppressed, parent.in_tag, parent.uc))
        state.group_start = True
    elif len(state.stack) > 1:
        state.stack.pop()


def _control(state: _State, word: bytes, arg: int | None) -> None:
    group, first, starred = state.top, state.group_start, state.starred
    state.group_start = state.starred = False
    if first and (word in _SKIP or (starred and not (state.html and word == b"htmltag"))):
        group.skip = True
    elif starred and word == b"htmltag":
        group.in_tag = True
    elif word == b"htmlrtf":
        group.suppressed = arg != 0
    elif word == b"ansicpg" and arg is not None:
        state.codec = _codec(arg)
    elif word == b"uc" and arg is not None:
        group.uc = max(arg, 0)
    elif word == b"u" and arg is not None:
        state.emit(chr(arg % 0x10000 if arg < 0 else min(arg, 0x10FFFF)))
        state.skip_chars = group.uc
    elif word in _BREAKS:
        state.emit(_BREAKS[word])


def _symbol(state: _State, symbol: bytes) -> None:
    if symbol == b"*":
        state.starred = state.group_start
        return
    state.group_start = state.starred = False
    if symbol in b"\\{}":
        _char(state, partial(state.emit, symbol.decode()))
    elif symbol == b"~":
        state.emit("\u00a0")
    elif symbol in (b"\n", b"\r"):
        state.emit("\n")


def _char(state: _State, emit: Callable[[], None]) -> None:
    """One character, unless it is a ``\\uN`` fallback character to skip."""
    if state.skip_chars:
        state.skip_chars -= 1
        return
    emit()


def _text(state: _State, text: bytes) -> None:
    if state.skip_chars:
        dropped = min(state.skip_chars, len(text))
        state.skip_chars -= dropped
        text = text[dropped:]
    state.emit_bytes(text)


def _codec(codepage: int) -> str:
    try:
        return codecs.lookup(f"cp{codepage}").name
    except LookupError:
        return "cp1252"
