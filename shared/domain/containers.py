"""Which registered format some bytes are, from their container (pure: stdlib only, no I/O).

The rules of :mod:`shared.domain.formats` applied to bytes, shared by the API (typing an upload:
the head first, the ZIP central directory / OLE directory once the file is stored) and the
worker (a ZIP-based kind whose bytes are an OLE file: encrypted, or a legacy format).

Readers of a *part* of a file: :class:`SparseFile` is a read-only, seekable file of which only
some byte ranges are known; reading outside them raises ``NeedBytesError(offset, length)``, so
the caller can fetch that range and try again (the API does, with ranged reads from storage).

OLE2 compound files (MS-CFB, "[MS-CFB]: Compound File Binary File Format" v20221115): only the
directory is read: the 512-byte header, the FAT sectors that chain the directory (first 109
from the header's DIFAT, more through the DIFAT chain) and the directory sectors; at most
:data:`MAX_OLE_DIRECTORY_SECTORS`. Nothing else of the file is read.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
from typing import BinaryIO, Literal

from shared.domain.errors import NeedBytesError
from shared.domain.formats import ENCRYPTED_OLE_STREAMS, FORMATS, Container, Format

__all__ = [
    "MAX_DIRECTORY_BYTES",
    "OLE_MAGIC",
    "PDF_WINDOW",
    "ZIP_MAGIC",
    "SparseFile",
    "image_mime",
    "is_gzip",
    "is_ole",
    "is_tar",
    "is_zip",
    "looks_pdf",
    "ole_format",
    "ole_names",
    "text_format",
    "zip_format",
    "zip_mimetype",
    "zip_names",
]

PDF_MAGIC = b"%PDF-"
#: ``%PDF-`` may follow junk bytes; PDF readers look this far (Acrobat: 1024).
PDF_WINDOW = 1024
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # local file header; empty archive
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
#: Never read more than this much of a ZIP's central directory or an OLE directory to type it.
MAX_DIRECTORY_BYTES = 16 * 1024 * 1024
MAX_OLE_DIRECTORY_SECTORS = 4096
Encrypted = Literal["encrypted"]
_END_OF_CHAIN = 0xFFFFFFFA  # MAXREGSECT + 1: any sector number from here on ends a chain
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, KeyError,
               NotImplementedError, struct.error)


def looks_pdf(head: bytes, *, anywhere: bool) -> bool:
    """``%PDF-`` at the start, or (``anywhere``) within the first :data:`PDF_WINDOW` bytes."""
    return head.startswith(PDF_MAGIC) or (anywhere and PDF_MAGIC in head[:PDF_WINDOW])


def is_zip(head: bytes) -> bool:
    return head.startswith(ZIP_MAGIC)


def is_ole(head: bytes) -> bool:
    return head.startswith(OLE_MAGIC)


GZIP_MAGIC = b"\x1f\x8b"
#: POSIX ustar (and GNU tar's ``ustar  ``) magic, at offset 257 of a tar's first header block.
TAR_MAGIC_OFFSET = 257


def is_tar(head: bytes) -> bool:
    """A tar's first header (``ustar`` at offset 257: POSIX.1-1988 and GNU formats)."""
    return head[TAR_MAGIC_OFFSET:TAR_MAGIC_OFFSET + 5] == b"ustar"


def is_gzip(head: bytes) -> bool:
    return head.startswith(GZIP_MAGIC)


def image_mime(head: bytes) -> str | None:
    """The MIME type of an image format we read, from its magic bytes; None if none."""
    for fmt in FORMATS:
        for magic in fmt.magic:
            if magic.matches(head):
                return magic.mime
    return None


def text_format(text: str) -> Format | None:
    """The text format whose ``text_pattern`` matches the start of ``text`` (leading BOM and
    white space skipped, case-insensitive; line ends normalized to ``\\n``); None if none."""
    start = text.lstrip("\ufeff \t\r\n")[:4096].replace("\r\n", "\n")
    for fmt in FORMATS:
        if fmt.container is Container.TEXT and fmt.text_pattern and re.match(fmt.text_pattern, start, re.I):
            return fmt
    return None


# ------------------------------------------------------------------ ZIP


def zip_mimetype(head: bytes) -> str | None:
    """The content of a ZIP's first entry when it is a stored (uncompressed) ``mimetype``, as
    OpenDocument and EPUB require; None otherwise. Reads only the first local header."""
    if not head.startswith(b"PK\x03\x04") or len(head) < 30:
        return None
    method, size, name_len, extra_len = struct.unpack_from("<H8xI4xHH", head, 8)  # APPNOTE 4.3.7
    start = 30 + name_len + extra_len
    if method != 0 or head[30:30 + name_len] != b"mimetype" or not 0 < size <= 200:
        return None
    return head[start:start + size].decode("ascii", errors="replace").strip()


def zip_names(file: BinaryIO) -> list[str] | None:
    """The entry names of the ZIP in ``file`` (its central directory only; nothing inflated);
    None if it is not a readable ZIP. ``NeedBytesError`` from a :class:`SparseFile` propagates."""
    try:
        with zipfile.ZipFile(file) as archive:
            return archive.namelist()
    except _ZIP_ERRORS:
        return None


def zip_format(head: bytes, names: list[str] | None) -> Format | None:
    """The ZIP-based format of a package: by its ``mimetype`` entry (``head``: its first bytes),
    else by the marker part its central directory lists (``names``); None if neither."""
    mimetype = zip_mimetype(head)
    for fmt in FORMATS:
        if fmt.container is Container.ZIP_MIMETYPE and mimetype == fmt.marker:
            return fmt
    listed = set(names or ())
    for fmt in FORMATS:
        if fmt.container is Container.ZIP and fmt.marker in listed:
            return fmt
    return None


# ------------------------------------------------------------------ OLE2 (MS-CFB)


class _Cfb:
    """The directory of a compound file: header fields, FAT lookups through the DIFAT."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        header = self._read(0, 512)
        if not header.startswith(OLE_MAGIC):
            raise ValueError("not an OLE2 compound file")
        shift = struct.unpack_from("<H", header, 0x1E)[0]
        if shift not in (9, 12):
            raise ValueError(f"OLE2 sector shift {shift}")
        self._size = 1 << shift
        self._per = self._size // 4
        self.dir_start: int = struct.unpack_from("<I", header, 0x30)[0]
        self._difat_next: int = struct.unpack_from("<I", header, 0x44)[0]
        self._difat_left: int = struct.unpack_from("<I", header, 0x48)[0]
        self._difat: list[int] = list(struct.unpack_from("<109I", header, 0x4C))

    def _read(self, offset: int, length: int) -> bytes:
        self._file.seek(offset)
        data = self._file.read(length)
        if len(data) != length:
            raise ValueError("OLE2 file truncated")
        return data

    def sector(self, number: int) -> bytes:
        return self._read((number + 1) * self._size, self._size)

    def _fat_location(self, index: int) -> int:
        while index >= len(self._difat):
            if self._difat_left <= 0 or self._difat_next >= _END_OF_CHAIN or len(self._difat) > 1 << 20:
                raise ValueError("OLE2 DIFAT chain ends early")
            entries = struct.unpack(f"<{self._per}I", self.sector(self._difat_next))
            self._difat.extend(entries[:-1])
            self._difat_next, self._difat_left = entries[-1], self._difat_left - 1
        return self._difat[index]

    def next_sector(self, number: int) -> int:
        fat = self._fat_location(number // self._per)
        if fat >= _END_OF_CHAIN:
            raise ValueError("OLE2 FAT sector missing")
        entry: int = struct.unpack_from("<I", self.sector(fat), 4 * (number % self._per))[0]
        return entry


def _entry_names(sector: bytes) -> list[str]:
    names = []
    for at in range(0, len(sector), 128):
        entry = sector[at:at + 128]
        name_len, kind = struct.unpack_from("<HB", entry, 0x40)
        if kind in (1, 2, 5) and 2 <= name_len <= 64:  # storage, stream, root
            names.append(entry[:name_len - 2].decode("utf-16-le", errors="replace"))
    return names


def ole_names(file: BinaryIO) -> list[str] | None:
    """Every storage and stream name of the compound file in ``file`` (flat, directory order);
    None if it is not a readable OLE2 file. ``NeedBytesError`` from a :class:`SparseFile`
    propagates."""
    try:
        cfb = _Cfb(file)
        names: list[str] = []
        seen: set[int] = set()
        number = cfb.dir_start
        while number < _END_OF_CHAIN:
            if number in seen or len(seen) >= MAX_OLE_DIRECTORY_SECTORS:
                return None  # a loop, or a directory too large to be a document's
            seen.add(number)
            names += _entry_names(cfb.sector(number))
            number = cfb.next_sector(number)
        return names
    except (ValueError, struct.error, OSError):
        return None


def ole_format(names: list[str]) -> Format | Encrypted | None:
    """``"encrypted"`` for a password-protected OOXML package (MS-OFFCRYPTO: the streams
    ``EncryptionInfo`` and ``EncryptedPackage``), else the OLE-based format (accepted or
    refused) one of whose streams starts with its marker; None if none."""
    if all(any(n.lower() == stream.lower() for n in names) for stream in ENCRYPTED_OLE_STREAMS):
        return "encrypted"
    lowered = [name.lower() for name in names]  # CFB names compare case-insensitively ([MS-CFB] 2.6.4)
    for fmt in FORMATS:
        if fmt.container is Container.OLE and any(
                name.startswith(marker.lower()) for marker in fmt.markers for name in lowered):
            return fmt
    return None


# ------------------------------------------------------------------ partial files


class SparseFile(io.RawIOBase):
    """A read-only, seekable ``size``-byte file of which only ``pieces`` (``(offset, bytes)``)
    are known. A read that no single piece covers raises ``NeedBytesError(offset, length)``;
    one of more than :data:`MAX_DIRECTORY_BYTES` raises ``ValueError``."""

    def __init__(self, size: int, pieces: list[tuple[int, bytes]]) -> None:
        super().__init__()
        self._size, self._pieces, self._pos = size, pieces, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError("seek before start of file")
        self._pos = base + offset
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if end <= self._pos:
            return b""
        if end - self._pos > MAX_DIRECTORY_BYTES:
            raise ValueError("directory too large")
        for start, data in self._pieces:
            if start <= self._pos and end <= start + len(data):
                out = data[self._pos - start:end - start]
                self._pos = end
                return out
        raise NeedBytesError(self._pos, end - self._pos)
