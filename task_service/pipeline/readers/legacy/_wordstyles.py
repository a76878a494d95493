"""Which paragraphs of a Word 97-2003 document are headings, from its styles (pure).

A paragraph's style is the ``istd`` at the start of its PAPX ([MS-DOC] 2.9.124 GrpPrlAndIstd),
found through the ``PlcBtePapx`` (2.8.6: file-offset ranges → 512-byte ``PapxFkp`` pages of the
WordDocument stream, 2.9.174); the style sheet (``STSH``, 2.9.275) says which ``istd`` is a
built-in heading: its ``sti`` (2.9.296 ``StdfBase``) 1-9 is "heading 1"-"heading 9" ([MS-DOC]
2.9.296, the built-in style identifiers). Anything unreadable gives no heading, never an error:
styles only add section paths to text that is read anyway.
"""

from __future__ import annotations

import bisect
import struct

__all__ = ["Styles"]

_FKP = 512
_MAX_STYLES = 4_096


class Styles:
    """Heading levels by file offset of a paragraph mark."""

    def __init__(self, word: bytes, table: bytes, stsh: tuple[int, int], bte: tuple[int, int]) -> None:
        try:
            self.levels = _heading_levels(table[stsh[0] : stsh[0] + stsh[1]])
            self.runs = _paragraph_runs(word, table[bte[0] : bte[0] + bte[1]]) if self.levels else []
        except (struct.error, IndexError, ValueError):
            self.levels, self.runs = {}, []
        self.starts = [start for start, _, _ in self.runs]

    def level_at(self, fc: int) -> int:
        """The heading level (1-9) of the paragraph whose mark is at byte offset ``fc``, else 0."""
        i = bisect.bisect_right(self.starts, fc) - 1
        if i < 0 or fc >= self.runs[i][1]:
            return 0
        return self.levels.get(self.runs[i][2], 0)


def _heading_levels(stsh: bytes) -> dict[int, int]:
    """istd → heading level for the styles whose ``sti`` is 1-9."""
    if len(stsh) < 6:
        return {}
    cb_stshi = struct.unpack_from("<H", stsh, 0)[0]
    count = min(struct.unpack_from("<H", stsh, 2)[0], _MAX_STYLES)
    pos = 2 + cb_stshi
    levels: dict[int, int] = {}
    for istd in range(count):
        if pos + 2 > len(stsh):
            break
        size = struct.unpack_from("<H", stsh, pos)[0]
        if size >= 2:
            sti = struct.unpack_from("<H", stsh, pos + 2)[0] & 0x0FFF
            if 1 <= sti <= 9:
                levels[istd] = sti
        pos += 2 + size
    return levels


def _paragraph_runs(word: bytes, plc: bytes) -> list[tuple[int, int, int]]:
    """(first byte, end byte, istd) of each paragraph run, in file order."""
    n = (len(plc) - 4) // 8
    if n <= 0:
        return []
    pages = struct.unpack_from(f"<{n}I", plc, 4 * (n + 1))
    runs: list[tuple[int, int, int]] = []
    for pn in pages:
        page = word[(pn & 0x3FFFFF) * _FKP : (pn & 0x3FFFFF) * _FKP + _FKP]
        if len(page) < _FKP:
            continue
        crun = page[_FKP - 1]
        fcs = struct.unpack_from(f"<{crun + 1}I", page, 0)
        for i in range(crun):
            offset = page[4 * (crun + 1) + 13 * i] * 2
            if offset == 0:
                continue  # a run with no PAPX: the default style
            size = page[offset]
            at = offset + 1 if size else offset + 2
            if at + 2 <= _FKP:
                runs.append((fcs[i], fcs[i + 1], struct.unpack_from("<H", page, at)[0]))
    runs.sort()
    return runs
