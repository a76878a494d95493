"""An Outlook .msg (MS-OXMSG) builder, for tests: ``build_msg(Message(...)) -> bytes``.

No library writes .msg files (extract-msg, olefile and compoundfiles only read; olefile writes
streams of an existing file in place), so the corpus builds them here, on the generic compound
file writer ``cfb_writer.write_cfb``. ``build_msg`` turns a :class:`Message` into the MS-OXMSG
storages: ``__substg1.0_XXXXYYYY`` streams for strings (``001F`` UTF-16 LE, or ``001E`` 8-bit
with a code page) and binaries (``0102``), ``__properties_version1.0`` with the fixed-size
properties (dates as FILETIME), ``__recip_version1.0_#`` and ``__attach_version1.0_#`` storages,
an embedded message as the ``__substg1.0_3701000D`` storage of its attachment, and an
``__nameid_version1.0`` storage of empty streams.
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass, field

from tests.fidelity.cfb_writer import write_cfb

Tree = dict[str, "bytes | Tree"]


def _paths(tree: Tree, prefix: str = "") -> dict[str, bytes]:
    """``tree`` (name → bytes or sub-tree) as ``write_cfb``'s "storage/stream" paths (empty storages dropped)."""
    paths: dict[str, bytes] = {}
    for name, value in tree.items():
        if isinstance(value, bytes):
            paths[prefix + name] = value
        else:
            paths.update(_paths(value, f"{prefix}{name}/"))
    return paths




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
    return write_cfb(_paths(_message_tree(msg, embedded=False)))
