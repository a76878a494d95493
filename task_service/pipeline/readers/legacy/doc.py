"""Word 97-2003 ``.doc`` / ``.dot`` bytes → one block per paragraph (our reader of [MS-DOC]; pure).

The text of a Word binary file is the character stream its piece table describes ([MS-DOC] 2.4.1
"Retrieving Text"): the FIB (``WordDocument`` stream, 2.5.1) gives the character counts of the main
document and of each sub-document (``ccpText``, ``ccpFtn``, ``ccpHdd``, ``ccpAtn``, ``ccpEdn``,
``ccpTxbx``, ``ccpHdrTxbx``, 2.5.4) and where the ``Clx`` lies in the table stream (``0Table`` or
``1Table`` by ``fWhichTblStm``; ``fcClx``, 2.5.6); the ``Clx``'s ``PlcPcd`` (2.9.177) maps runs of
character positions to byte offsets, each piece either UTF-16LE or "compressed" 8-bit (cp1252,
2.9.73 ``FcCompressed``).

What comes out: the main document's paragraphs (``\\r``), then footnotes, headers and footers,
comments, endnotes and text boxes, each with that ``section``. A table row (cells ended by
``\\x07``, the row by a second ``\\x07``) becomes one block, its cells joined by `` | ``. Fields
(``\\x13`` code ``\\x14`` result ``\\x15``, 2.8.25) keep their result and drop their code, so a
hyperlink reads as its text, a page number as the number. A paragraph in a built-in heading
style (Heading 1-9, ``_wordstyles.py``) opens a section: the blocks under it carry its heading
path, as in DOCX. Not read: list numbers, text in embedded objects; pictures are counted in a
warning.

Why our own reader: measured against antiword, catdoc and LibreOffice headless on generated files
(``python -m bench.legacy_readers``): every marker, headers too, at tens of MB/s, in process.

Word 6/95 files (FIB ``wIdent`` 0xA5DC, ``nFib`` < 193) keep their text as one 8-bit run
(``fcMin``..``fcMac``) in the code page of the document's language; a fast-saved one is read
in that run's order.

Errors: ``EncryptedDocumentError`` (password-protected), ``UnsupportedTypeError`` (another OLE
kind), ``CorruptDocumentError`` (FIB or piece table out of bounds), ``ParseLimitError`` (more text
than ``text_max_chars`` (PARSE_MAX_TEXT_CHARS)).
"""

from __future__ import annotations

import bisect
import re
import struct
from dataclasses import dataclass

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from task_service.pipeline.document import Block, HeadingStack, ParsedDocument, count_warnings
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.legacy._ole import open_compound, read_stream
from task_service.pipeline.readers.legacy._wordstyles import Styles

__all__ = ["read"]

_WORD97_IDENT = 0xA5EC
_WORD6_IDENTS = (0xA5DC, 0xA697, 0xA698, 0xA699)  # Word 6/95 (and their Asian builds)
_WORD97_NFIB = 0x00C1  # nFib of Word 97 and later (FibBase.nFib; later versions keep it here)
_FIB_WHICH_TABLE = 0x0200
_CLX_PAIR = 33  # fcClx/lcbClx: the 34th (fc, lcb) pair of FibRgFcLcb97
_STSH_PAIR, _BTE_PAPX_PAIR = 1, 13  # fcStshf/lcbStshf, fcPlcfBtePapx/lcbPlcfBtePapx
_FC_COMPRESSED = 0x40000000
#: Sub-documents after the main text, in CP order: (index in FibRgLw97, section name).
_PARTS = ((4, "Footnotes"), (5, "Headers and footers"), (6, ""), (7, "Comments"), (8, "Endnotes"),
          (9, "Text boxes"), (10, "Header text boxes"))
#: Primary language id → ANSI code page (Windows' language tables), for Word 6/95 text.
_CODEPAGES = {0x19: "cp1251", 0x22: "cp1251", 0x02: "cp1251", 0x23: "cp1251", 0x2F: "cp1251", 0x15: "cp1250",
              0x05: "cp1250", 0x0E: "cp1250", 0x1B: "cp1250", 0x24: "cp1250", 0x1A: "cp1250", 0x18: "cp1250",
              0x08: "cp1253", 0x1F: "cp1254", 0x0D: "cp1255", 0x01: "cp1256", 0x25: "cp1257", 0x26: "cp1257",
              0x27: "cp1257", 0x1E: "cp874", 0x11: "cp932", 0x04: "cp936", 0x12: "cp949"}
_FIELD_BEGIN, _FIELD_SEPARATOR, _FIELD_END = "\x13", "\x14", "\x15"
_PICTURE_MARKS = re.compile("[\x01\x08]")
_FIELD_MARKS = re.compile("([\x13\x14\x15])")
_PARAGRAPH_MARKS = re.compile("[\r\x0c]")
#: Control characters of the text stream → what the reader shows (2.8.25 and Table of special characters).
_SPECIALS = str.maketrans({"\x0b": "\n", "\x1e": "-", "\x1f": None, "\x02": None, "\x03": None, "\x04": None,
                           "\x05": None, "\x01": None, "\x08": None, "\x0c": "\r"})


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of a Word 97-2003 document (module docstring). Raises as the module docstring says."""
    with open_compound(data, "doc") as ole:
        word = read_stream(ole, "WordDocument")
        fib = _Fib.parse(word)
        table = read_stream(ole, "1Table" if fib.which_table else "0Table")
    text, pieces = _piece_text(word, table, fib, limits)
    pictures = len(_PICTURE_MARKS.findall(text))
    styles = Styles(word, table, fib.stsh, fib.bte_papx) if pieces else None
    blocks = _main_blocks(text[: fib.ccp_text], pieces, styles)
    start = fib.ccp_text
    for count, section in fib.parts:
        blocks += _blocks(text[start : start + count], section or None)
        start += count
    return ParsedDocument(tuple(blocks), count_warnings({"pictures": pictures},
                                                        {"pictures": ("picture ignored", "pictures ignored")}))


@dataclass(frozen=True)
class _Fib:
    """The parts of the File Information Block the text needs ([MS-DOC] 2.5.1).

    ``clx``: (offset, size) of the piece table in the table stream (Word 97 and later); for Word
    6/95 (``codepage`` set) the text is the 8-bit run ``text_range`` of the WordDocument stream.
    """

    which_table: bool
    ccp_text: int
    parts: list[tuple[int, str]]
    clx: tuple[int, int] = (0, 0)
    stsh: tuple[int, int] = (0, 0)
    bte_papx: tuple[int, int] = (0, 0)
    codepage: str | None = None
    text_range: tuple[int, int] = (0, 0)

    @classmethod
    def parse(cls, word: bytes) -> _Fib:
        if len(word) < 0x54:
            raise CorruptDocumentError("Word document: the WordDocument stream is too short for its FIB")
        ident, nfib, _, lid = struct.unpack_from("<HHHH", word, 0)  # wIdent, nFib, unused, lid
        if ident in _WORD6_IDENTS and nfib < _WORD97_NFIB:
            return cls._word6(word, lid)
        if ident != _WORD97_IDENT:
            raise CorruptDocumentError(f"Word document: FIB identifier {ident:#06x}, expected 0xa5ec")
        flags = struct.unpack_from("<H", word, 10)[0]
        pos = 32
        csw = struct.unpack_from("<H", word, pos)[0]
        pos += 2 + 2 * csw
        cslw = _u16(word, pos)
        lw = [_u32(word, pos + 2 + 4 * i) for i in range(min(cslw, 11))]
        pos += 2 + 4 * cslw
        pairs = _u16(word, pos)
        if len(lw) < 11 or pairs <= _CLX_PAIR:
            raise CorruptDocumentError("Word document: the FIB is too short (no piece table)")
        def pair(index: int) -> tuple[int, int]:
            fc, lcb = struct.unpack_from("<II", word, pos + 2 + 8 * index)
            return int(fc), int(lcb)

        parts = [(lw[i], name) for i, name in _PARTS]
        return cls(bool(flags & _FIB_WHICH_TABLE), lw[3], parts, pair(_CLX_PAIR), pair(_STSH_PAIR),
                   pair(_BTE_PAPX_PAIR))

    @classmethod
    def _word6(cls, word: bytes, lid: int) -> _Fib:
        """Word 6/95: ``fcMin``/``fcMac`` at 0x18/0x1C, the character counts from 0x34 (8 longs)."""
        fc_min, fc_mac = struct.unpack_from("<II", word, 0x18)
        counts = struct.unpack_from("<8I", word, 0x34)
        parts = [(counts[i - 3], name) for i, name in _PARTS]
        return cls(False, counts[0], parts, codepage=_codepage(lid), text_range=(fc_min, fc_mac))


def _codepage(lid: int) -> str:
    """The ANSI code page of a Windows language id's primary language (Word 6/95 stores 8-bit text)."""
    return _CODEPAGES.get(lid & 0x3FF, "cp1252")


def _u16(data: bytes, pos: int) -> int:
    if pos + 2 > len(data):
        raise CorruptDocumentError("Word document: the FIB is truncated")
    return int(struct.unpack_from("<H", data, pos)[0])


def _u32(data: bytes, pos: int) -> int:
    if pos + 4 > len(data):
        raise CorruptDocumentError("Word document: the FIB is truncated")
    return int(struct.unpack_from("<I", data, pos)[0])


#: One piece of the character stream: (first CP, end CP, byte offset of its first character, bytes per char).
_Piece = tuple[int, int, int, int]


def _piece_text(word: bytes, table: bytes, fib: _Fib, limits: ParseLimits) -> tuple[str, list[_Piece]]:
    """The whole character stream (main document then sub-documents) from the piece table, with
    the pieces (Word 6/95: the stream's 8-bit text run, no pieces)."""
    if fib.codepage is not None:
        start, end = fib.text_range
        if not 0 <= start <= end <= len(word):
            raise CorruptDocumentError("Word 6/95 document: its text lies outside the WordDocument stream")
        run = word[start:end]
        wide = run[1::2].count(0) > len(run) // 4  # some Word 95 builds store the run as UTF-16
        return run.decode("utf-16-le" if wide else fib.codepage, errors="replace"), []
    fc, lcb = fib.clx
    clx = table[fc : fc + lcb]
    if len(clx) != lcb or lcb == 0:
        raise CorruptDocumentError("Word document: the piece table lies outside the table stream")
    plc = _plc_pcd(clx)
    n = (len(plc) - 4) // 12
    cps = struct.unpack_from(f"<{n + 1}I", plc, 0)
    out: list[str] = []
    pieces: list[_Piece] = []
    total = 0
    for i in range(n):
        count = cps[i + 1] - cps[i]
        raw = struct.unpack_from("<I", plc, 4 * (n + 1) + 8 * i + 2)[0]
        total += max(count, 0)
        if total > len(word) or total > limits.text_max_chars:
            _too_much(total, len(word), limits)
        out.append(_piece(word, raw, count))
        compressed = bool(raw & _FC_COMPRESSED)
        pieces.append((cps[i], cps[i + 1], (raw & ~_FC_COMPRESSED) // 2 if compressed else raw, 1 if compressed else 2))
    return "".join(out), pieces


def _plc_pcd(clx: bytes) -> bytes:
    """The PlcPcd of a Clx: skip its Prc entries (``clxt`` 1), then the Pcdt (``clxt`` 2)."""
    pos = 0
    while pos < len(clx) and clx[pos] == 0x01:
        if pos + 3 > len(clx):
            break
        pos += 3 + struct.unpack_from("<h", clx, pos + 1)[0]
    if pos + 5 > len(clx) or clx[pos] != 0x02:
        raise CorruptDocumentError("Word document: no piece table (Pcdt) in the Clx")
    lcb = struct.unpack_from("<I", clx, pos + 1)[0]
    plc = clx[pos + 5 : pos + 5 + lcb]
    if len(plc) != lcb or lcb < 16 or (lcb - 4) % 12:
        raise CorruptDocumentError("Word document: the piece table has a wrong size")
    return plc


def _piece(word: bytes, raw: int, count: int) -> str:
    if count <= 0:
        return ""
    if raw & _FC_COMPRESSED:
        start = (raw & ~_FC_COMPRESSED) // 2
        return word[start : start + count].decode("cp1252", errors="replace")
    return word[raw : raw + 2 * count].decode("utf-16-le", errors="replace")


def _too_much(total: int, stream: int, limits: ParseLimits) -> None:
    if total > limits.text_max_chars:
        raise ParseLimitError(f"Word document holds more than {limits.text_max_chars:,} characters "
                              "(PARSE_MAX_TEXT_CHARS)")
    raise CorruptDocumentError(f"Word document: its piece table names {total:,} characters, more than the "
                               f"{stream:,} bytes of its text stream")


def _drop_field_codes(text: str) -> str:
    """Keep a field's result, drop its code; nested fields too (an unclosed field's code is dropped)."""
    if _FIELD_BEGIN not in text:
        return text
    out: list[str] = []
    stack: list[bool] = []  # per open field: True once its separator is seen (in the result)
    for part in _FIELD_MARKS.split(text):
        if part == _FIELD_BEGIN:
            stack.append(False)
        elif part == _FIELD_SEPARATOR and stack:
            stack[-1] = True
        elif part == _FIELD_END and stack:
            stack.pop()
        elif part not in (_FIELD_SEPARATOR, _FIELD_END) and all(stack):
            out.append(part)
    return "".join(out)


def _main_blocks(text: str, pieces: list[_Piece], styles: Styles | None) -> list[Block]:
    """The main document's blocks; a paragraph in a heading style opens a section (``HeadingStack``)."""
    if styles is None or not styles.levels:
        return _blocks(text, None)
    stack = HeadingStack()
    blocks: list[Block] = []
    start = 0
    firsts = [piece[0] for piece in pieces]
    for mark in _PARAGRAPH_MARKS.finditer(text + "\r"):
        end = mark.end()
        paragraph = text[start:end]
        level = styles.level_at(_fc_of(mark.start(), pieces, firsts))
        if level:
            title = " ".join(_drop_field_codes(paragraph).translate(_SPECIALS).split())
            if title:
                blocks.append(Block(title, stack.enter(level, title)))
                start = end
                continue
        blocks += _blocks(paragraph, stack.path)
        start = end
    return blocks


def _fc_of(cp: int, pieces: list[_Piece], firsts: list[int]) -> int:
    """The byte offset in the WordDocument stream of character position ``cp`` (-1 when none);
    ``firsts``: the pieces' first CPs (ascending, as the PlcPcd stores them)."""
    i = bisect.bisect_right(firsts, cp) - 1
    if i < 0:
        return -1
    first, end, fc, width = pieces[i]
    return fc + (cp - first) * width if cp < end else -1


def _blocks(text: str, section: str | None) -> list[Block]:
    """Paragraph blocks of one sub-document; a table row is one block, cells joined by `` | ``."""
    text = _drop_field_codes(text).translate(_SPECIALS)
    text = text.replace("\x07\x07", "\r").replace("\x07", " | ")
    return [Block(p.strip(" |"), section) for p in text.split("\r") if p.strip(" |")]
