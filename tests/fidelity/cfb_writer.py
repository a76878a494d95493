"""A tiny MS-CFB (OLE compound file) writer, for tests: ``write_cfb({"a/b": data}) -> bytes``.

Writes version 3 files (512-byte sectors) as [MS-CFB] describes them: header, FAT (up to 109 FAT
sectors, so no DIFAT sectors: files up to ~7 MB), directory, and the mini stream (64-byte mini
sectors, a mini FAT) for streams shorter than the 4,096-byte cutoff, so stream sizes are exact.
Storages are made from "/" in the names ("__substg1.0_3701000D/__properties_version1.0").
Sibling trees are balanced binary search trees in CFB name order, every node black (readers do not
check colours; olefile and LibreOffice read them). Source: [MS-CFB] v20210407, sections 2.2-2.6.

olefile cannot write, hence this; it is generic so the .doc/.xls/.ppt/.msg tests can share it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

SECTOR = 512
MINI_SECTOR = 64
MINI_CUTOFF = 4096
FREESECT = 0xFFFFFFFF
ENDOFCHAIN = 0xFFFFFFFE
FATSECT = 0xFFFFFFFD
NOSTREAM = 0xFFFFFFFF
MAGIC = bytes.fromhex("D0CF11E0A1B11AE1")
_ENTRIES_PER_FAT = SECTOR // 4
_MAX_HEADER_FAT = 109


@dataclass
class _Entry:
    name: str
    kind: int  # 1 storage, 2 stream, 5 root
    data: bytes = b""
    children: list[_Entry] = field(default_factory=list)
    sid: int = 0
    start: int = ENDOFCHAIN
    size: int = 0
    left: int = NOSTREAM
    right: int = NOSTREAM
    child: int = NOSTREAM


def write_cfb(streams: dict[str, bytes]) -> bytes:
    """Return a compound file holding ``streams`` (path "storage/sub/stream" -> bytes).

    Raises ValueError for a name over 31 characters, an empty name, a path used both as a
    stream and a storage, or a file too large for 109 FAT sectors.
    """
    root = _tree(streams)
    entries = _number(root)
    small = [e for e in entries if e.kind == 2 and len(e.data) < MINI_CUTOFF]
    big = [e for e in entries if e.kind == 2 and len(e.data) >= MINI_CUTOFF]
    mini_stream, mini_fat = _layout_mini(small)
    root.data = mini_stream
    fat: list[int] = []
    body = bytearray()
    for entry in [*big, root]:
        entry.start, entry.size = _place(entry.data, fat, body), len(entry.data)
    mini_fat_bytes = b"".join(struct.pack("<I", n) for n in mini_fat)
    mini_fat_start = _place(mini_fat_bytes, fat, body) if mini_fat else ENDOFCHAIN
    _link(root)
    dir_start = _place(b"".join(_dir_entry(e) for e in entries), fat, body, pad_entry=True)
    fat_sids = _add_fat_sectors(fat)  # the FAT sectors come last, right after the body
    fat_bytes = b"".join(struct.pack("<I", n) for n in fat)
    fat_bytes += b"\xff" * (len(fat_sids) * SECTOR - len(fat_bytes))
    header = _header(fat_sids, dir_start, mini_fat_start, (len(mini_fat_bytes) + SECTOR - 1) // SECTOR)
    return header + bytes(body) + fat_bytes


def _tree(streams: dict[str, bytes]) -> _Entry:
    root = _Entry("Root Entry", 5)
    for path, data in streams.items():
        parts = path.split("/")
        node = root
        for part in parts[:-1]:
            node = _child(node, part, 1)
        leaf = _child(node, parts[-1], 2)
        leaf.data = bytes(data)
    return root


def _child(node: _Entry, name: str, kind: int) -> _Entry:
    if not name or len(name) > 31:
        raise ValueError(f"CFB names have 1 to 31 characters: {name!r}")
    if node.kind == 2:
        raise ValueError(f"{node.name!r} is a stream, it cannot hold {name!r}")
    for c in node.children:
        if c.name == name:
            if c.kind != kind:
                raise ValueError(f"{name!r} is used both as a stream and a storage")
            return c
    new = _Entry(name, kind)
    node.children.append(new)
    return new


def _number(root: _Entry) -> list[_Entry]:
    """Depth-first order; the root is entry 0."""
    out: list[_Entry] = []
    todo = [root]
    while todo:
        e = todo.pop(0)
        e.sid = len(out)
        out.append(e)
        todo[0:0] = e.children
    return out


def _cfb_key(name: str) -> tuple[int, str]:
    """CFB sibling order: shorter names first, then by upper-cased UTF-16 code units ([MS-CFB] 2.6.4)."""
    return len(name.encode("utf-16-le")), name.upper()


def _link(node: _Entry) -> None:
    kids = sorted(node.children, key=lambda e: _cfb_key(e.name))
    node.child = _balanced(kids)
    for k in kids:
        _link(k)


def _balanced(kids: list[_Entry]) -> int:
    if not kids:
        return NOSTREAM
    mid = len(kids) // 2
    top = kids[mid]
    top.left = _balanced(kids[:mid])
    top.right = _balanced(kids[mid + 1 :])
    return top.sid


def _layout_mini(small: list[_Entry]) -> tuple[bytes, list[int]]:
    stream = bytearray()
    mini_fat: list[int] = []
    for e in small:
        e.size = len(e.data)
        if not e.data:
            e.start = ENDOFCHAIN
            continue
        e.start = len(mini_fat)
        n = (len(e.data) + MINI_SECTOR - 1) // MINI_SECTOR
        mini_fat.extend(range(e.start + 1, e.start + n))
        mini_fat.append(ENDOFCHAIN)
        stream += e.data + b"\0" * (n * MINI_SECTOR - len(e.data))
    return bytes(stream), mini_fat


def _place(data: bytes, fat: list[int], body: bytearray, *, pad_entry: bool = False) -> int:
    """Append ``data`` as a sector chain; return its first sector (ENDOFCHAIN when empty)."""
    if not data:
        return ENDOFCHAIN
    n = (len(data) + SECTOR - 1) // SECTOR
    start = len(fat)
    fat.extend(range(start + 1, start + n))
    fat.append(ENDOFCHAIN)
    pad = n * SECTOR - len(data)
    body += data + (_EMPTY_DIR * (pad // len(_EMPTY_DIR)) if pad_entry else b"\0" * pad)
    return start


def _add_fat_sectors(fat: list[int]) -> list[int]:
    n = 1
    while len(fat) + n > n * _ENTRIES_PER_FAT:
        n += 1
    if n > _MAX_HEADER_FAT:
        raise ValueError("file too large for this writer (more than 109 FAT sectors)")
    first = len(fat)
    fat.extend([FATSECT] * n)
    return list(range(first, first + n))


def _dir_entry(e: _Entry) -> bytes:
    raw = e.name.encode("utf-16-le") + b"\0\0"
    return struct.pack(
        "<64sHBBIII16sIQQIQ",
        raw,
        len(raw),
        e.kind,
        1,  # black
        e.left,
        e.right,
        e.child,
        b"\0" * 16,
        0,
        0,
        0,
        e.start if (e.kind != 1) else 0,
        e.size if e.kind != 1 else 0,
    )


_EMPTY_DIR = struct.pack(
    "<64sHBBIII16sIQQIQ", b"", 0, 0, 0, NOSTREAM, NOSTREAM, NOSTREAM, b"\0" * 16, 0, 0, 0, 0, 0
)


def _header(fat_sids: list[int], dir_start: int, mini_fat_start: int, n_mini_fat: int) -> bytes:
    difat = fat_sids + [FREESECT] * (_MAX_HEADER_FAT - len(fat_sids))
    head = struct.pack(
        "<8s16sHHHHH6sIIIIIIIII",
        MAGIC,
        b"\0" * 16,
        0x003E,  # minor version
        0x0003,  # major version 3: 512-byte sectors
        0xFFFE,  # byte order
        9,  # sector shift
        6,  # mini sector shift
        b"\0" * 6,
        0,  # directory sectors (0 in version 3)
        len(fat_sids),
        dir_start,
        0,  # transaction signature
        MINI_CUTOFF,
        mini_fat_start,
        n_mini_fat,
        ENDOFCHAIN,  # first DIFAT sector
        0,  # DIFAT sectors
    )
    return head + struct.pack(f"<{_MAX_HEADER_FAT}I", *difat)
