"""Hostile uploads end FAILED with ``parse_limit`` and the worker keeps going: a DOCX bomb (refused by
the ZIP pre-check inside the parser, before unstructured sees it) and a PDF whose Flate stream
inflates to 1.5 GiB (PDFium aborts in the sandbox child at its 2 GiB address-space limit; the
child is replaced) are followed by a normal text file, which is indexed by the same worker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.conftest import WorkerFactory
from tests.integration.test_sandbox import docx_bomb, huge_flate_pdf
from tests.support import Api, poll

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
