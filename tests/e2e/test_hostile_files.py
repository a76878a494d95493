"""Hostile uploads end FAILED (or INDEXED by their reader's rule) and the worker keeps going: a DOCX bomb (refused by
the ZIP pre-check inside the parser, before unstructured sees it) and a PDF whose Flate stream
inflates to 1.5 GiB (PDFium aborts in the sandbox child at its 2 GiB address-space limit; the
child is replaced) are followed by a normal text file, which is indexed by the same worker. The
small files of issue 28 (``tests.support.hostile``) each end by their reader's own rule within a
10 s CPU limit, and the worker indexes the next document."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.conftest import WorkerFactory
from tests.integration.test_sandbox import docx_bomb, huge_flate_pdf
from tests.support import Api, hostile, poll

pytestmark = pytest.mark.e2e

TEXT = ("A normal document uploaded right after the hostile ones is indexed as usual. " * 20 + "\n\n") * 3


def _sandbox_children(pid: int) -> set[int]:
    """Pids of the parse-sandbox children of process ``pid`` (from /proc)."""
    found: set[int] = set()
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in children.read_text().split():
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"task_service.pipeline.sandbox" in cmdline:
                found.add(int(child))
    return found


def test_docx_bomb_and_huge_flate_pdf_fail_and_the_next_document_is_indexed(
    api: Api, workers: WorkerFactory
) -> None:
    worker = workers()
    first_children = poll(lambda: _sandbox_children(worker.pid), timeout=60, what="parse sandbox child")
    bomb, flate = docx_bomb(), huge_flate_pdf()
    assert len(bomb) < 1024 * 1024 and len(flate) < 2 * 1024 * 1024  # small uploads, huge when inflated

    kb = api.create_kb("hostile")
    t0 = time.monotonic()
    up_bomb = api.upload(kb, name="bomb.docx", data=bomb)
    up_flate = api.upload(kb, name="flate.pdf", data=flate)
    up_normal = api.upload(kb, name="normal.txt", data=TEXT.encode())

    d_bomb = api.wait_terminal(up_bomb["document_id"], timeout=300)
    d_flate = api.wait_terminal(up_flate["document_id"], timeout=300)
    d_normal = api.wait_terminal(up_normal["document_id"], timeout=300)
    print(f"\n[hostile files] all three terminal after {time.monotonic() - t0:.1f} s")

    assert d_bomb["status"] == "FAILED" and d_bomb["task"]["status"] == "FAILED", d_bomb
    assert d_bomb["task"]["error_code"] == "parse_limit"
    assert "ZIP_MAX_INFLATE_RATIO" in d_bomb["task"]["error_message"], d_bomb["task"]

    assert d_flate["status"] == "FAILED" and d_flate["task"]["status"] == "FAILED", d_flate
    assert d_flate["task"]["error_code"] == "parse_limit"
    assert "memory limit of 2 GiB" in d_flate["task"]["error_message"], d_flate["task"]

    assert d_normal["status"] == "INDEXED", d_normal
    assert d_normal["task"]["status"] == "SUCCESS" and d_normal["chunk_count"] > 0
    assert "indexed as usual" in api.chunks(up_normal["document_id"])[0]["content"]

    # Deliveries need not run in upload order (a delivery whose document lock is held goes through
    # the delay queue), so one more normal file, uploaded once both hostile ones have FAILED, is
    # certainly handled after the crash, by the replacement child.
    after = api.upload(kb, name="after.txt", data=TEXT.replace("right after", "after").encode())
    d_after = api.wait_terminal(after["document_id"], timeout=300)
    assert d_after["status"] == "INDEXED" and d_after["chunk_count"] > 0, d_after

    # The worker itself never died: same process, still consuming; its parser child was replaced.
    assert worker.alive(), worker.tail()
    assert "parse sandbox child replaced" in worker.log.read_text(errors="replace")
    children = _sandbox_children(worker.pid)
    assert len(children) == 1 and children.isdisjoint(first_children), (first_children, children)
    for d in (d_bomb, d_flate):
        assert d["task"]["attempt"] == 1  # failed once, for good: no redelivery loop


def _small_hostile_files() -> dict[str, tuple[bytes, str, str]]:
    """name → (bytes, the outcome: an error code or INDEXED, a fragment of its message or of a
    warning) for the small files of issue 28 that held the parser child for minutes."""
    return {
        "paths.json": (hostile.json_key_paths(), "parse_limit", "PARSE_MAX_TEXT_CHARS"),
        "digits.json": (hostile.json_huge_integer(), "parse_limit", "4,300 digits"),
        "wide.csv": (hostile.csv_wide_headers(), "parse_limit", "PARSE_MAX_TEXT_CHARS"),
        "spine.epub": (hostile.epub_repeated_spine(), "INDEXED", "19,999 spine entries"),
        "slides.pptx": (hostile.pptx_repeated_slide(), "INDEXED", "29,999 slide ids"),
        "sheets.xlsx": (hostile.xlsx_repeated_sheet(), "INDEXED", "1,999 sheets"),
        "aliased.msg": (hostile.msg_aliased_attachments(), "corrupt_document", "share their data"),
        "reopened.html": (hostile.html_reopened_formatting(), "parse_limit", "formatting elements re-opened"),
        "huge-pages.pdf": (hostile.pdf_huge_scanned_pages(), "parse_limit", "OCR_MAX_PIXELS"),
    }


def test_small_hostile_files_end_within_10_s_of_parse_cpu_and_the_next_document_is_indexed(
    api: Api, workers: WorkerFactory
) -> None:
    """Issue 28: each ends ``parse_limit``, ``corrupt_document`` or INDEXED by its reader's own
    rule, none by the child's CPU limit (10 s here: the kernel enforces "within 10 s of parse
    CPU"), none ``internal_error``; then a normal document is indexed by the same worker."""
    worker = workers(parse_cpu_limit_s="10")
    files = _small_hostile_files()
    assert all(len(data) < 4 * 1024 * 1024 for data, _, _ in files.values())  # small uploads
    kb = api.create_kb("hostile-small")
    uploads = {name: api.upload(kb, name=name, data=data) for name, (data, _, _) in files.items()}
    for name, (_, outcome, fragment) in files.items():
        doc = api.wait_terminal(uploads[name]["document_id"], timeout=300)
        task = doc["task"]
        if outcome == "INDEXED":
            assert doc["status"] == "INDEXED" and doc["chunk_count"] > 0, (name, doc)
            assert any(fragment in warning for warning in doc["warnings"]), (name, doc)
        else:
            assert doc["status"] == "FAILED" and task["error_code"] == outcome, (name, task)
            assert fragment in task["error_message"] and "PARSE_CPU_LIMIT_S" not in task["error_message"], (name, task)
    after = api.upload(kb, name="after.txt", data=TEXT.replace("right after", "after").encode())
    d_after = api.wait_terminal(after["document_id"], timeout=300)
    assert d_after["status"] == "INDEXED" and d_after["chunk_count"] > 0, d_after
    assert worker.alive(), worker.tail()
