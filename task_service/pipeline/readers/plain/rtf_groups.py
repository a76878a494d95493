"""The RTF interpreter of the RTF reader (``rtf.py`` has the rules it follows): tokens → a stack
of group states (skip, ``\\uc`` count, font, deleted text) → text, paragraphs, table rows and
headings; no recursion, so depth costs no Python stack (bounded by ``MAX_DEPTH``)."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field, replace

from shared.domain.errors import ParseLimitError
from task_service.pipeline.document import Block, HeadingStack

MAX_DEPTH = 1_000
_TOKEN = re.compile(
    rb"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?"  # control word (its delimiting space is part of it)
    rb"|\\'([0-9a-fA-F]{2})"  # hex byte
    rb"|\\(.)"  # control symbol
    rb"|([{}])"  # group
    rb"|[\r\n]+"  # ignored line ends
    rb"|([^\\{}\r\n]+)",  # text
    re.DOTALL,
)
_SKIP_DESTINATIONS = frozenset(
    b"fonttbl colortbl stylesheet info pict object objdata fldinst listtable listoverridetable revtbl rsidtbl "
    b"generator xmlnstbl themedata colorschememapping datastore latentstyles pgdsctbl filetbl nonshppict "
    b"bkmkstart bkmkend sp shpinst userprops docvar private mmathPr template".split()
)
_KEPT_STARRED = frozenset(b"shptxt annotation atnref footnote ftnsep".split())
_CHARSETS = {0: None, 1: None, 2: None, 77: "mac_roman", 128: "cp932", 129: "cp949", 130: "johab", 134: "gbk",
             136: "cp950", 161: "cp1253", 162: "cp1254", 163: "cp1258", 177: "cp1255", 178: "cp1256",
             186: "cp1257", 204: "cp1251", 222: "cp874", 238: "cp1250", 255: "cp437"}
_SYMBOLS = {b"tab": "\t", b"emdash": "\u2014", b"endash": "\u2013", b"bullet": "\u2022", b"lquote": "\u2018",
            b"rquote": "\u2019", b"ldblquote": "\u201c", b"rdblquote": "\u201d", b"emspace": "\u2003",
            b"enspace": "\u2002", b"qmspace": "\u2005", b"line": "\n", b"lbr": "\n"}
_CONTROL_SYMBOLS = {b"~": "\u00a0", b"_": "-", b"-": "", b"\\": "\\", b"{": "{", b"}": "}", b"\n": "\n", b"\r": "\n"}
_CHARSET_WORDS = {b"mac": "mac_roman", b"pc": "cp437", b"pca": "cp850"}
_PARAGRAPH_ENDS = frozenset((b"par", b"sect", b"page"))


@dataclass(frozen=True, slots=True)
class _State:
    """Group-scoped state; ``{`` pushes a copy, ``}`` restores."""

    skip: bool = False
    uc: int = 1
    codec: str = "cp1252"
    deleted: bool = False
    font_table: bool = False
    suppressed: bool = False  # inside \htmlrtf … \htmlrtf0 (RTF-only text of encapsulated HTML)
    html_tag: bool = False  # inside {\*\htmltag …} (encapsulated HTML)


@dataclass
class Interpreter:
    ansi: str = "cp1252"
    fonts: dict[int, str] = field(default_factory=dict)
    font_def: int | None = None
    state: _State = field(default_factory=_State)
    stack: list[_State] = field(default_factory=list)
    pending: bytearray = field(default_factory=bytearray)  # \'hh bytes not yet decoded
    text: list[str] = field(default_factory=list)
    row: list[str] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    headings: HeadingStack = field(default_factory=HeadingStack)
    outline: int | None = None
    skip_chars: int = 0  # \uc fallback characters still to skip
    starred: bool = False  # the previous token was \*
    html: bool = False  # de-encapsulating HTML (``encapsulated_html``): text, not blocks

    def hidden(self) -> bool:
        state = self.state
        return state.skip or state.deleted or state.font_table or (state.suppressed and not state.html_tag)

    def emit(self, piece: str) -> None:
        if self.hidden():
            return
        self.decode_pending()
        self.text.append(piece)

    def emit_byte(self, byte: int) -> None:
        if self.skip_chars:
            self.skip_chars -= 1
        elif not self.hidden():
            self.pending.append(byte)

    def decode_pending(self) -> None:
        if self.pending:
            self.text.append(bytes(self.pending).decode(self.state.codec, errors="replace"))
            self.pending.clear()

    def end_paragraph(self) -> None:
        if self.html:
            self.emit("\n")
            return
        self.decode_pending()
        text = "".join(self.text)
        self.text = []
        if self.outline is not None and text.strip() and not self.row:
            self.headings.enter(self.outline, text)
        if text.strip() or self.row:
            if self.row:
                self.row.append(text)  # text after the last \cell of a row (rare) stays in the row
            else:
                self.blocks.append(Block(text, self.headings.path))

    def end_cell(self) -> None:
        if self.html:
            self.emit(" ")
            return
        self.decode_pending()
        self.row.append("".join(self.text).strip())
        self.text = []

    def end_row(self) -> None:
        if self.html:
            self.emit("\n")
            return
        self.decode_pending()
        if "".join(self.text).strip():
            self.row.append("".join(self.text).strip())
        self.text = []
        cells = " | ".join(c for c in self.row if c)
        self.row = []
        if cells:
            self.blocks.append(Block(cells, self.headings.path))


def interpret(data: bytes, pos: int, reader: Interpreter) -> None:
    match = _TOKEN.match
    end = len(data)
    while pos < end:
        m = match(data, pos)
        if m is None:  # a lone backslash at the very end
            break
        pos = m.end()
        word, hexbyte, symbol, group, text = m.group(1), m.group(3), m.group(4), m.group(5), m.group(6)
        if text is not None:
            _text(reader, text)
        elif word is not None:
            pos = _control(reader, word, m.group(2), data, pos)
        elif hexbyte is not None:
            reader.emit_byte(int(hexbyte, 16))
            reader.starred = False
        elif group is not None:
            _group(reader, group)
        elif symbol is not None:
            _symbol(reader, symbol)


def _text(reader: Interpreter, text: bytes) -> None:
    reader.starred = False
    if reader.state.font_table:
        return
    if reader.skip_chars:
        drop = min(reader.skip_chars, len(text))
        reader.skip_chars -= drop
        text = text[drop:]
    if text:
        reader.emit(text.decode(reader.state.codec, errors="replace"))


def _group(reader: Interpreter, group: bytes) -> None:
    reader.starred = False
    reader.skip_chars = 0
    if group == b"{":
        if len(reader.stack) >= MAX_DEPTH:
            raise ParseLimitError(f"RTF groups nested more than {MAX_DEPTH} levels deep")
        reader.decode_pending()
        reader.stack.append(reader.state)
    elif reader.stack:
        reader.decode_pending()
        reader.state = reader.stack.pop()


def _symbol(reader: Interpreter, symbol: bytes) -> None:
    if symbol == b"*":
        reader.starred = True
        return
    reader.starred = False
    if symbol in (b"\n", b"\r"):
        reader.end_paragraph()
    elif symbol in _CONTROL_SYMBOLS:
        _char(reader, _CONTROL_SYMBOLS[symbol])


def _char(reader: Interpreter, char: str) -> None:
    """One character of text (a ``\\uc`` fallback position counts it as one)."""
    if reader.skip_chars:
        reader.skip_chars -= 1
    else:
        reader.emit(char)


def _control(reader: Interpreter, word: bytes, arg: bytes | None, data: bytes, pos: int) -> int:
    """Apply a control word; returns the position to continue from (``\\bin`` jumps over its data)."""
    starred, reader.starred = reader.starred, False
    value = int(arg) if arg is not None else None
    if word == b"bin":
        return pos + max(value or 0, 0)
    if reader.html and _html_control(reader, word, value, starred):
        return pos
    if (starred and word not in _KEPT_STARRED) or word in _SKIP_DESTINATIONS:
        if word == b"fonttbl":
            reader.state = replace(reader.state, font_table=True, skip=False)
        else:
            reader.state = replace(reader.state, skip=True)
        return pos
    if reader.state.font_table:
        _font_table(reader, word, value)
        return pos
    if word == b"u" and value is not None:
        _unicode(reader, value)
    elif word in _SYMBOLS:
        _char(reader, _SYMBOLS[word])
    else:
        _format(reader, word, value)
    return pos


def _html_control(reader: Interpreter, word: bytes, value: int | None, starred: bool) -> bool:
    """``{\\*\\htmltag …}`` (HTML text) and ``\\htmlrtf``/``\\htmlrtf0`` (RTF-only text) of encapsulated
    HTML; ``False`` for other control words."""
    if starred and word == b"htmltag":
        reader.state = replace(reader.state, html_tag=True)
    elif word == b"htmlrtf":
        reader.decode_pending()
        reader.state = replace(reader.state, suppressed=value != 0)
    else:
        return False
    return True


def _unicode(reader: Interpreter, value: int) -> None:
    if reader.skip_chars:
        reader.skip_chars = 0
    code = value % 0x10000 if value < 0 else value  # a signed 16-bit value
    reader.emit(chr(code) if code <= 0x10FFFF else "\ufffd")
    reader.skip_chars = reader.state.uc


def _format(reader: Interpreter, word: bytes, value: int | None) -> None:
    if word in _PARAGRAPH_ENDS:
        reader.end_paragraph()
    elif word in (b"cell", b"nestcell"):
        reader.end_cell()
    elif word in (b"row", b"nestrow"):
        reader.end_row()
    elif word in _CHARSET_WORDS or word == b"ansicpg":
        codec = _CHARSET_WORDS.get(word) or _codec(f"cp{value}")
        reader.ansi = codec or reader.ansi
        reader.state = replace(reader.state, codec=reader.ansi)
    elif value is not None:
        _valued(reader, word, value)
    elif word == b"deleted":
        reader.state = replace(reader.state, deleted=True)
    elif word == b"pard":
        reader.outline = None
    elif word == b"plain":
        reader.state = replace(reader.state, deleted=False)


def _valued(reader: Interpreter, word: bytes, value: int) -> None:
    if word == b"uc":
        reader.state = replace(reader.state, uc=max(value, 0))
    elif word == b"f":
        reader.decode_pending()
        reader.state = replace(reader.state, codec=reader.fonts.get(value, reader.ansi))
    elif word == b"deleted":
        reader.state = replace(reader.state, deleted=value != 0)
    elif word == b"outlinelevel":
        reader.outline = value + 1 if 0 <= value < 9 else None


def _font_table(reader: Interpreter, word: bytes, value: int | None) -> None:
    if word == b"f" and value is not None:
        reader.font_def = value
    elif word == b"fcharset" and value is not None and reader.font_def is not None:
        codec = _CHARSETS.get(value)
        if codec is not None and _codec(codec):
            reader.fonts[reader.font_def] = codec
    elif word == b"cpg" and value is not None and reader.font_def is not None:
        codec = _codec(f"cp{value}")
        if codec:
            reader.fonts[reader.font_def] = codec


def _codec(name: str) -> str | None:
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None
