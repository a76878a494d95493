"""Open a legacy Office compound file for a reader: its kind checked first, streams read whole (pure).

The kind comes from ``shared.domain.ole`` (the upload's sniffing rule): a password-protected
file raises ``EncryptedDocumentError`` (``encrypted``) before any stream is read, another kind than
the reader's raises ``UnsupportedTypeError`` naming what the file is.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from contextlib import contextmanager

import olefile

from shared.domain.errors import CorruptDocumentError, EncryptedDocumentError, UnsupportedTypeError
from shared.domain.formats import ENCRYPTED_MESSAGE
from shared.domain.ole import OleKind, classify_ole

__all__ = ["OLE_ERRORS", "check_kind", "open_compound", "read_stream"]

#: What olefile raises on a malformed container (OSError for its own checks).
OLE_ERRORS = (OSError, ValueError, IndexError, KeyError, TypeError, struct.error, RecursionError)

_WHAT = {
    "doc": "a Word 97-2003 document",
    "xls": "an Excel 97-2003 workbook",
    "ppt": "a PowerPoint 97-2003 presentation",
    "msg": "an Outlook message (.msg)",
    "unknown_ole": "an OLE compound file that is not Word, Excel, PowerPoint or Outlook",
}


def check_kind(data: bytes, expected: OleKind) -> None:
    """Raise unless the compound file ``data`` is of kind ``expected`` and not password-protected.

    Raises ``EncryptedDocumentError`` (encrypted legacy or OOXML file), ``UnsupportedTypeError``
    (another kind: the message names it), ``CorruptDocumentError`` (not a readable compound file).
    """
    kind = classify_ole(data)
    if kind in ("encrypted", "encrypted_ooxml"):
        raise EncryptedDocumentError(ENCRYPTED_MESSAGE)
    if kind != expected:
        raise UnsupportedTypeError(
            f"the file is {_WHAT[kind]}, not {_WHAT[expected]}: upload it with its own extension"
        )


@contextmanager
def open_compound(data: bytes, expected: OleKind) -> Iterator[olefile.OleFileIO]:
    """The compound file ``data`` opened with olefile, after :func:`check_kind`; closed on exit.

    olefile errors inside the block become ``CorruptDocumentError``.
    """
    check_kind(data, expected)
    try:
        ole = olefile.OleFileIO(io.BytesIO(data))  # a file object: olefile takes short bytes for a path
    except OLE_ERRORS as exc:
        raise CorruptDocumentError(f"unreadable OLE compound file: {exc}") from exc
    try:
        yield ole
    except OLE_ERRORS as exc:
        raise CorruptDocumentError(f"unreadable OLE compound file: {exc}") from exc
    finally:
        ole.close()


def read_stream(ole: olefile.OleFileIO, name: str) -> bytes:
    """The whole root stream ``name`` (case-insensitive), or ``b""`` when the file has none.

    Its size is bounded by the file's (olefile follows the sector chain within ``data``).
    """
    for entry in ole.root.kids:
        if entry.name.lower() == name.lower() and entry.entry_type == olefile.STGTY_STREAM:
            return bytes(ole.openstream(entry.name).read())
    return b""
