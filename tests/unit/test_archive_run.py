"""An archive document's run through the handler (``task_service.indexing.archive``), over fakes:
members stored and created in the one fenced expansion, skipped members warned, a bomb refused
whole with nothing stored or created, a fenced-out run leaving no object and no document."""

from __future__ import annotations

import hashlib
import io
import warnings
import zipfile

from shared.domain.records import ArchiveCommit, ArchiveExpanded, Claim, NewContent
from shared.domain.states import DocumentStatus, TaskStatus
from task_service.indexing.archive import is_archive, member_key
from tests.fakes import FakeObjectStore
from tests.unit.test_indexing import World


def _zip(files: dict[str, bytes], *, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def _world(data: bytes, name: str = "pack.zip") -> World:
    w = World(objects=FakeObjectStore({"arc": data}))
    w.store.documents[w.msg.document_id].content = NewContent(name, "application/zip", len(data), "ff" * 32, "arc")
    return w


def _members(w: World) -> list[tuple[str, str | None, DocumentStatus]]:
    return [(d.content.filename, d.origin_member, d.status) for d in w.store.documents.values()
            if d.origin_document_id == w.msg.document_id]


def test_archive_kinds_are_expanded_and_others_read() -> None:
    assert is_archive("a.zip") and is_archive("a.tar") and is_archive("b.tgz") and is_archive("c.tar.gz")
    assert not is_archive("a.docx") and not is_archive("a.txt")


async def test_an_archive_becomes_one_document_per_accepted_member() -> None:
    w = _world(_zip({"docs/a.txt": b"alpha text", "b.md": b"# bravo", "tool.exe": b"MZ", "dir/": b"",
                     "inner.zip": _zip({"x.txt": b"x"})}))
    await w.handle()

    assert _members(w) == [("docs/a.txt", "docs/a.txt", DocumentStatus.INDEXING),
                           ("b.md", "b.md", DocumentStatus.INDEXING)]
    archive = w.store.documents[w.msg.document_id]
    assert archive.status is DocumentStatus.INDEXED and archive.chunks == []
    assert archive.warnings == ["tool.exe: not indexed (.exe is not a supported type)",
                                "inner.zip: not indexed (an archive inside an archive is not expanded)"]
    assert w.store.tasks[w.msg.task_id].status is TaskStatus.SUCCESS
    assert w.objects.objects[member_key(w.msg.kb_id, _claim(w), 0)] == b"alpha text"
    assert len(w.store.outbox) == 2 and w.extractor.calls == 0 and w.embedder.calls == 0


def _claim(w: World) -> Claim:
    t = w.store.tasks[w.msg.task_id]
    return Claim(t.id, t.generation, t.attempt)


async def test_a_zip_bomb_is_refused_whole_before_inflating() -> None:
    bomb = _zip({"a.txt": b"ok", "big.txt": b"\0" * (20 * 1024 * 1024)})  # ratio ~1000
    w = _world(bomb)
    await w.handle()

    task = w.store.tasks[w.msg.task_id]
    assert (task.status, task.error_code) == (TaskStatus.FAILED, "parse_limit")
    assert "ZIP_MAX_INFLATE_RATIO" in (task.error_message or "") and "big.txt" in (task.error_message or "")
    assert _members(w) == [] and set(w.objects.objects) == {"arc"}  # nothing stored, nothing created


async def test_a_run_fenced_out_at_the_expansion_creates_nothing_and_removes_its_objects() -> None:
    w = _world(_zip({"a.txt": b"alpha", "b.txt": b"bravo"}))
    real = w.store.expand_archive

    async def superseded(commit: ArchiveCommit) -> ArchiveExpanded | None:
        w.store.tasks[w.msg.task_id].attempt += 1  # another delivery claimed the task meanwhile
        return await real(commit)

    w.store.expand_archive = superseded  # type: ignore[method-assign]
    await w.handle()

    assert _members(w) == [] and set(w.objects.objects) == {"arc"}
    assert w.store.tasks[w.msg.task_id].status is TaskStatus.RUNNING  # the newer claim's to finish


async def test_a_path_twice_and_a_member_the_kb_holds_are_reported() -> None:
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w") as z:
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name it writes
        z.writestr("a.txt", b"alpha")
        z.writestr("a.txt", b"alpha again")  # a second entry of the same path
        z.writestr("b.txt", b"bravo")
    w = _world(buf.getvalue())
    held = w.store.add_document(kb_id=w.msg.kb_id)  # a document of the KB with b.txt's bytes
    w.store.documents[held.document_id].content = NewContent("old.txt", "text/plain", 5,
                                                             hashlib.sha256(b"bravo").hexdigest(), "old")
    await w.handle()

    assert [m[0] for m in _members(w)] == ["a.txt"]
    assert w.store.documents[w.msg.document_id].warnings == [
        "a.txt: not indexed (the archive holds this path twice; the first is indexed)",
        f"b.txt: not created (same content as document {held.document_id})"]
    assert member_key(w.msg.kb_id, _claim(w), 1) not in w.objects.objects  # b.txt's object removed
