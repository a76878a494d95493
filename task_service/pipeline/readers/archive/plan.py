"""Which members of an archive become documents, decided before inflating (pure: bytes in).

:func:`plan` reads only the directory: a ZIP's central directory (``zipfile``: names, flags and
declared sizes, nothing inflated), a tar's headers (``tarfile``; for ``.tar.gz`` the gzip stream is
inflated once, at most ``max_total_bytes`` plus the headers, and refused past that or past
``max_ratio``). A member is **accepted** when its name's extension is an accepted format's of the
registry (``shared.domain.formats``) other than an archive; the others are **skipped** with a reason
(another type, a directory entry is silent, a link or device, an encrypted ZIP entry, an archive
inside the archive, an unsafe path). The whole archive is **refused** (``ParseLimitError``,
all-or-nothing) when it has more than ``max_members`` entries, when the accepted members declare more
than ``max_total_bytes`` together or one more than ``max_member_bytes``, or when a ZIP member's
declared ratio exceeds ``max_ratio`` above ``RATIO_GRACE_BYTES`` (the ZIP-bomb rule of
``limits.check_zip_limits``, from Apache POI's ``ZipSecureFile``).

:func:`members` then yields each accepted member's bytes, read with ``open(name).read(size + 1)``:
a member that inflates past its declared size is corrupt, never a bomb (PITFALLS: ``ZipFile.read``
of a lying entry inflates up to 1 GiB before its CRC check fails).

Member paths: ``\\`` → ``/``, leading ``/`` and ``./`` dropped; a path with a ``..`` part is skipped
("unsafe path"). The path is the member document's file name.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from shared.domain import formats
from shared.domain.errors import CorruptDocumentError, ParseLimitError

__all__ = ["ArchiveLimits", "Member", "Plan", "Skipped", "members", "plan"]

MIB = 1024 * 1024
RATIO_GRACE_BYTES = 100 * 1024
ARCHIVE_KINDS = frozenset({"zip", "tar"})
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class ArchiveLimits:
    """Bounds of one archive's expansion (settings ``ARCHIVE_MAX_*``; sizes in bytes)."""

    max_members: int = 1_000
    max_member_bytes: int = 100 * MIB
    max_total_bytes: int = 200 * MIB
    max_ratio: float = 100.0


@dataclass(frozen=True, slots=True)
class Member:
    """An accepted member: its path (the document's file name), declared size, format kind."""

    path: str
    size: int
    kind: str


@dataclass(frozen=True, slots=True)
class Skipped:
    """A member that does not become a document, and why (reported on the archive document)."""

    path: str
    reason: str


@dataclass(frozen=True)
class Plan:
    """What an archive expands to: ``container`` is ``zip`` or ``tar``."""

    container: str
    accepted: tuple[Member, ...]
    skipped: tuple[Skipped, ...]

    def warnings(self) -> tuple[str, ...]:
        """One sentence per skipped member, for the archive document."""
        return tuple(f"{s.path}: not indexed ({s.reason})" for s in self.skipped)


def plan(data: bytes, limits: ArchiveLimits) -> Plan:
    """The plan of the ZIP or tar (optionally gzip-compressed) archive ``data``.

    Raises ``ParseLimitError`` (refused whole: module docstring), ``CorruptDocumentError`` (not a
    readable archive).
    """
    if data.startswith(b"PK"):
        return _plan_zip(data, limits)
    tar = _tar_bytes(data, limits)
    try:
        return _plan_tar(tar, limits)
    except CorruptDocumentError:
        if tar is data:
            raise
        raise CorruptDocumentError("the gzip stream holds no tar archive (one compressed file is not read: "
                                   "decompress it and upload the file itself)") from None


def members(data: bytes, chosen: Plan, limits: ArchiveLimits) -> Iterator[tuple[Member, bytes]]:
    """Each accepted member of ``chosen`` with its bytes, in archive order.

    Raises ``CorruptDocumentError`` when a member inflates to more or fewer bytes than it declared
    (or fails its CRC), ``ParseLimitError`` as :func:`plan` for a ``.tar.gz``.
    """
    if chosen.container == "zip":
        yield from _zip_members(data, chosen)
    else:
        yield from _tar_members(_tar_bytes(data, limits), chosen)


def safe_path(name: str) -> str | None:
    """The member path as a document name, or None when it is unsafe (``..``) or empty."""
    path = name.replace("\\", "/").lstrip("/")
    while path.startswith("./"):
        path = path[2:]
    parts = PurePosixPath(path).parts
    return None if not parts or ".." in parts else "/".join(parts)


def _classify(name: str, size: int, limits: ArchiveLimits) -> Member | Skipped:
    path = safe_path(name)
    if path is None:
        return Skipped(name, "unsafe path")
    fmt = formats.by_extension(formats.extension(path))
    if fmt is None or not fmt.accepted:
        ext = formats.extension(path)
        return Skipped(path, fmt.refusal if fmt is not None and fmt.refusal else
                       f".{ext} is not a supported type" if ext else "no extension")
    if fmt.kind in ARCHIVE_KINDS:
        return Skipped(path, "an archive inside an archive is not expanded")
    if size > limits.max_member_bytes:
        raise ParseLimitError(f"archive member {path!r} declares {size:,} bytes; the limit is "
                              f"{limits.max_member_bytes:,} (ARCHIVE_MAX_MEMBER_MB)")
    return Member(path, size, fmt.kind)


def _finish(container: str, entries: list[Member | Skipped], limits: ArchiveLimits) -> Plan:
    entries = _first_of_each_path(entries)
    accepted = tuple(e for e in entries if isinstance(e, Member))
    total = sum(m.size for m in accepted)
    if total > limits.max_total_bytes:
        raise ParseLimitError(f"archive members declare {total:,} bytes together; the limit is "
                              f"{limits.max_total_bytes:,} (ARCHIVE_MAX_TOTAL_MB)")
    return Plan(container, accepted, tuple(e for e in entries if isinstance(e, Skipped)))


def _first_of_each_path(entries: list[Member | Skipped]) -> list[Member | Skipped]:
    """A path accepted twice (a ZIP may list a name twice, a tar append a newer copy) is one
    document: the first entry; the later ones are skipped."""
    seen: set[str] = set()
    out: list[Member | Skipped] = []
    for e in entries:
        if isinstance(e, Member) and e.path in seen:
            out.append(Skipped(e.path, "the archive holds this path twice; the first is indexed"))
            continue
        seen.add(e.path)
        out.append(e)
    return out


def _count(n: int, limits: ArchiveLimits) -> None:
    if n > limits.max_members:
        raise ParseLimitError(f"archive has more than {limits.max_members:,} entries (ARCHIVE_MAX_MEMBERS)")


def _plan_zip(data: bytes, limits: ArchiveLimits) -> Plan:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise CorruptDocumentError(f"ZIP archive cannot be read: {exc}") from exc
    _count(len(infos), limits)
    entries: list[Member | Skipped] = []
    for info in infos:
        if info.is_dir():
            continue
        if info.file_size > RATIO_GRACE_BYTES and info.file_size > limits.max_ratio * max(info.compress_size, 1):
            raise ParseLimitError(f"archive member {info.filename!r} would inflate {info.compress_size:,} → "
                                  f"{info.file_size:,} bytes, over the ratio {limits.max_ratio:g} "
                                  "(ZIP_MAX_INFLATE_RATIO)")
        if info.flag_bits & 0x1:
            entries.append(Skipped(safe_path(info.filename) or info.filename, "encrypted ZIP entry"))
            continue
        entries.append(_classify(info.filename, info.file_size, limits))
    return _finish("zip", entries, limits)


def _zip_members(data: bytes, chosen: Plan) -> Iterator[tuple[Member, bytes]]:
    wanted = {m.path: m for m in chosen.accepted}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                member = wanted.pop(safe_path(info.filename) or "", None)  # pop: a path's first entry only
                if member is None or info.is_dir():
                    continue
                with archive.open(info) as stream:
                    body = stream.read(member.size + 1)
                if len(body) != member.size:
                    raise CorruptDocumentError(f"archive member {member.path!r} is not the {member.size:,} bytes "
                                               "it declares")
                yield member, body
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as exc:
        raise CorruptDocumentError(f"ZIP archive cannot be read: {exc}") from exc


def _tar_bytes(data: bytes, limits: ArchiveLimits) -> bytes:
    """The tar stream: ``data`` itself, or ``data`` gunzipped within the limits (module docstring).
    A gzip stream has no directory: inflation stops at the first byte past the total cap or past
    ``max_ratio`` x the compressed size (above ``RATIO_GRACE_BYTES``), whichever comes first."""
    if not data.startswith(_GZIP_MAGIC):
        return data
    cap = limits.max_total_bytes + 512 * (2 * limits.max_members + 2)  # members + their headers
    ratio_cap = max(RATIO_GRACE_BYTES, int(limits.max_ratio * len(data)))
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, min(cap, ratio_cap) + 1)
    except zlib.error as exc:
        raise CorruptDocumentError(f"gzip stream cannot be read: {exc}") from exc
    if len(out) > ratio_cap:
        raise ParseLimitError(f"the .tar.gz inflates {len(data):,} → more than {ratio_cap:,} bytes, over the ratio "
                              f"{limits.max_ratio:g} (ZIP_MAX_INFLATE_RATIO)")
    if len(out) > cap or inflater.unconsumed_tail:
        raise ParseLimitError(f"the .tar.gz inflates past {cap:,} bytes (ARCHIVE_MAX_TOTAL_MB)")
    return out


def _plan_tar(data: bytes, limits: ArchiveLimits) -> Plan:
    entries: list[Member | Skipped] = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for n, info in enumerate(archive, start=1):
                _count(n, limits)
                if info.isdir():
                    continue
                if not info.isreg():
                    entries.append(Skipped(safe_path(info.name) or info.name, "not a regular file (link or device)"))
                    continue
                entries.append(_classify(info.name, info.size, limits))
    except (tarfile.TarError, OSError, ValueError, EOFError) as exc:
        raise CorruptDocumentError(f"tar archive cannot be read: {exc}") from exc
    return _finish("tar", entries, limits)


def _tar_members(data: bytes, chosen: Plan) -> Iterator[tuple[Member, bytes]]:
    wanted = {m.path: m for m in chosen.accepted}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for info in archive:
                member = wanted.pop(safe_path(info.name) or "", None) if info.isreg() else None
                stream = archive.extractfile(info) if member is not None and info.isreg() else None
                if member is None or stream is None:
                    continue
                body = stream.read(member.size + 1)
                if len(body) != member.size:
                    raise CorruptDocumentError(f"archive member {member.path!r} is truncated")
                yield member, body
    except (tarfile.TarError, OSError, ValueError, EOFError) as exc:
        raise CorruptDocumentError(f"tar archive cannot be read: {exc}") from exc
