"""Archives end to end (issue 29 item 3): a ``.zip`` and a ``.tar.gz`` made here, each holding a
PDF, a DOCX and a TXT with their own markers and a member of a refused kind, become one document
per accepted member (named by its path, its origin the archive), each INDEXED and found in the top
5 of a default search; the refused member is named on the archive. A ZIP bomb is refused whole
with a clear error, and nothing of it is created."""

from __future__ import annotations

import io
import signal
import tarfile
import zipfile
from typing import Any

from tests.e2e.conftest import WorkerFactory
from tests.fidelity.mail_corpus import docx_bytes
from tests.support import FAST, Api, poll, skips, sql, wait_stopped
from tests.support.pdfgen import pdf_pages, text_page


def _files(tag: str) -> dict[str, bytes]:
    """Member path → bytes; the markers are ``{tag}PDFMARK`` etc., one word each."""
    return {
        "reports/q3.pdf": pdf_pages([text_page(f"The quarterly ledger names {tag}pdfmark as the auditor")]),
        "reports/memo.docx": docx_bytes(f"The memo assigns {tag}docxmark to the harbour survey"),
        "notes/readme.txt": f"Plain notes: the spare key sits with {tag}txtmark at the gate.\n".encode(),
        "bin/tool.exe": b"MZ\x90\x00" + bytes(64),
    }


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def _tar_gz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _members(api: Api, kb: int, archive_id: int) -> list[dict[str, Any]]:
    r = api.http.get(f"/api/v1/knowledge-bases/{kb}/documents", params={"origin": archive_id})
    assert r.status_code == 200, r.text
    return list(r.json()["items"])


def test_a_zip_and_a_tar_gz_become_one_document_per_member(api: Api, workers: WorkerFactory) -> None:
    workers()
    uploads = {"pack.zip": (_zip(_files("zipa")), "zipa"), "pack.tar.gz": (_tar_gz(_files("tgzb")), "tgzb")}
    started = {name: (kb := api.create_kb(name), api.upload(kb, name=name, data=data)["document_id"], tag)
               for name, (data, tag) in uploads.items()}
    for name, (kb, archive_id, tag) in started.items():
        archive = api.wait_terminal(archive_id)
        assert archive["status"] == "INDEXED", (name, archive)
        assert archive["chunk_count"] == 0 and archive["members"] == 3 and archive["origin"] is None
        assert "bin/tool.exe: not indexed (.exe is not a supported type)" in archive["warnings"], archive
        members = poll(lambda kb=kb, a=archive_id: ((m := _members(api, kb, a)) and len(m) == 3 and m) or None,
                       timeout=60, interval=0.5, what=f"{name} members")
        assert sorted(m["filename"] for m in members) == ["notes/readme.txt", "reports/memo.docx", "reports/q3.pdf"]
        for m in members:
            doc = api.wait_terminal(m["document_id"])
            assert doc["status"] == "INDEXED", (name, doc)
            assert doc["origin"] == {"document_id": archive_id, "filename": name}
        for kind, query in (("pdf", "quarterly ledger auditor"), ("docx", "memo harbour survey"),
                            ("txt", "spare key gate")):
            marker = f"{tag}{kind}mark"
            hits = api.search(kb, f"{query} {marker}", top_k=5)
            assert any(marker in h["content"] for h in hits), (name, marker, [h["content"][:80] for h in hits])


def test_a_zip_bomb_is_refused_whole_and_creates_nothing(api: Api, workers: WorkerFactory) -> None:
    workers()
    kb = api.create_kb("bomb")
    bomb = _zip({"a.txt": b"fine text", "huge.txt": b"\0" * (50 * 1024 * 1024)})  # ~50 KiB → 50 MiB
    archive_id = api.upload(kb, name="bomb.zip", data=bomb)["document_id"]
    doc = api.wait_terminal(archive_id)
    assert doc["status"] == "FAILED", doc
    assert doc["task"]["error_code"] == "parse_limit", doc
    assert "huge.txt" in doc["error_message"] and "ZIP_MAX_INFLATE_RATIO" in doc["error_message"], doc
    assert doc["members"] == 0 and _members(api, kb, archive_id) == []
    listed = api.http.get(f"/api/v1/knowledge-bases/{kb}/documents").json()
    assert [d["document_id"] for d in listed["items"]] == [archive_id]


def _origin_rows(dsn: str, archive_id: int) -> list[dict[str, Any]]:
    return sql(dsn, "SELECT d.origin_member, count(t.id) AS tasks FROM document_info d"
                    " JOIN index_task t ON t.document_id = d.id WHERE d.origin_document_id = $1"
                    " GROUP BY d.origin_member ORDER BY d.origin_member", archive_id)


def test_sigkill_after_the_expansion_commit_creates_no_member_twice(
    api: Api, workers: WorkerFactory, services_env: dict[str, str],
) -> None:
    """The worker dies after the expansion committed, before the ack: the redelivery goes to
    another worker, which skips it (the task is SUCCESS); each member exists once and is indexed."""
    dsn = services_env["DATABASE_URL"]
    a = workers(rag_fault_points="after_commit=stop", **FAST)
    kb = api.create_kb("crash-after")
    archive_id = api.upload(kb, name="after.zip", data=_zip(_files("aftc")))["document_id"]
    wait_stopped(a)
    expected = [{"origin_member": p, "tasks": 1} for p in ("notes/readme.txt", "reports/memo.docx", "reports/q3.pdf")]
    assert _origin_rows(dsn, archive_id) == expected
    a.kill(signal.SIGKILL)
    workers(**FAST)
    poll(lambda: "not_runnable" in skips(dsn, archive_id), timeout=90, what="archive redelivery skipped")
    for m in _members(api, kb, archive_id):
        assert api.wait_terminal(m["document_id"])["status"] == "INDEXED"
    assert _origin_rows(dsn, archive_id) == expected
    assert api.document(archive_id)["members"] == 3


def test_sigkill_inside_the_expansion_leaves_nothing_and_the_redelivery_creates_all(
    api: Api, workers: WorkerFactory, services_env: dict[str, str],
) -> None:
    """The worker dies inside the expansion's transaction (after its first member's rows): nothing
    of it is committed; the redelivery plans again and creates every member once."""
    dsn = services_env["DATABASE_URL"]
    a = workers(rag_fault_points="in_expand=stop", **FAST)
    kb = api.create_kb("crash-inside")
    archive_id = api.upload(kb, name="inside.tar.gz", data=_tar_gz(_files("insd")))["document_id"]
    wait_stopped(a)
    assert _origin_rows(dsn, archive_id) == []  # the transaction is open, nothing visible
    a.kill(signal.SIGKILL)
    workers(**FAST)
    archive = api.wait_terminal(archive_id)
    assert archive["status"] == "INDEXED" and archive["members"] == 3, archive
    assert [r["tasks"] for r in _origin_rows(dsn, archive_id)] == [1, 1, 1]
    for m in _members(api, kb, archive_id):
        assert api.wait_terminal(m["document_id"])["status"] == "INDEXED"
