"""A raw OLE2 compound file (MS-CFB) for directory edge cases ``tests/fidelity/cfb_writer.py``
does not write (version 4 files with 4096-byte sectors; a directory chain that loops): a header,
one FAT sector and the directory, holding empty streams/storages with the given names (enough
for the container sniffing, which reads only the directory)."""

from __future__ import annotations

import struct

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
FREE, END, FAT_SECTOR, NO_STREAM = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF


def _entry(name: str, kind: int, right: int = NO_STREAM, child: int = NO_STREAM) -> bytes:
    raw = (name + "\x00").encode("utf-16-le")
    assert len(raw) <= 64, name
    return (raw.ljust(64, b"\x00") + struct.pack("<HBB3I", len(raw), kind, 1, NO_STREAM, right, child)
            + b"\x00" * 16 + b"\x00" * 4 + b"\x00" * 16 + struct.pack("<IQ", END, 0))


def cfb(names: list[str], *, shift: int = 9, loop: bool = False) -> bytes:
    """A compound file whose directory is ``Root Entry`` + ``names`` (streams; a name ending
    with ``/`` is a storage), over as many chained directory sectors as needed. ``loop``: the
    last directory sector chains back to the first (a corrupt file)."""
    size = 1 << shift
    # The root's children as a chain of right siblings (a valid, if unbalanced, tree).
    entries = [_entry("Root Entry", 5, child=1 if names else NO_STREAM)] + [
        _entry(n.rstrip("/"), 1 if n.endswith("/") else 2, right=i + 2 if i + 1 < len(names) else NO_STREAM)
        for i, n in enumerate(names)]
    per = size // 128
    n_dir = -(-len(entries) // per)
    chain = [i + 2 for i in range(n_dir - 1)] + [1 if loop else END]
    fat = [FAT_SECTOR, *chain]
    fat += [FREE] * (size // 4 - len(fat))
    header = (OLE_MAGIC + b"\x00" * 16 + struct.pack("<HHHHH6xIIIIIIIII", 0x3E, 3 if shift == 9 else 4, 0xFFFE, shift,
                                                     6, 0, 1, 1, 0, 4096, END, 0, END, 0)
              + struct.pack("<109I", 0, *([FREE] * 108)))
    directory = b"".join(entries).ljust(n_dir * size, b"\x00")
    return header.ljust(size, b"\x00") + struct.pack(f"<{size // 4}I", *fat) + directory
