"""What an OLE compound file (MS-CFB, magic ``D0 CF 11 E0 A1 B1 1A E1``) holds, and what to answer.

Pure: bytes in, a kind out; no I/O. Used where bytes are typed (upload sniffing) and by the worker:
the legacy Office readers (``readers/legacy/``) check the kind first, so a password-protected file
ends ``encrypted``; where a ZIP package is expected (a password-protected DOCX is an OLE container,
not a ZIP; a .doc renamed .docx) :func:`refusal` gives a clear error.

Kinds, from the root streams ([MS-CFB] directory; olefile parses it):

============== ====================================================================================
doc            ``WordDocument`` (Word 97-2003; [MS-DOC] 2.1)
xls            ``Workbook`` (BIFF8) or ``Book`` (BIFF5) (Excel 5-2003; [MS-XLS] 2.1.2)
ppt            ``PowerPoint Document`` (PowerPoint 97-2003; [MS-PPT] 2.1.1)
msg            ``__substg1.0_*`` / ``__properties_version1.0`` (Outlook item; [MS-OXMSG] 2.1)
encrypted_ooxml ``EncryptionInfo`` + ``EncryptedPackage`` (password-protected DOCX/XLSX/PPTX;
               [MS-OFFCRYPTO] 2.3.4)
encrypted      a doc/xls/ppt with its encryption flag set: .doc FIB ``fEncrypted`` (bit 8 of the
               flags word at offset 10, [MS-DOC] 2.5.2); .xls FILEPASS record (0x002F) in the
               globals substream ([MS-XLS] 2.4.117); .ppt CurrentUserAtom ``headerToken``
               0xF3D1C4DF ([MS-PPT] 2.3.2) or an ``EncryptedSummary`` stream
unknown_ole    anything else (Visio, Works, MSI, a bare compound file)
============== ====================================================================================

Only the first bytes of a stream are read (the sector chain is followed for at most ``_HEAD``
bytes), so a 200 MB workbook costs its directory, not a copy of its stream.

Legacy .doc/.xls/.ppt are read (``task_service/pipeline/readers/legacy/``; the choice of readers:
bench/RESULTS.md, "legacy-readers").
"""

from __future__ import annotations

import io
import struct
from typing import Literal

import olefile

from shared.domain.errors import CorruptDocumentError, EncryptedDocumentError, PermanentError, UnsupportedTypeError
from shared.domain.formats import ENCRYPTED_MESSAGE

__all__ = ["OLE_MAGIC", "OleKind", "classify_ole", "is_ole", "refusal"]

OleKind = Literal["doc", "xls", "ppt", "msg", "encrypted_ooxml", "encrypted", "unknown_ole"]
_Base = Literal["doc", "xls", "ppt", "msg", "encrypted_ooxml", "unknown_ole"]

OLE_MAGIC = bytes.fromhex("D0CF11E0A1B11AE1")
_HEAD = 8192  # bytes read from the start of a stream, at most
_WORD_IDENTS = (0xA5EC, 0xA5DC)  # Word 97+ / Word 6-95 FIB wIdent
_FIB_ENCRYPTED = 0x0100
_XLS_FILEPASS, _XLS_EOF, _XLS_BOFS = 0x002F, 0x000A, (0x0809, 0x0409, 0x0209, 0x0009)
_PPT_ENCRYPTED_TOKEN = 0xF3D1C4DF
_XLS_MAX_RECORDS = 64
# olefile raises these on a malformed container (OSError for its own checks)
_OLE_ERRORS = (OSError, ValueError, IndexError, KeyError, TypeError, struct.error, RecursionError)

# kind -> (what it is, with its article; its extension)
_WHAT = {
    "doc": ("a Word 97-2003 document", ".doc"),
    "xls": ("an Excel 97-2003 workbook", ".xls"),
    "ppt": ("a PowerPoint 97-2003 presentation", ".ppt"),
}


def is_ole(data: bytes) -> bool:
    """True when ``data`` starts with the compound-file signature."""
    return data[:8] == OLE_MAGIC


def classify_ole(data: bytes) -> OleKind:
    """The kind of the OLE compound file ``data`` (see the module table).

    Raises CorruptDocumentError when ``data`` is not a compound file or its directory is unreadable.
    """
    base, encrypted = _inspect(data)
    return "encrypted" if encrypted else base


def refusal(data: bytes) -> PermanentError | None:
    """The error to raise for the OLE file ``data`` where a ZIP package (DOCX, XLSX...) is expected,
    or None when it is an Outlook message (the caller says what it expected).

    EncryptedDocumentError (``encrypted``) for a password-protected file, legacy or OOXML;
    UnsupportedTypeError naming what it is and the extension to upload it with (doc/xls/ppt), or
    that it is no document type we read (unknown_ole). Raises CorruptDocumentError as
    ``classify_ole`` does.
    """
    base, encrypted = _inspect(data)
    if base == "msg":
        return None
    if base == "encrypted_ooxml":
        return EncryptedDocumentError(ENCRYPTED_MESSAGE)
    if base == "unknown_ole":
        return UnsupportedTypeError(
            "this OLE compound file is not a document type we read (not Word, Excel, PowerPoint or Outlook); "
            "save it as PDF, .docx, .xlsx or .pptx"
        )
    one, ext = _WHAT[base]
    if encrypted:
        return EncryptedDocumentError(f"this is {one}, password-protected: open it in Office or LibreOffice, "
                                      "remove the password and upload it again")
    return UnsupportedTypeError(f"this is {one}, not a ZIP-based Office file: upload it named {ext}")


def _inspect(data: bytes) -> tuple[_Base, bool]:
    if not is_ole(data):
        raise CorruptDocumentError("not an OLE compound file (no D0 CF 11 E0 signature)")
    try:
        # always a file object: olefile takes a short bytes argument for a file name
        ole = olefile.OleFileIO(io.BytesIO(data))
    except _OLE_ERRORS as exc:
        raise CorruptDocumentError(f"unreadable OLE compound file: {exc}") from exc
    try:
        kids = {k.name.lower(): k for k in ole.root.kids}
        base = _base_kind(kids)
        return base, _encrypted(ole, data, kids, base)
    except _OLE_ERRORS as exc:
        raise CorruptDocumentError(f"unreadable OLE compound file: {exc}") from exc
    finally:
        ole.close()


def _base_kind(kids: dict[str, olefile.OleDirectoryEntry]) -> _Base:
    if "encryptioninfo" in kids and "encryptedpackage" in kids:
        return "encrypted_ooxml"
    if "worddocument" in kids:
        return "doc"
    if "workbook" in kids or "book" in kids:
        return "xls"
    if "powerpoint document" in kids:
        return "ppt"
    if "__properties_version1.0" in kids or any(name.startswith("__substg1.0_") for name in kids):
        return "msg"
    return "unknown_ole"


def _encrypted(ole: olefile.OleFileIO, data: bytes, kids: dict[str, olefile.OleDirectoryEntry], base: _Base) -> bool:
    if base == "doc":
        return _doc_encrypted(_head(ole, data, kids["worddocument"]))
    if base == "xls":
        return _xls_encrypted(_head(ole, data, kids.get("workbook") or kids["book"]))
    if base == "ppt":
        user = kids.get("current user")
        return "encryptedsummary" in kids or (user is not None and _ppt_encrypted(_head(ole, data, user)))
    return False


def _doc_encrypted(fib: bytes) -> bool:
    if len(fib) < 12:
        return False
    ident, flags = struct.unpack_from("<H", fib, 0)[0], struct.unpack_from("<H", fib, 10)[0]
    return ident in _WORD_IDENTS and bool(flags & _FIB_ENCRYPTED)


def _xls_encrypted(stream: bytes) -> bool:
    """FILEPASS among the first records of the globals substream (after BOF, before its EOF)."""
    pos = 0
    for i in range(_XLS_MAX_RECORDS):
        if pos + 4 > len(stream):
            return False
        rtype, rlen = struct.unpack_from("<HH", stream, pos)
        if (i == 0 and rtype not in _XLS_BOFS) or rtype == _XLS_EOF:
            return False
        if rtype == _XLS_FILEPASS:
            return True
        pos += 4 + rlen
    return False


def _ppt_encrypted(current_user: bytes) -> bool:
    """CurrentUserAtom: an 8-byte record header, ``size``, then ``headerToken`` at offset 12."""
    return len(current_user) >= 16 and struct.unpack_from("<I", current_user, 12)[0] == _PPT_ENCRYPTED_TOKEN


def _head(ole: olefile.OleFileIO, data: bytes, entry: olefile.OleDirectoryEntry) -> bytes:
    """The first ``_HEAD`` bytes of a root stream, following at most that many bytes of its chain."""
    want = min(int(entry.size), _HEAD)
    if entry.size < ole.minisectorcutoff:
        return bytes(ole.openstream(entry.name).read(want))
    size = int(ole.sectorsize)
    out = bytearray()
    sect = int(entry.isectStart)
    while len(out) < want:
        start = (sect + 1) * size
        if sect >= len(ole.fat) or start >= len(data):
            raise CorruptDocumentError(f"OLE stream {entry.name!r} points past the end of the file")
        out += data[start : start + size]
        sect = int(ole.fat[sect])
    return bytes(out[:want])
