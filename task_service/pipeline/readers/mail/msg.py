"""Outlook ``.msg`` (MS-OXMSG over a Compound File, MS-CFB) → blocks (pure; olefile + our property reader).

The compound file is opened by ``olefile``; the properties are read here (MS-OXMSG 2.1):
string properties from ``__substg1.0_XXXX001F`` (UTF-16 LE) or ``…001E`` (8-bit, in the
message's ``PR_MESSAGE_CODEPAGE`` / ``PR_INTERNET_CPID``, else detected by ``decode.py``),
binaries from ``…0102``, fixed-size ones (the date, code page, recipient type, attach method)
from the 16-byte entries of ``__properties_version1.0``.

- header block: Subject (0x0037), From = sender name (0x0C1A) and address (0x5D01/0x0C1F),
  To/Cc from the recipient storages (0x3001 name, 0x3003 address, 0x0C15 type) or the display
  lists (0x0E04, 0x0E03), Date = client submit time (0x0039), else delivery time (0x0E06);
- body: plain (0x1000) or HTML (0x1013) when richer (``mail.richer_body``), else the
  compressed RTF (0x1009) through ``rtf.read`` (its encapsulated HTML, ``rtf.encapsulated_html``,
  through the HTML walker);
- attachments (``__attach_version1.0_#…``): file data (0x3701) to ``attachments.read`` under
  its long file name (0x3707, else 0x3704, else 0x3001); an embedded message (storage
  ``__substg1.0_3701000D``) is read one level deeper; inline images (content id 0x3712 and an
  image type) are counted.

Chosen over extract-msg by measurement (``bench.parsers msg``; figures in ``bench/RESULTS.md``,
section ``parsers-msg-eml-pptx-xlsx-ods-odp``): extract-msg is faster but misses markers (it fails
on a plain-RTF-only body and keeps the plain copy when the HTML one is richer; most of our time is
that extra HTML walk), and two small dependencies (olefile, compressed-rtf) instead of extract-msg's
eleven (RTFDE, oletools, msoffcrypto-tool, cryptography, beautifulsoup4...).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import struct

from shared.domain.errors import (
    CorruptDocumentError,
    DependencyMissingError,
    ParseLimitError,
    UndecodableTextError,
)
from shared.domain.ole import OLE_MAGIC
from task_service.pipeline.decode import decode
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.mail.common import (
    Attachments,
    Collector,
    check_nesting,
    cut_header,
    header_block,
    read_file,
    read_mail_file,
    richer_body,
)
from task_service.pipeline.readers.plain import rtf

__all__ = ["TAKES_ATTACHMENTS", "read", "read_into"]

_EMBEDDED = "__substg1.0_3701000D"
_PROPS = "__properties_version1.0"
_FILETIME_EPOCH = dt.datetime(1601, 1, 1, tzinfo=dt.UTC)


#: ``read`` takes the :class:`Attachments` the dispatch hands in (``parse.attachment_reader``).
TAKES_ATTACHMENTS = True


def read(data: bytes, limits: ParseLimits, attachments: Attachments) -> ParsedDocument:
    """Return the blocks of the Outlook message in ``data`` (header block, body, attachments).

    Raises ``CorruptDocumentError`` when ``data`` is not a readable compound file,
    ``ParseLimitError`` when embedded messages nest deeper than ``limits.mail_max_nesting``,
    ``NoTextError`` when nothing is left, ``DependencyMissingError`` without olefile.
    """
    return read_file(data, limits, attachments, read_into, "the .msg message")


def read_into(data: bytes, collector: Collector) -> None:
    """Append the message in the .msg file ``data`` to ``collector`` (at its depth).

    Raises ``CorruptDocumentError`` (not a compound file), ``ParseLimitError`` (nesting bomb).
    """
    if not data.startswith(OLE_MAGIC):
        raise CorruptDocumentError("not an Outlook .msg file (no Compound File signature)")
    try:
        import olefile
    except ImportError as exc:  # pragma: no cover - a runtime dependency
        raise DependencyMissingError("olefile is not installed (the .msg reader needs it)") from exc
    try:
        ole = olefile.OleFileIO(data)
        paths = {tuple(path) for path in ole.listdir(streams=True, storages=True)}
    except RecursionError as exc:
        raise ParseLimitError("the .msg storages nest too deeply to be read: a nesting bomb") from exc
    except Exception as exc:
        raise CorruptDocumentError(f"the .msg compound file cannot be read: {exc}") from exc
    # Two storages per embedded message (attachment, then __substg1.0_3701000D).
    check_nesting(max((len(p) + 1) // 2 for p in paths) if paths else 0, collector.limits, "embedded .msg messages")
    _read_message(_Store(ole, paths, (), 32), collector)


class _Store:
    """One property storage (message, recipient, attachment) at ``prefix`` in the compound file."""

    def __init__(self, ole: object, paths: set[tuple[str, ...]], prefix: tuple[str, ...], header: int,
                 starts: dict[tuple[bool, int], str] | None = None) -> None:
        self.ole, self.paths, self.prefix = ole, paths, prefix
        self.starts = {} if starts is None else starts  # shared by the file's stores: (mini, first sector) → path
        self.fixed = self._fixed(header)
        self.codepage = self.int32(0x3FFD) or self.int32(0x3FDE)

    def stream(self, name: str) -> bytes | None:
        path = (*self.prefix, name)
        if path not in self.paths:
            return None
        try:
            self._check_alias(path)
            data: bytes = self.ole.openstream(list(path)).read()  # type: ignore[attr-defined]
        except CorruptDocumentError:
            raise
        except Exception as exc:
            raise CorruptDocumentError(f"the .msg stream {'/'.join(path)} cannot be read: {exc}") from exc
        return data

    def _check_alias(self, path: tuple[str, ...]) -> None:
        """Refuse a stream whose data another stream's directory entry names too (aliased
        streams: 200 attachments sharing one stream held the parser 85 s); real files never share."""
        entry = self.ole.direntries[self.ole._find(list(path))]  # type: ignore[attr-defined]
        if not entry.size:
            return
        key = (entry.size < self.ole.minisectorcutoff, entry.isectStart)  # type: ignore[attr-defined]
        other = self.starts.setdefault(key, "/".join(path))
        if other != "/".join(path):
            raise CorruptDocumentError(
                f"the .msg streams {other} and {'/'.join(path)} share their data (an aliased compound file)"
            )

    def children(self, start: str) -> list[str]:
        depth = len(self.prefix)
        names = {p[depth] for p in self.paths if len(p) > depth + 1 and p[:depth] == self.prefix}
        return sorted(name for name in names if name.startswith(start))

    def child(self, name: str, header: int) -> _Store:
        return _Store(self.ole, self.paths, (*self.prefix, name), header, self.starts)

    def has_storage(self, name: str) -> bool:
        return any(
            len(p) > len(self.prefix) + 1 and p[: len(self.prefix) + 1] == (*self.prefix, name) for p in self.paths
        )

    def string(self, prop: int) -> str:
        wide = self.stream(f"__substg1.0_{prop:04X}001F")
        if wide is not None:
            return wide.decode("utf-16-le", errors="replace").rstrip("\0")
        narrow = self.stream(f"__substg1.0_{prop:04X}001E")
        return "" if narrow is None else _narrow(narrow.rstrip(b"\0"), self.codepage)

    def binary(self, prop: int) -> bytes | None:
        return self.stream(f"__substg1.0_{prop:04X}0102")

    def int32(self, prop: int) -> int:
        value = self.fixed.get(prop)
        return struct.unpack_from("<i", value)[0] if value else 0

    def time(self, prop: int) -> str:
        value = self.fixed.get(prop)
        if not value:
            return ""
        ticks = struct.unpack_from("<Q", value)[0]
        try:
            return email.utils.format_datetime(_FILETIME_EPOCH + dt.timedelta(microseconds=ticks // 10))
        except (OverflowError, ValueError):
            return ""

    def _fixed(self, header: int) -> dict[int, bytes]:
        raw = self.stream(_PROPS) or b""
        props: dict[int, bytes] = {}
        for offset in range(header, len(raw) - 15, 16):
            ptype, pid = struct.unpack_from("<HH", raw, offset)
            props.setdefault(pid, raw[offset + 8 : offset + 16]) if ptype in (0x0003, 0x0040, 0x000B) else None
        return props


def _narrow(data: bytes, codepage: int) -> str:
    declared = f"cp{codepage}" if codepage and codepage not in (65001, 1200) else None
    try:
        return decode(data, declared=declared).text
    except UndecodableTextError:
        return data.decode("cp1252", errors="replace")


def _read_message(store: _Store, collector: Collector) -> None:
    fields = {
        "Subject": store.string(0x0037),
        "From": _sender(store),
        "Date": store.time(0x0039) or store.time(0x0E06),
        **_recipients(store),
    }
    block = header_block({k: cut_header(k, v, collector.limits, collector.warnings) for k, v in fields.items()})
    if block is not None:
        collector.blocks.append(block)
    collector.add(_body(store, collector))
    for name in store.children("__attach_version1.0_#"):
        _attachment(store.child(name, 8), collector)


def _sender(store: _Store) -> str:
    name = store.string(0x0C1A) or store.string(0x0042)
    address = store.string(0x5D01) or store.string(0x0C1F) or store.string(0x0065)
    if name and address and address not in name:
        return f"{name} <{address}>"
    return name or address


def _recipients(store: _Store) -> dict[str, str]:
    found: dict[str, list[str]] = {"To": [], "Cc": []}
    for name in store.children("__recip_version1.0_#"):
        recip = store.child(name, 8)
        kind = {1: "To", 2: "Cc"}.get(recip.int32(0x0C15))
        display, address = recip.string(0x3001), recip.string(0x39FE) or recip.string(0x3003)
        if kind is not None and (display or address):
            both = display and address and address not in display
            found[kind].append(f"{display} <{address}>" if both else display or address)
    return {
        "To": ", ".join(found["To"]) or store.string(0x0E04),
        "Cc": ", ".join(found["Cc"]) or store.string(0x0E03),
    }


def _body(store: _Store, collector: Collector) -> ParsedDocument:
    plain = store.string(0x1000)
    html_bytes = store.binary(0x1013)
    html = _html_text(html_bytes, store.codepage) if html_bytes else store.string(0x1013)
    if plain.strip() or html.strip():
        return richer_body(plain or None, html or None)
    compressed = store.binary(0x1009)
    return _rtf_body(compressed, collector) if compressed else ParsedDocument(())


def _rtf_body(compressed: bytes, collector: Collector) -> ParsedDocument:
    """The compressed RTF body (MS-OXRTFCP): its encapsulated HTML through the HTML walker, else the RTF
    itself through ``rtf.read``; a warning (and nothing) when it cannot be decompressed or read."""
    try:
        from compressed_rtf import decompress  # type: ignore[import-untyped]

        data = decompress(compressed)
    except ImportError as exc:  # pragma: no cover - a runtime dependency
        raise DependencyMissingError("compressed-rtf is not installed (the .msg reader needs it)") from exc
    except Exception as exc:
        collector.warnings.append(f"the RTF body cannot be decompressed: {exc}")
        return ParsedDocument(())
    try:
        html = rtf.encapsulated_html(data)
        return rtf.read(data, collector.limits) if html is None else richer_body(None, html)
    except (CorruptDocumentError, ParseLimitError) as exc:
        collector.warnings.append(f"the RTF body cannot be read: {exc}")
        return ParsedDocument(())


def _html_text(data: bytes, codepage: int) -> str:
    from task_service.pipeline.decode import sniff_html_charset

    declared = sniff_html_charset(data) or (f"cp{codepage}" if codepage and codepage != 65001 else None)
    try:
        return decode(data.rstrip(b"\0"), declared=declared).text
    except UndecodableTextError:
        return ""


def _attachment(store: _Store, collector: Collector) -> None:
    name = store.string(0x3707) or store.string(0x3704) or store.string(0x3001) or "attachment"
    if store.has_storage(_EMBEDDED):
        embedded = store.child(_EMBEDDED, 24)
        collector.nested(name, lambda child: _read_message(embedded, child))
        return
    mime = store.string(0x370E).lower()
    if store.string(0x3712) and (mime.startswith("image/") or name.lower().endswith((".png", ".jpg", ".gif"))):
        collector.inline_images += 1
        return
    data = store.binary(0x3701)
    if data is None:
        collector.not_read.append(name)
    elif not read_mail_file(collector, name, data):
        collector.attachment(name, data)
