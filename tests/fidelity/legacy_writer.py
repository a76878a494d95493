"""Tiny Word 97-2003 (.doc), PowerPoint 97-2003 (.ppt) and Excel 97-2003 (.xls) files, for tests.

``make_doc`` writes the structures the text needs ([MS-DOC]: a FIB, a ``1Table`` stream with the
piece table, the character stream as 8-bit "compressed" and UTF-16 pieces); ``make_ppt`` writes a
presentation the way PowerPoint lays it out ([MS-PPT]: ``Current User`` → ``UserEditAtom`` →
``PersistDirectoryAtom`` → a DocumentContainer whose SlideListWithText holds the placeholders' text,
slides whose shapes refer to it by ``OutlineTextRefAtom`` or hold their own text, notes pages);
``make_xls`` uses xlwt (BIFF8, what Excel 97-2003 writes). All in memory, through ``write_cfb``.
"""

from __future__ import annotations

import io
import struct

from tests.fidelity.cfb_writer import write_cfb

_FIB_WHICH_TABLE, _FIB_ENCRYPTED = 0x0200, 0x0100


def _fib(ccp_text: int, ccp_hdd: int, clx: tuple[int, int], flags: int,
         stsh: tuple[int, int] = (0, 0), bte: tuple[int, int] = (0, 0)) -> bytes:
    base = struct.pack("<HHHHHH", 0xA5EC, 0x00C1, 0, 0x0409, 0, _FIB_WHICH_TABLE | flags).ljust(32, b"\0")
    rgw = struct.pack("<H", 14) + b"\0" * 28
    lw = [0] * 22
    lw[3], lw[5] = ccp_text, ccp_hdd
    rglw = struct.pack("<H22I", 22, *lw)
    pairs = [0] * (93 * 2)
    pairs[66], pairs[67] = clx
    pairs[2], pairs[3] = stsh
    pairs[26], pairs[27] = bte
    return base + rgw + rglw + struct.pack(f"<H{93 * 2}I", 93, *pairs)


def _stsh() -> bytes:
    """A style sheet: istd 0 "Normal" (sti 0), istd 1-9 "heading 1-9" (sti 1-9)."""
    stshi = struct.pack("<HHH", 10, 10, 0).ljust(18, b"\0")  # cstd, cbSTDBaseInFile, flags...
    stds = b""
    for istd, name in enumerate(["Normal"] + [f"heading {n}" for n in range(1, 10)]):
        xstz = struct.pack("<H", len(name)) + name.encode("utf-16-le") + b"\0\0"
        raw = struct.pack("<H", istd).ljust(10, b"\0") + xstz
        stds += struct.pack("<H", len(raw)) + raw
    return struct.pack("<H", len(stshi)) + stshi + stds


def _fkp(runs: list[tuple[int, int, int]]) -> bytes:
    """One PapxFkp page: (first byte, end byte, istd) runs, each PAPX holding only its istd."""
    page = bytearray(512)
    crun = len(runs)
    struct.pack_into(f"<{crun + 1}I", page, 0, *[r[0] for r in runs], runs[-1][1])
    at = 510 - 4 * crun
    for i, (_, _, istd) in enumerate(runs):
        offset = at + 4 * i
        page[4 * (crun + 1) + 13 * i] = offset // 2
        page[offset], page[offset + 1] = 0, 1  # cb 0, cb' 1: a 2-byte GrpPrlAndIstd
        struct.pack_into("<H", page, offset + 2, istd)
    page[511] = crun
    return bytes(page)


def make_doc(paragraphs: list[str], header: str = "", *, encrypted: bool = False,
             headings: dict[int, int] | None = None) -> bytes:
    """A Word 97 document: ``paragraphs`` (each ended by ``\\r``; a ``\\x07`` in one is a cell mark)
    as the main text, ``header`` as the headers sub-document; ``headings``: paragraph index → heading
    level (its style). ASCII paragraphs go into an 8-bit piece, the others into UTF-16 pieces; every
    piece is placed after the FIB, the paragraph-property page after them."""
    main = [p + "\r" for p in paragraphs]
    subs = [header + "\r"] if header else []
    pieces: list[tuple[str, bool]] = [(t, t.isascii()) for t in main + subs + (["\r"] if subs else [])]
    ccp_text = sum(len(p) for p in main)
    ccp_hdd = sum(len(p) for p in subs)
    fib_size = len(_fib(0, 0, (0, 0), 0))
    text = bytearray()
    descriptors: list[tuple[int, int, int]] = []  # (cp start, cp end, fc raw)
    runs: list[tuple[int, int, int]] = []  # (first byte, end byte, istd) of the main paragraphs
    cp = 0
    start = (fib_size + 511) // 512 * 512
    for index, (chars, compressed) in enumerate(pieces):
        offset = start + len(text)
        if index < len(main):
            width = 1 if compressed else 2
            runs.append((offset, offset + width * len(chars), (headings or {}).get(index, 0)))
        if compressed:
            text += chars.encode("cp1252")
            raw = (offset * 2) | 0x40000000
        else:
            text += chars.encode("utf-16-le")
            raw = offset
        descriptors.append((cp, cp + len(chars), raw))
        cp += len(chars)
    cps = [d[0] for d in descriptors] + [cp]
    plc = struct.pack(f"<{len(cps)}I", *cps) + b"".join(struct.pack("<HIH", 0, raw, 0) for *_, raw in descriptors)
    clx = b"\x02" + struct.pack("<I", len(plc)) + plc
    word = bytearray(start) + text
    word += b"\0" * (-len(word) % 512)
    page = len(word) // 512
    word += _fkp(runs)
    stsh = _stsh()
    bte = struct.pack("<III", runs[0][0], runs[-1][1], page)
    table = b"\0" * 16 + clx + stsh + bte
    fib = _fib(ccp_text, ccp_hdd, (16, len(clx)), _FIB_ENCRYPTED if encrypted else 0,
               (16 + len(clx), len(stsh)), (16 + len(clx) + len(stsh), len(bte)))
    word[: len(fib)] = fib
    return write_cfb({"WordDocument": bytes(word).ljust(4096, b"\0"), "1Table": table.ljust(4096, b"\0")})


def _rec(rtype: int, body: bytes, *, instance: int = 0, container: bool = False, ver: int = 0) -> bytes:
    return struct.pack("<HHI", (instance << 4) | (0xF if container else ver), rtype, len(body)) + body


def _text_atom(text: str) -> bytes:
    if text.isascii():
        return _rec(0x0FA8, text.encode("latin-1"))
    return _rec(0x0FA0, text.encode("utf-16-le"))


def _shape(top: int, left: int, textbox: bytes) -> bytes:
    anchor = _rec(0xF010, struct.pack("<hhhh", top, left, left + 100, top + 50))
    return _rec(0xF004, anchor + _rec(0xF00D, textbox, container=True), container=True)


def _drawing(shapes: list[bytes]) -> bytes:
    group = _rec(0xF003, b"".join(shapes), container=True)
    return _rec(0x040C, _rec(0xF002, group, container=True), container=True)


def make_ppt(slides: list[tuple[str, str, str, str]], *, encrypted: bool = False) -> bytes:
    """A presentation of ``(title, body, text box, note)`` slides: title and body in the
    SlideListWithText (shapes refer to them), the text box in its own shape, the note on a notes
    page. Written in reverse stream order (the slides before the document), as after a save."""
    pid_doc, first_slide = 1, 2
    n = len(slides)
    stream = bytearray()
    offsets: dict[int, int] = {}
    for i, (_, _, box, note) in enumerate(slides):
        slide_pid, notes_pid = first_slide + i, first_slide + n + i
        atom = _rec(0x03EF, struct.pack("<I8sIIHH", 0, b"\0" * 8, 0, 0x200 + i, 0, 0), ver=2)
        shapes = [_shape(50, 10, _rec(0x0F9E, struct.pack("<I", 1))),  # body below the title
                  _shape(10, 10, _rec(0x0F9E, struct.pack("<I", 0))),
                  _shape(90, 10, _rec(0x0F9F, struct.pack("<I", 4)) + _text_atom(box))]
        offsets[slide_pid] = len(stream)
        stream += _rec(0x03EE, atom + _drawing(shapes), container=True)
        offsets[notes_pid] = len(stream)
        notes_shape = _shape(0, 0, _rec(0x0F9F, struct.pack("<I", 2)) + _text_atom(note))
        stream += _rec(0x03F0, _drawing([notes_shape]), container=True)
    slide_list = b"".join(
        _rec(0x03F3, struct.pack("<5I", first_slide + i, 0, 2, 0x100 + i, 0))
        + _rec(0x0F9F, struct.pack("<I", 0)) + _text_atom(title) + _rec(0x0F9F, struct.pack("<I", 1)) + _text_atom(body)
        for i, (title, body, _, _) in enumerate(slides))
    notes_list = b"".join(_rec(0x03F3, struct.pack("<5I", first_slide + n + i, 0, 0, 0x200 + i, 0)) for i in range(n))
    offsets[pid_doc] = len(stream)
    stream += _rec(0x03E8, _rec(0x0FF0, slide_list, container=True)
                   + _rec(0x0FF0, notes_list, instance=2, container=True), container=True)
    directory_at = len(stream)
    count = 1 + 2 * n
    stream += _rec(0x1772, struct.pack(f"<I{count}I", 1 | (count << 20), *(offsets[p] for p in range(1, count + 1))))
    edit_at = len(stream)
    stream += _rec(0x0FF5, struct.pack("<IHBBIIIIHH", 0x100, 0, 0, 3, 0, directory_at, pid_doc, count + 1, 1, 0))
    token = 0xF3D1C4DF if encrypted else 0xE391C05F
    user = _rec(0x0FF6, struct.pack("<III", 0x14, token, edit_at) + b"\0" * 8)
    return write_cfb({"PowerPoint Document": bytes(stream).ljust(4096, b"\0"), "Current User": user})


def make_xls(sheets: dict[str, list[list[object]]]) -> bytes:
    """An Excel 97-2003 workbook (xlwt, BIFF8): sheet name → rows of values."""
    import xlwt  # dev dependency

    book = xlwt.Workbook(encoding="utf-8")
    for name, rows in sheets.items():
        sheet = book.add_sheet(name)
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                sheet.write(r, c, value)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()
