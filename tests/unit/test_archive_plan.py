"""Archive expansion plan (``readers/archive/plan.py``): decided from the directory, bomb-safe."""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile

import pytest

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from task_service.pipeline.readers.archive.plan import ArchiveLimits, Member, members, plan, safe_path

LIMITS = ArchiveLimits()


def make_zip(files: dict[str, bytes], *, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, body in files.items():
            archive.writestr(name, body)
    return out.getvalue()


def make_tar(files: dict[str, bytes], mode: str = "w") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as archive:  # type: ignore[call-overload]
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
        link = tarfile.TarInfo("docs/link.txt")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        archive.addfile(link)
    return out.getvalue()


FILES = {"docs/a.txt": b"alpha ARCHMARKA", "docs/b.md": b"# B\n\nbeta", "bin/tool.exe": b"MZ\x90\x00",
         "../escape.txt": b"x", "inner.zip": b"PK\x03\x04"}


def test_zip_plan_accepts_known_kinds_and_reports_the_rest() -> None:
    data = make_zip(FILES)
    p = plan(data, LIMITS)
    assert p.accepted == (Member("docs/a.txt", 15, "txt"), Member("docs/b.md", 9, "md"))
    reasons = {s.path: s.reason for s in p.skipped}
    assert reasons["bin/tool.exe"] == ".exe is not a supported type"
    assert reasons["../escape.txt"] == "unsafe path"
    assert "inner.zip" in reasons
    assert dict((m.path, body) for m, body in members(data, p, LIMITS)) == {
        "docs/a.txt": b"alpha ARCHMARKA", "docs/b.md": b"# B\n\nbeta"}
    assert "bin/tool.exe: not indexed (.exe is not a supported type)" in p.warnings()


@pytest.mark.parametrize("mode", ["w", "w:gz"])
def test_tar_and_tar_gz(mode: str) -> None:
    data = make_tar(FILES, mode)
    p = plan(data, LIMITS)
    assert [m.path for m in p.accepted] == ["docs/a.txt", "docs/b.md"]
    assert ("docs/link.txt", "not a regular file (link or device)") in [(s.path, s.reason) for s in p.skipped]
    assert [body for _, body in members(data, p, LIMITS)] == [b"alpha ARCHMARKA", b"# B\n\nbeta"]


def test_too_many_members_is_refused_whole() -> None:
    with pytest.raises(ParseLimitError, match="ARCHIVE_MAX_MEMBERS"):
        plan(make_zip({f"f{i}.txt": b"x" for i in range(11)}), ArchiveLimits(max_members=10))


def test_declared_sizes_over_the_total_is_refused_before_inflating() -> None:
    data = make_zip({"a.txt": b"a" * 600, "b.txt": b"b" * 600})
    with pytest.raises(ParseLimitError, match="ARCHIVE_MAX_TOTAL_MB"):
        plan(data, ArchiveLimits(max_total_bytes=1000))
    with pytest.raises(ParseLimitError, match="ARCHIVE_MAX_MEMBER_MB"):
        plan(data, ArchiveLimits(max_member_bytes=500))


def test_zip_bomb_ratio_is_refused_from_the_directory() -> None:
    with pytest.raises(ParseLimitError, match="ratio"):
        plan(make_zip({"zeros.txt": b"\0" * (20 * 1024 * 1024)}), LIMITS)


def test_tar_gz_bomb_stops_inflating_at_the_cap() -> None:
    data = make_tar({"zeros.txt": b"0" * (3 * 1024 * 1024)}, "w:gz")
    with pytest.raises(ParseLimitError):
        plan(data, ArchiveLimits(max_total_bytes=1024 * 1024, max_members=10))


def test_member_that_lies_about_its_size_is_corrupt() -> None:
    data = bytearray(make_zip({"a.txt": b"hello world"}, method=zipfile.ZIP_STORED))
    p = plan(bytes(data), LIMITS)
    lying = Member("a.txt", 5, "txt")
    with pytest.raises(CorruptDocumentError):
        list(members(bytes(data), type(p)(p.container, (lying,), ()), LIMITS))


def test_not_an_archive_is_corrupt() -> None:
    with pytest.raises(CorruptDocumentError):
        plan(b"PK\x03\x04 not really", LIMITS)
    with pytest.raises(CorruptDocumentError):
        plan(b"\x1f\x8b\x08 broken gzip", LIMITS)


@pytest.mark.parametrize(("name", "path"), [("/abs/x.txt", "abs/x.txt"), ("./a/./b.txt", "a/b.txt"),
                                            ("a\\b.txt", "a/b.txt"), ("a/../b.txt", None), ("", None)])
def test_safe_path(name: str, path: str | None) -> None:
    assert safe_path(name) == path


def test_a_path_held_twice_is_one_member_the_first_entry() -> None:
    """A tar appends a newer copy under the same name (``tar -r``); a ZIP may list a name twice."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for body in (b"first copy", b"second, longer copy"):
            info = tarfile.TarInfo("notes/a.txt")
            info.size = len(body)
            t.addfile(info, io.BytesIO(body))
    data = buf.getvalue()
    chosen = plan(data, LIMITS)
    assert [m.path for m in chosen.accepted] == ["notes/a.txt"]
    assert chosen.warnings() == ("notes/a.txt: not indexed (the archive holds this path twice; the first is indexed)",)
    assert [body for _, body in members(data, chosen, LIMITS)] == [b"first copy"]


def test_a_gzip_of_one_file_is_named_for_what_it_is() -> None:
    with pytest.raises(CorruptDocumentError, match="gzip stream holds no tar archive"):
        plan(gzip.compress(b"a plain log line\n" * 50), LIMITS)
