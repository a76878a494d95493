"""Upload hardening over real processes: size limit while streaming (413, nothing left in the
bucket), type by content (415), odd file names index and display, per-user in-flight cap (429)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from minio import Minio

from knowledge_service.upload.filenames import clean_filename
from shared.settings import KnowledgeSettings
from tests.e2e.conftest import WorkerFactory
from tests.support import Api, child_env, free_port, poll, sql, start

pytestmark = pytest.mark.e2e

LIMIT = 11_000_000  # > 2 parts of 5 MiB: a rejected upload has a multipart upload in progress
PART = 5 * 1024 * 1024
CAP = 3
BOUNDARY = "e2e-upload-boundary-7d1f"


def _minio() -> Minio:
    s = KnowledgeSettings()
    return Minio(s.s3_endpoint, access_key=s.s3_access_key.get_secret_value(),
                 secret_key=s.s3_secret_key.get_secret_value(), secure=s.s3_secure)


def _objects(bucket: str, prefix: str = "") -> list[str]:
    return [str(o.object_name) for o in _minio().list_objects(bucket, prefix=prefix or None, recursive=True)]


def _pending_multipart(bucket: str, prefix: str) -> list[str]:
    """Incomplete multipart uploads under ``prefix`` (an aborted one must not linger)."""
    result = _minio()._list_multipart_uploads(bucket, prefix=prefix)
    return [str(u.object_name) for u in result.uploads]


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def strict_url(services_env: dict[str, str], log_dir: Path) -> Iterator[str]:
    """A second API process with a small upload limit and in-flight cap."""
    port = free_port()
    env = child_env({**services_env, "KS_PORT": str(port), "MAX_UPLOAD_BYTES": str(LIMIT),
                     "UPLOAD_PART_SIZE": str(PART), "MAX_IN_FLIGHT_TASKS_PER_USER": str(CAP),
                     "IN_FLIGHT_RETRY_AFTER_S": "7"})
    proc = start("api-strict-uploads", "knowledge_service", env, log_dir)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.alive(), f"strict API exited:\n{proc.tail()}"
        return _ready(url)

    poll(ready, timeout=120, interval=0.5, what="strict API ready")
    yield url
    proc.stop()


def _on(api: Api, url: str) -> Api:
    """The same user, talking to another API process."""
    return Api(url, str(api.http.headers["Authorization"]).split(" ", 1)[1])


def _multipart_head(filename: str) -> bytes:
    return (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
            "Content-Type: text/plain\r\n\r\n").encode()


def _streamed_body(filename: str, size: int, piece: int = 256 * 1024) -> Iterator[bytes]:
    """A multipart body produced piece by piece (httpx sends it chunked, without Content-Length)."""
    yield _multipart_head(filename)
    line = b"streamed upload line of plain text, never held whole by the API\n"
    block = (line * (piece // len(line) + 1))[:piece]
    sent = 0
    while sent < size:
        n = min(piece, size - sent)
        yield block[:n]
        sent += n
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


def _post_stream(api: Api, kb: int, body: Iterator[bytes], **headers: str) -> httpx.Response:
    return api.http.post(f"/api/v1/knowledge-bases/{kb}/documents", content=body,
                         headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}", **headers},
                         timeout=120)


def test_over_limit_uploads_get_413_and_leave_nothing_in_the_bucket(
    strict_url: str, make_user: Callable[[str], Api], services_env: dict[str, str]
) -> None:
    bucket = services_env["S3_BUCKET"]
    api = _on(make_user("big"), strict_url)
    kb = api.create_kb("limits")
    prefix = f"kb/{kb}/"
    total_before = len(_objects(bucket))

    # 1. Content-Length over the limit: refused from the header, before the body is read.
    big = b"x" * (LIMIT + 200_000)
    r = api.http.post(f"/api/v1/knowledge-bases/{kb}/documents", files={"file": ("big.txt", big, "text/plain")})
    assert r.status_code == 413, r.text
    assert r.json() == {"detail": f"upload exceeds the limit of {LIMIT} bytes", "error_code": "upload_too_large"}

    # 2. No Content-Length (chunked, from a generator): refused mid-stream once past the limit,
    #    after two 5 MiB parts of a multipart upload were already sent to storage.
    r = _post_stream(api, kb, _streamed_body("streamed.txt", LIMIT + 3_000_000))
    assert "content-length" not in r.request.headers and r.request.headers["transfer-encoding"] == "chunked"
    assert r.status_code == 413, r.text
    assert r.json() == {"detail": f"upload exceeds the limit of {LIMIT} bytes", "error_code": "upload_too_large"}

    # 3. A generator with an honest Content-Length over the limit: refused at once as well.
    size = LIMIT + 1_000_000
    length = len(_multipart_head("declared.txt")) + size + len(f"\r\n--{BOUNDARY}--\r\n")
    r = _post_stream(api, kb, _streamed_body("declared.txt", size), **{"Content-Length": str(length)})
    assert r.status_code == 413, r.text

    assert _objects(bucket, prefix) == []
    assert _pending_multipart(bucket, prefix) == []
    assert len(_objects(bucket)) == total_before
    assert api.http.get(f"/api/v1/knowledge-bases/{kb}/documents").json()["items"] == []

    # Just under the limit, streamed: stored whole (three multipart parts), hash and size right.
    size = LIMIT - 100_000
    data = b"".join(list(_streamed_body("fits.txt", size))[1:-1])
    r = _post_stream(api, kb, _streamed_body("fits.txt", size))
    assert r.status_code == 202, r.text
    doc = api.document(r.json()["document_id"])
    assert (doc["size_bytes"], doc["sha256"]) == (size, hashlib.sha256(data).hexdigest())
    assert doc["filename"] == "fits.txt" and doc["content_type"] == "text/plain"
    [key] = _objects(bucket, prefix)
    assert _minio().stat_object(bucket, key).size == size
    assert api.http.delete(f"/api/v1/documents/{doc['document_id']}").status_code == 204
    assert _objects(bucket, prefix) == []


def _assert_refused(r: httpx.Response, fragment: str) -> None:
    assert r.status_code == 415, r.text
    assert r.headers["content-type"] == "application/json"
    assert fragment in r.json()["detail"], r.json()
    assert r.json()["error_code"] == "unsupported_type", r.json()


def test_content_that_disagrees_with_the_name_gets_415(api: Api, services_env: dict[str, str]) -> None:
    bucket = services_env["S3_BUCKET"]
    kb = api.create_kb("types")
    url = f"/api/v1/knowledge-bases/{kb}/documents"

    def post(name: str, data: bytes) -> httpx.Response:
        return api.http.post(url, files={"file": (name, data, "application/pdf")})  # the header is not trusted

    _assert_refused(post("fake.pdf", b"Just some text that claims to be a PDF.\n" * 50), "not a PDF")
    _assert_refused(post("binary.txt", b"MZ\x90\x00\x03\x00\x00\x00\x04\x00" * 100), "binary data")
    _assert_refused(post("setup.exe", b"MZ\x90\x00"), ".exe is not allowed")
    _assert_refused(post("fake.docx", b"PK\x03\x04" + b"\x00" * 200), "not a DOCX")
    _assert_refused(post("no-extension", b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 100), "binary data")
    # Not multipart at all.
    r = api.http.post(url, content=b'{"file": "x"}', headers={"Content-Type": "application/json"})
    assert r.status_code == 415 and "multipart/form-data" in r.json()["detail"]
    r = api.http.post(url, files={"other": ("x.txt", b"x")})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "file"]
    assert _objects(bucket, f"kb/{kb}/") == []
    assert api.http.get(f"{url}").json()["items"] == []


def _pdf(text: str) -> bytes:
    """A one-page PDF whose text layer is ``text`` (Helvetica, ASCII), with a correct xref table."""
    lines = [text[i:i + 80] for i in range(0, len(text), 80)]
    ops = "BT /F1 11 Tf 50 780 Td 14 TL " + " ".join(
        "(" + ln.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ") Tj T*" for ln in lines) + " ET"
    stream = ops.encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Resources << /Font << /F1 5 0 R >> >>"
        b" /Contents 4 0 R >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


ODD_NAMES: dict[str, bytes] = {
    "报告[2023]#1 50%+.pdf": _pdf("The annual report for 2023 shows growth of fifty percent in every region. " * 4),
    "a|b?.txt": b"Pipes and question marks are fine in a name that is only metadata.\n",
    "../../etc/passwd": b"root:x:0:0:root:/root:/bin/bash\nThis is not the system password file, only text.\n",
    "l" * 296 + ".txt": b"A very long file name is capped at 255 bytes and keeps its extension.\n",
    "nul\x00inside.md": b"# Heading\n\nA NUL byte in the name is removed; the markdown still indexes.\n",
}


def test_odd_filenames_upload_index_and_display(api: Api, workers: WorkerFactory) -> None:
    kb = api.create_kb("names")
    uploaded = {name: api.upload(kb, name=name, data=data) for name, data in ODD_NAMES.items()}
    workers()
    expected_types = {"报告[2023]#1 50%+.pdf": "application/pdf", "a|b?.txt": "text/plain",
                      "../../etc/passwd": "text/plain", "l" * 296 + ".txt": "text/plain",
                      "nul\x00inside.md": "text/markdown"}
    for name, body in uploaded.items():
        doc = api.wait_terminal(body["document_id"])
        assert doc["status"] == "INDEXED", (name, doc["error_message"], doc["task"])
        assert doc["filename"] == clean_filename(name)
        assert doc["content_type"] == expected_types[name]
        assert doc["chunk_count"] > 0
    shown = {api.document(b["document_id"])["filename"] for b in uploaded.values()}
    assert shown == {"报告[2023]#1 50%+.pdf", "a|b?.txt", "../../etc/passwd", "l" * 251 + ".txt", "nulinside.md"}
    hits = api.search(kb, "annual report growth of fifty percent", top_k=1)
    assert hits[0]["filename"] == "报告[2023]#1 50%+.pdf"
    listed = api.http.get(f"/api/v1/knowledge-bases/{kb}/documents").json()["items"]
    assert {d["filename"] for d in listed} == shown


def _assert_429(r: httpx.Response) -> None:
    assert r.status_code == 429, r.text
    assert r.headers["retry-after"] == "7"
    assert "too many tasks in flight" in r.json()["detail"]


def test_in_flight_cap_answers_429_with_retry_after(
    strict_url: str, make_user: Callable[[str], Api], services_env: dict[str, str]
) -> None:
    """No worker runs: every upload stays WAITING, so the (CAP+1)th is refused."""
    dsn = services_env["DATABASE_URL"]
    api = _on(make_user("cap"), strict_url)
    kb = api.create_kb("cap")
    docs = [api.upload(kb, name=f"waiting-{i}.txt", data=f"Waiting {i} for a worker that never comes.".encode())
            for i in range(CAP)]  # distinct bytes: identical ones would be answered as duplicates
    _assert_429(api.http.post(f"/api/v1/knowledge-bases/{kb}/documents",
                              files={"file": ("one-too-many.txt", b"refused")}))
    assert len(api.http.get(f"/api/v1/knowledge-bases/{kb}/documents").json()["items"]) == CAP

    # One task ends (FAILED): a slot frees, and the next upload takes it.
    first = docs[0]
    sql(dsn, "UPDATE index_task SET status = 'FAILED', error_code = 'corrupt_document' WHERE id = $1",
        first["task_id"])
    sql(dsn, "UPDATE document_info SET status = 'FAILED' WHERE id = $1", first["document_id"])
    api.upload(kb, name="takes-the-slot.txt", data=b"Fits again.")

    # Re-arming the FAILED task would add work: retry, reindex and new content are refused too.
    _assert_429(api.http.post(f"/api/v1/tasks/{first['task_id']}/retry", json={"force": True}))
    _assert_429(api.http.post(f"/api/v1/documents/{first['document_id']}/reindex", json={"force": True}))
    _assert_429(api.http.put(f"/api/v1/documents/{first['document_id']}/content",
                             files={"file": ("v2.txt", b"new content")}))
    assert api.document(first["document_id"])["task"]["status"] == "FAILED"
    # New content is another upload to store and index: it counts toward the cap even for a task
    # already in flight (issue 11).
    _assert_429(api.http.put(f"/api/v1/documents/{docs[1]['document_id']}/content",
                             files={"file": ("v2.txt", b"v2")}))
    in_flight = sql(dsn, "SELECT count(*) AS n FROM index_task WHERE kb_id = $1"
                         " AND status IN ('WAITING','RETRYING','RUNNING')", kb)[0]["n"]
    assert in_flight == CAP
    for d in api.http.get(f"/api/v1/knowledge-bases/{kb}/documents").json()["items"]:  # leave no work behind
        assert api.http.delete(f"/api/v1/documents/{d['document_id']}").status_code == 204


def test_content_replacement_is_checked_like_an_upload(
    api: Api, services_env: dict[str, str]
) -> None:
    bucket = services_env["S3_BUCKET"]
    kb = api.create_kb("replace")
    doc = api.upload(kb, name="v1.txt", data=b"version one")
    url = f"/api/v1/documents/{doc['document_id']}/content"
    _assert_refused(api.http.put(url, files={"file": ("v2.pdf", b"not a pdf")}), "not a PDF")
    keys = _objects(bucket, f"kb/{kb}/")
    assert len(keys) == 1, "the refused replacement left nothing; the original is still there"
    r = api.http.put(url, files={"file": ("../v2", b"version two, typed by content")})
    assert r.status_code == 202, r.text
    d = api.document(doc["document_id"])
    assert (d["filename"], d["content_type"], d["index_generation"]) == ("../v2", "text/plain", 2)
    assert _objects(bucket, f"kb/{kb}/") != keys and len(_objects(bucket, f"kb/{kb}/")) == 1
    assert api.http.delete(f"/api/v1/documents/{doc['document_id']}").status_code == 204


def _schema_of(api_url: str, path: str, method: str) -> dict[str, Any]:
    op = httpx.get(f"{api_url}/openapi.json", timeout=10).json()["paths"][path][method]
    return dict(op)


def test_openapi_still_describes_the_multipart_file_field(api_url: str) -> None:
    for path, method in (("/api/v1/knowledge-bases/{kb_id}/documents", "post"),
                         ("/api/v1/documents/{document_id}/content", "put")):
        op = _schema_of(api_url, path, method)
        schema = op["requestBody"]["content"]["multipart/form-data"]["schema"]
        assert schema["required"] == ["file"] and schema["properties"]["file"]["format"] == "binary"
        assert {"413", "415", "429"} <= set(op["responses"])
