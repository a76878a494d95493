"""A minimal Compound File Binary (MS-CFB v3) writer and an Outlook .msg (MS-OXMSG) builder, for tests.

No library writes .msg files (extract-msg, olefile and compoundfiles only read; olefile writes
streams of an existing file in place), so the corpus builds them here. ``write_cfb`` lays out a
version-3 file (512-byte sectors): streams under 4,096 bytes in the mini stream (64-byte
sectors), others in regular sectors, then the mini FAT, the directory and the FAT; at most 109
FAT sectors (≈7 MB: the header's DIFAT only). Children of a storage form a balanced binary tree
ordered as MS-CFB 2.6.4 says (shorter names first, then upper-case code-unit order), all black.

``build_msg`` turns a :class:`Message` into the MS-OXMSG storages: ``__substg1.0_XXXXYYYY``
streams for strings (``001F`` UTF-16 LE, or ``001E`` 8-bit with a code page) and binaries
(``0102``), ``__properties_version1.0`` with the fixed-size properties (dates as FILETIME),
``__recip_version1.0_#`` and ``__attach_version1.0_#`` storages, an embedded message as the
``__substg1.0_3701000D`` storage of its attachment, and an empty ``__nameid_version1.0``.
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass, field

Tree = dict[str, "bytes | Tree"]

SECTOR = 512
MINI_SECTOR = 64
MINI_CUTOFF = 4096
FREE, END, FAT_SECT, NOSTREAM = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF
_MAX_FAT_SECTORS = 109


@dataclass
class _Entry:
    name: str
    kind: int  # 1 storage, 2 stream, 5 root
    data: bytes = b""
    children: list[int] = field(default_factory=list)
    left: int = NOSTREAM
    right: int = NOSTREAM
    child: int = NOSTREAM
    start: int = END
    size: int = 0


def _flatten(tree: Tree) -> list[_Entry]:
    entries = [_Entry("Root Entry", 5)]
    todo: list[tuple[int, Tree]] = [(0, tree)]
    while todo:
        parent, node = todo.pop()
        for name, value in node.items():
            if len(name) > 31:
                raise ValueError(f"CFB names have at most 31 characters: {name!r}")
            entries.append(_Entry(name, 2, value) if isinstance(value, bytes) else _Entry(name, 1))
            entries[parent].children.append(len(entries) - 1)
            if not isinstance(value, bytes):
                todo.append((len(entries) - 1, value))
    for entry in entries:
        ordered = sorted(entry.children, key=lambda i: (len(entries[i].name), entries[i].name.upper()))
        entry.child = _balance(entries, ordered)
    return entries


def _balance(entries: list[_Entry], ordered: list[int]) -> int:
    if not ordered:
        return NOSTREAM
    mid = len(ordered) // 2
    node = entries[ordered[mid]]
    node.left = _balance(entries, ordered[:mid])
    node.right = _balance(entries, ordered[mid + 1 :])
    return ordered[mid]


def _sectors(size: int, unit: int) -> int:
    return -(-size // unit)


def _chain(fat: list[int], start: int, count: int) -> None:
    for i in range(count):
        fat[start + i] = start + i + 1 if i < count - 1 else END


def write_cfb(tree: Tree) -> bytes:
    """The bytes of a compound file whose root storage holds ``tree`` (name → bytes or sub-tree)."""
    entries = _flatten(tree)
    mini = bytearray()
    minifat: list[int] = []
    big: list[_Entry] = []
    for entry in entries:
        if entry.kind != 2 or not entry.data:
            continue
        if len(entry.data) < MINI_CUTOFF:
            entry.start, entry.size = len(mini) // MINI_SECTOR, len(entry.data)
            count = _sectors(len(entry.data), MINI_SECTOR)
            minifat.extend(entry.start + i + 1 if i < count - 1 else END for i in range(count))
            mini += entry.data.ljust(count * MINI_SECTOR, b"\0")
        else:
            big.append(entry)
    body = bytearray()
    fat: list[int] = []
    for entry in big:
        entry.start, entry.size = len(fat), len(entry.data)
        count = _sectors(len(entry.data), SECTOR)
        fat.extend([0] * count)
        _chain(fat, entry.start, count)
        body += entry.data.ljust(count * SECTOR, b"\0")
    root = entries[0]
    root.start, root.size = (len(fat), len(mini)) if mini else (END, 0)
    _append(fat, body, bytes(mini))
    minifat_start = len(fat) if minifat else END
    _append(fat, body, b"".join(struct.pack("<I", n) for n in minifat))
    dir_start = len(fat)
    padded = entries + [None] * (-len(entries) % 4)
    _append(fat, body, b"".join(_dir_entry(e) for e in padded))
    n_fat = 1
    while len(fat) + n_fat > n_fat * (SECTOR // 4):
        n_fat += 1
    if n_fat > _MAX_FAT_SECTORS:
        raise ValueError("file too large for a DIFAT-less CFB")
    fat_start = len(fat)
    fat.extend([FAT_SECT] * n_fat)
    fat.extend([FREE] * (n_fat * (SECTOR // 4) - len(fat)))
    body += b"".join(struct.pack("<I", n) for n in fat)
    header = _header(n_fat, dir_start, minifat_start, _sectors(len(minifat) * 4, SECTOR), fat_start)
    return header + bytes(body)


def _append(fat: list[int], body: bytearray, data: bytes) -> None:
    if not data:
        return
    start, count = len(fat), _sectors(len(data), SECTOR)
    fat.extend([0] * count)
    _chain(fat, start, count)
    body += data.ljust(count * SECTOR, b"\0")


def _header(n_fat: int, dir_start: int, minifat_start: int, n_minifat: int, fat_start: int) -> bytes:
    head = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(16)
    head += struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6) + bytes(6)
    head += struct.pack("<IIIIIIII", 0, n_fat, dir_start, 0, MINI_CUTOFF, minifat_start, n_minifat, END)
    head += struct.pack("<I", 0)
    difat = [fat_start + i for i in range(n_fat)] + [FREE] * (_MAX_FAT_SECTORS - n_fat)
    return head + b"".join(struct.pack("<I", n) for n in difat)


def _dir_entry(entry: _Entry | None) -> bytes:
    if entry is None:
        return bytes(64) + struct.pack("<HBBIII", 0, 0, 0, NOSTREAM, NOSTREAM, NOSTREAM) + bytes(16 + 4 + 16 + 12)
    name = (entry.name + "\0").encode("utf-16-le")
    out = name.ljust(64, b"\0") + struct.pack("<HBB", len(name), entry.kind, 1)
    out += struct.pack("<III", entry.left, entry.right, entry.child) + bytes(16 + 4 + 16)
    return out + struct.pack("<IQ", entry.start, entry.size)


# ---------------------------------------------------------------------------------- .msg


@dataclass
class Attachment:
    """A file attachment (``data``) or an embedded message (``message``)."""

    filename: str
    data: bytes = b""
    message: Message | None = None
    mime_type: str = ""
    content_id: str = ""


@dataclass
class Message:
    """The properties the .msg reader looks at; ``None`` leaves a property out."""

    subject: str | None = None
    sender_name: str | None = None
    sender_email: str | None = None
    to: list[tuple[str, str]] = field(default_factory=list)  # (name, address)
    cc: list[tuple[str, str]] = field(default_factory=list)
    date: dt.datetime | None = None
    body: str | None = None
    html: bytes | None = None
    rtf_compressed: bytes | None = None
    attachments: list[Attachment] = field(default_factory=list)
    codepage: int | None = None  # set: strings as 001E in this code page
    extra: Tree = field(default_factory=dict)


def _string(props: Tree, prop_id: int, value: str | None, codepage: int | None) -> None:
    if value is None:
        return
    if codepage is None:
        props[f"__substg1.0_{prop_id:04X}001F"] = value.encode("utf-16-le")
    else:
        props[f"__substg1.0_{prop_id:04X}001E"] = value.encode(f"cp{codepage}")


def _fixed(entries: list[tuple[int, int, bytes]]) -> bytes:
    """Fixed-size property entries: (property id, type, 8 value bytes)."""
    return b"".join(struct.pack("<HHI", ptype, pid, 6) + value.ljust(8, b"\0") for pid, ptype, value in entries)


def _filetime(when: dt.datetime) -> bytes:
    epoch = dt.datetime(1601, 1, 1, tzinfo=dt.UTC)
    return struct.pack("<Q", int((when - epoch).total_seconds() * 10_000_000))


def _message_tree(msg: Message, *, embedded: bool) -> Tree:
    tree: Tree = {}
    _string(tree, 0x001A, "IPM.Note", msg.codepage)
    _string(tree, 0x0037, msg.subject, msg.codepage)
    _string(tree, 0x0C1A, msg.sender_name, msg.codepage)
    _string(tree, 0x0C1F, msg.sender_email, msg.codepage)
    _string(tree, 0x0E04, "; ".join(n for n, _ in msg.to) or None, msg.codepage)
    _string(tree, 0x0E03, "; ".join(n for n, _ in msg.cc) or None, msg.codepage)
    _string(tree, 0x1000, msg.body, msg.codepage)
    if msg.html is not None:
        tree["__substg1.0_10130102"] = msg.html
    if msg.rtf_compressed is not None:
        tree["__substg1.0_10090102"] = msg.rtf_compressed
    fixed: list[tuple[int, int, bytes]] = []
    if msg.date is not None:
        fixed.append((0x0039, 0x0040, _filetime(msg.date)))
    if msg.codepage is not None:
        fixed.append((0x3FFD, 0x0003, struct.pack("<i", msg.codepage)))
    recipients = [(n, a, 1) for n, a in msg.to] + [(n, a, 2) for n, a in msg.cc]
    for i, (name, address, kind) in enumerate(recipients):
        recip: Tree = {"__properties_version1.0": bytes(8) + _fixed([(0x0C15, 0x0003, struct.pack("<i", kind))])}
        _string(recip, 0x3001, name, msg.codepage)
        _string(recip, 0x3003, address, msg.codepage)
        tree[f"__recip_version1.0_#{i:08X}"] = recip
    for i, attachment in enumerate(msg.attachments):
        tree[f"__attach_version1.0_#{i:08X}"] = _attachment_tree(attachment)
    counts = struct.pack("<IIII", len(recipients), len(msg.attachments), len(recipients), len(msg.attachments))
    header = bytes(8) + counts + (b"" if embedded else bytes(8))
    tree["__properties_version1.0"] = header + _fixed(fixed)
    if not embedded:
        tree["__nameid_version1.0"] = {f"__substg1.0_000{n}0102": b"" for n in (2, 3, 4)}
    tree.update(msg.extra)
    return tree


def _attachment_tree(attachment: Attachment) -> Tree:
    method = 5 if attachment.message is not None else 1
    tree: Tree = {"__properties_version1.0": bytes(8) + _fixed([(0x3705, 0x0003, struct.pack("<i", method))])}
    _string(tree, 0x3707, attachment.filename, None)
    _string(tree, 0x3704, attachment.filename[:12], None)
    if attachment.mime_type:
        _string(tree, 0x370E, attachment.mime_type, None)
    if attachment.content_id:
        _string(tree, 0x3712, attachment.content_id, None)
    if attachment.message is not None:
        tree["__substg1.0_3701000D"] = _message_tree(attachment.message, embedded=True)
    else:
        tree["__substg1.0_37010102"] = attachment.data
    return tree


def build_msg(msg: Message) -> bytes:
    """The bytes of an Outlook .msg file holding ``msg``."""
    return write_cfb(_message_tree(msg, embedded=False))
