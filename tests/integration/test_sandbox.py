"""The parsing sandbox: hostile files end in ParseLimitError, the sandbox survives them, normal
files are extracted (parsed and chunked) exactly as in process, and a cancelled extraction kills
its child. Hostile files are generated here (no fixtures on disk).

Each limit hit replaces the child (≈4 s of warm-up on the 2-core machine), so the tests that hit
limits on purpose use their own ``SandboxedParser``.
"""

from __future__ import annotations

import io
import resource
import socket
import threading
import time
import zipfile
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

from shared.domain.errors import CorruptDocumentError, ExtractionCancelled, IndexingError, ParseLimitError
from shared.settings import WorkerSettings
from task_service.pipeline.chunk import Chunker, ChunkSettings, load_minilm_tokenizer
from task_service.pipeline.extract import Extraction, extract
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits, check_zip_limits
from task_service.pipeline.parse import parse_text
from task_service.pipeline.sandbox import (
    InProcessParser,
    ParserConfig,
    SandboxedParser,
    SandboxLimits,
    build_parser,
)
from task_service.pipeline.sandbox import child as sandbox_module
from tests.support import CORPUS, process_state
from tests.support.pdfgen import PAGE, assemble

needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")
MIB = 1024 * 1024

# ---------------------------------------------------------------- hostile file generators

_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    'officeDocument" Target="word/document.xml"/></Relationships>'
)
_DOC_HEAD = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    b"<w:body><w:p><w:r><w:t>"
)
_DOC_TAIL = b"</w:t></w:r></w:p></w:body></w:document>"


def docx(text: str) -> bytes:
    """A minimal valid DOCX with one paragraph."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELS)
        archive.writestr("word/document.xml", _DOC_HEAD + text.encode() + _DOC_TAIL)
    return buffer.getvalue()


def docx_bomb(inflated_mib: int = 300) -> bytes:
    """A valid DOCX whose word/document.xml is one run of ``inflated_mib`` MiB of "A"
    (written in 1 MiB pieces; ≈0.3 MB compressed, ≈1000:1)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELS)
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            part.write(_DOC_HEAD)
            block = b"A" * MIB
            for _ in range(inflated_mib):
                part.write(block)
            part.write(_DOC_TAIL)
    return buffer.getvalue()


def zip_of(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def flate_bomb(total: int, unit: bytes = b" " * MIB) -> bytes:
    """A zlib stream that inflates to ``total`` bytes (``unit`` repeated), built without
    compressing ``total`` bytes: after a full flush deflate restarts with an empty window, so
    the compressed form of ``unit`` is the same every time and can be repeated; then an empty
    final block and the Adler-32 of the whole (1.5 GiB: ≈0.6 s instead of ≈7 s)."""
    c = zlib.compressobj(9)
    first = c.compress(unit) + c.flush(zlib.Z_FULL_FLUSH)  # with the 2-byte zlib header
    again = c.compress(unit) + c.flush(zlib.Z_FULL_FLUSH)
    count = total // len(unit)
    adler = 1
    for _ in range(count):
        adler = zlib.adler32(unit, adler)
    return first + again * (count - 1) + b"\x03\x00" + adler.to_bytes(4, "big")


def pdf(stream: bytes, *, pages: int = 1, flate: bool = True) -> bytes:
    """A minimal PDF by hand: ``pages`` pages sharing one content stream (Helvetica as F1)."""
    kids = " ".join(f"{4 + i} 0 R" for i in range(pages))
    filt = b" /Filter /FlateDecode" if flate else b""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Length %d%s >>\nstream\n" % (len(stream), filt) + stream + b"\nendstream",
    ]
    objects += [PAGE % 3] * pages
    return assemble(objects)


def huge_flate_pdf(inflated_mib: int = 1536) -> bytes:
    """≈1.6 MB PDF whose page content stream inflates to 1.5 GiB of spaces."""
    return pdf(flate_bomb(inflated_mib * MIB))


def text_pdf(text: str, pages: int = 1) -> bytes:
    return pdf(zlib.compress(b"BT /F1 12 Tf 72 720 Td (" + text.encode() + b") Tj ET"), pages=pages)


def corpus_bytes(name: str) -> bytes:
    return (CORPUS / name).read_bytes()


def text_of(extraction: Extraction) -> str:
    """The text of a one-chunk extraction (the short documents of these tests)."""
    assert len(extraction.chunks) == 1, extraction
    return extraction.chunks[0].content


@cache
def chunker() -> Chunker:
    return Chunker(load_minilm_tokenizer())


# ---------------------------------------------------------------- generators are what they claim


def test_generators_build_valid_files() -> None:
    assert zlib.decompress(flate_bomb(4 * MIB)) == b" " * (4 * MIB)
    assert parse_text(text_pdf("Hello sandbox"), "t.pdf") == "Hello sandbox"
    assert parse_text(docx("Hello docx"), "t.docx") == "Hello docx"
    bomb = docx_bomb(300)
    assert len(bomb) < MIB
    with zipfile.ZipFile(io.BytesIO(bomb)) as archive:
        assert archive.getinfo("word/document.xml").file_size > 300 * MIB


# ---------------------------------------------------------------- structural limits (in process)


def test_docx_bomb_is_refused_before_the_reader_sees_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from task_service.pipeline.readers.office import docx as docx_reader

    def must_not_run(*a: object, **k: object) -> str:
        raise AssertionError("the bomb reached the DOCX reader")

    monkeypatch.setattr(docx_reader, "read", must_not_run)
    with pytest.raises(ParseLimitError, match="ZIP_MAX_INFLATE_RATIO") as info:
        parse_text(docx_bomb(), "bomb.docx")
    assert info.value.error_code == "parse_limit"
    assert "word/document.xml" in str(info.value)


def test_docx_with_too_many_entries() -> None:
    data = zip_of({f"word/media/{i}.xml": b"<x/>" for i in range(10_001)})
    with pytest.raises(ParseLimitError, match="10,001 entries; the limit is 10,000 \\(ZIP_MAX_ENTRIES\\)"):
        parse_text(data, "many.docx")


def test_docx_total_uncompressed_size_limit() -> None:
    import random

    rnd = random.Random(3)
    data = zip_of({f"word/media/image{i}.bin": rnd.randbytes(600_000) for i in range(2)})  # incompressible
    limits = ParseLimits(zip_max_uncompressed_bytes=MIB)
    with pytest.raises(ParseLimitError, match="ZIP_MAX_UNCOMPRESSED_MB"):
        check_zip_limits(data, limits)
    check_zip_limits(data)  # 1.2 MB is fine under the default 200 MiB


def test_docx_overall_ratio_with_many_small_entries() -> None:
    data = zip_of({f"word/part{i}.xml": b"\0" * 90_000 for i in range(60)})  # each under the grace size
    with pytest.raises(ParseLimitError, match="archive as a whole inflates"):
        check_zip_limits(data)


@needs_corpus
@pytest.mark.parametrize("name", ["simple.docx", "handbook-1p.docx", "docx-tables.docx"])
def test_real_docx_pass_the_zip_checks(name: str) -> None:
    check_zip_limits(corpus_bytes(name))


def test_not_a_zip_is_still_corrupt_not_a_limit() -> None:
    with pytest.raises(CorruptDocumentError):
        parse_text(b"not a zip at all", "broken.docx")


def test_pdf_page_limit() -> None:
    data = text_pdf("page", pages=DEFAULT_LIMITS.pdf_max_pages + 1)
    with pytest.raises(ParseLimitError, match="PDF has 2,001 pages; the limit is 2,000 \\(PDF_MAX_PAGES\\)"):
        parse_text(data, "pages.pdf")
    assert parse_text(data, "pages.pdf", ParseLimits(pdf_max_pages=5000)).count("page") == 2001


@needs_corpus
def test_pdf_text_limit() -> None:
    data = corpus_bytes("layout-parser-paper-fast.pdf")
    full = parse_text(data, "paper.pdf")
    with pytest.raises(ParseLimitError, match="PDF_MAX_TEXT_CHARS"):
        parse_text(data, "paper.pdf", ParseLimits(pdf_max_text_chars=len(full) // 2))


def test_limits_come_from_settings() -> None:
    s = WorkerSettings(parse_sandbox=False, pdf_max_pages=7, docx_max_uncompressed_mb=3, docx_max_entries=9,
                       docx_max_inflate_ratio=50, pdf_max_text_chars=11, parse_memory_limit_mb=1536,
                       parse_cpu_limit_s=5, parse_timeout_s=6, parse_start_timeout_s=7)
    parser = build_parser(ParserConfig.from_settings(s))
    assert isinstance(parser, InProcessParser)
    assert parser.limits == ParseLimits(zip_max_uncompressed_bytes=3 * MIB, zip_max_entries=9, zip_max_ratio=50.0,
                                        pdf_max_pages=7, pdf_max_text_chars=11)
    assert parser.chunker.settings == ChunkSettings(250, 32, 2000, 20_000) == ChunkSettings.from_settings(s)
    assert ChunkSettings.from_settings(WorkerSettings(chunk_max_chars=500, chunk_overlap_tokens=0)) == \
        ChunkSettings(250, 0, 500)
    assert SandboxLimits.from_settings(s) == SandboxLimits(1536 * MIB, 5, 6.0, 7.0)
    assert SandboxLimits.from_settings(s).memory_text == "1,536 MiB"
    defaults = WorkerSettings()
    assert ParseLimits.from_settings(defaults) == DEFAULT_LIMITS
    assert SandboxLimits.from_settings(defaults) == SandboxLimits()
    assert SandboxLimits().memory_text == "2 GiB"


def test_child_refuses_network_calls() -> None:
    with socket.socket() as sock:
        with pytest.raises(PermissionError, match="network access is disabled"):
            sandbox_module._refuse_network("socket.connect", (sock, ("93.184.216.34", 80)))
    with pytest.raises(PermissionError):
        sandbox_module._refuse_network("socket.getaddrinfo", ("example.com", 80))
    with socket.socket(socket.AF_UNIX) as local:
        sandbox_module._refuse_network("socket.connect", (local, "/dev/log"))  # not the network
    sandbox_module._refuse_network("open", ("/etc/hosts", "r", 0))


# ---------------------------------------------------------------- the sandbox


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxedParser]:
    parser = SandboxedParser()
    parser.start(wait_ready=True)
    yield parser
    parser.close()


@needs_corpus
@pytest.mark.parametrize(
    "name",
    ["simple.docx", "docx-tables.docx", "reliance.pdf", "korean-text-with-tables.pdf", "fake-text.txt",
     "udhr-chinese-gbk.txt", "book-war-and-peace-1225p.txt", "fake-html-cp1252.html", "eng_spa_mult.md",
     "password.pdf", "empty.txt"],
)
def test_sandbox_parses_like_in_process(sandbox: SandboxedParser, name: str) -> None:
    data = corpus_bytes(name)
    try:
        expected: Extraction | IndexingError = extract(data, name, DEFAULT_LIMITS, chunker())
    except IndexingError as exc:
        expected = exc
    if isinstance(expected, Extraction):
        assert sandbox(data, name) == expected
        return
    with pytest.raises(type(expected)) as info:
        sandbox(data, name)
    assert info.value.error_code == expected.error_code
    assert str(info.value) == str(expected)


def test_sandbox_rebuilds_errors_with_class_code_and_message(sandbox: SandboxedParser) -> None:
    from shared.domain.errors import UnsupportedTypeError

    with pytest.raises(UnsupportedTypeError, match=r"unsupported file type \(\.exe\)") as info:
        sandbox(b"MZ", "virus.exe")
    assert info.value.error_code == "unsupported_type"


def test_docx_bomb_in_the_sandbox_leaves_it_usable(sandbox: SandboxedParser) -> None:
    pid = sandbox.pid
    with pytest.raises(ParseLimitError, match="ZIP_MAX_INFLATE_RATIO"):
        sandbox(docx_bomb(), "bomb.docx")
    assert sandbox.pid == pid  # a pre-check, not a crash: same child
    assert text_of(sandbox(docx("after the bomb"), "ok.docx")) == "after the bomb"


def test_huge_flate_pdf_kills_the_child_and_a_normal_file_parses_right_after(sandbox: SandboxedParser) -> None:
    pid = sandbox.pid
    with pytest.raises(ParseLimitError, match="memory limit of 2 GiB") as info:
        sandbox(huge_flate_pdf(), "flate.pdf")
    assert info.value.error_code == "parse_limit"
    assert sandbox.pid != pid  # replaced
    assert text_of(sandbox(text_pdf("Normal after the bomb"), "normal.pdf")) == "Normal after the bomb"
    assert resource.getrlimit(resource.RLIMIT_AS) == (resource.RLIM_INFINITY, resource.RLIM_INFINITY)


def test_sandbox_reports_chunking_after_parsing_and_only_for_a_parsed_document(sandbox: SandboxedParser) -> None:
    stages: list[str] = []
    assert text_of(sandbox(b"stage reports", "s.txt", on_stage=stages.append)) == "stage reports"
    assert stages == ["CHUNKING"]
    stages.clear()
    with pytest.raises(IndexingError):
        sandbox(b"MZ", "virus.exe", on_stage=stages.append)
    assert stages == []  # refused while parsing: never reached chunking
    in_process: list[str] = []
    InProcessParser()(b"stage reports", "s.txt", on_stage=in_process.append)
    assert in_process == ["CHUNKING"]


def test_sandbox_serializes_concurrent_callers(sandbox: SandboxedParser) -> None:
    docs = [(docx(f"document number {i}"), f"d{i}.docx") for i in range(6)]
    docs += [(f"plain text number {i}".encode(), f"t{i}.txt") for i in range(6)]
    with ThreadPoolExecutor(4) as pool:
        results = [text_of(r) for r in pool.map(lambda d: sandbox(*d), docs)]
    assert results == [*(f"document number {i}" for i in range(6)), *(f"plain text number {i}" for i in range(6))]


@needs_corpus
def test_wall_clock_timeout_kills_the_child() -> None:
    parser = SandboxedParser(SandboxLimits(timeout_s=0.05))
    try:
        parser.start(wait_ready=True)
        pid = parser.pid
        with pytest.raises(ParseLimitError, match=r"wall-clock limit of 0.05 s \(PARSE_TIMEOUT_S\)"):
            parser(corpus_bytes("book-war-and-peace-1225p.txt"), "novel.txt")  # ≈0.6 s
        assert parser.pid != pid
    finally:
        parser.close()


@needs_corpus
def test_cpu_limit_is_per_document_not_cumulative() -> None:
    parser = SandboxedParser(SandboxLimits(cpu_s=2))
    try:
        novel = corpus_bytes("book-war-and-peace-1225p.txt")
        parser.start(wait_ready=True)
        pid = parser.pid
        for _ in range(8):  # ≈0.4 s of CPU each (parse + chunk), ≈3 s in all: more than one budget
            assert parser(novel[:300_000], "novel.txt").chunks
        assert parser.pid == pid
        # Six novels in one file: ≈3.6 s of CPU, more than one budget (Markdown no longer goes
        # through unstructured's ≈25 s/MB, so a slice of the novel as .md is no longer enough).
        heavy = novel * 6
        with pytest.raises(ParseLimitError, match=r"exceeded 2 s of CPU \(PARSE_CPU_LIMIT_S; killed by SIGXCPU\)"):
            parser(heavy, "heavy.txt")
        assert parser.pid != pid
        assert text_of(parser(b"still works", "ok.txt")) == "still works"
    finally:
        parser.close()


def test_memory_error_in_the_child_is_a_parse_limit() -> None:
    # The warm child maps ≈0.9 GiB, so a 1 GiB limit leaves ≈0.1 GiB: receiving a 256 MiB
    # document raises MemoryError in Python (no C library involved: a clean MemoryError path).
    parser = SandboxedParser(SandboxLimits(memory_bytes=1024 * MIB))
    try:
        with pytest.raises(ParseLimitError, match=r"memory limit of 1 GiB \(PARSE_MEMORY_LIMIT_MB\)"):
            parser(b"word " * (256 * MIB // 5), "big.txt")
        assert text_of(parser(b"small again", "ok.txt")) == "small again"
    finally:
        parser.close()


def test_a_child_killed_while_idle_is_replaced_transparently(sandbox: SandboxedParser) -> None:
    import os
    import signal

    pid = sandbox.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    threading.Event().wait(0.5)
    assert text_of(sandbox(b"after an external kill", "k.txt")) == "after an external kill"
    assert sandbox.pid != pid


def test_child_dies_with_a_sigkilled_worker() -> None:
    """No orphan parser keeps running after the worker is SIGKILLed (PR_SET_PDEATHSIG)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import sys, time\n"
        "from task_service.pipeline.sandbox import SandboxedParser\n"
        "p = SandboxedParser()\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=Path(__file__).parents[2])
    try:
        assert worker.stdout is not None
        child = int(worker.stdout.readline())
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(30)
        deadline = time.monotonic() + 30
        while process_state(child) not in ("X", "Z") and time.monotonic() < deadline:  # gone or a zombie
            time.sleep(0.1)
        assert process_state(child) in ("X", "Z"), "the parser child outlived its worker"
    finally:
        if worker.poll() is None:
            worker.kill()


def test_chunk_settings_reach_the_child() -> None:
    parser = SandboxedParser(chunking=ChunkSettings(max_tokens=8, overlap_tokens=0, max_chars=30))
    try:
        text = "Sandboxed chunking obeys the settings the worker sends with its limits. " * 5
        extraction = parser(text.encode(), "s.txt")
        in_process = extract(text.encode(), "s.txt", DEFAULT_LIMITS, Chunker(load_minilm_tokenizer(), 8, 0, 30))
        assert extraction == in_process
        assert len(extraction.chunks) > 10
        assert all(len(c.content) <= 30 and c.token_count <= 8 for c in extraction.chunks)
    finally:
        parser.close()


@needs_corpus
def test_cancel_kills_the_child_mid_extraction_and_the_next_document_is_served() -> None:
    parser = SandboxedParser()
    try:
        parser.start(wait_ready=True)
        pid = parser.pid
        assert pid is not None
        token = threading.Event()
        novel = corpus_bytes("book-war-and-peace-1225p.txt") * 4  # 13 MB: many seconds of parsing + chunking
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(parser, novel, "novel.txt", token)
            deadline = time.monotonic() + 30
            while parser._active is None and time.monotonic() < deadline:  # the child has the document
                time.sleep(0.05)
            started = time.monotonic()
            parser.cancel(token)
            with pytest.raises(ExtractionCancelled):
                pending.result(timeout=30)
            cancelled_in = time.monotonic() - started
        assert process_state(pid) in ("X", "Z")
        assert cancelled_in < 5, cancelled_in
        assert parser.pid != pid
        assert text_of(parser(b"served after a cancel", "c.txt")) == "served after a cancel"
        with pytest.raises(ExtractionCancelled):  # a token cancelled before the call
            parser(b"never parsed", "n.txt", token)
    finally:
        parser.close()


def test_in_process_parser_extracts_with_provenance() -> None:
    parser = InProcessParser(DEFAULT_LIMITS, chunker())
    extraction = parser(b"First paragraph.\n\nSecond paragraph.", "p.txt")
    assert [c.content for c in extraction.chunks] == ["First paragraph.\n\nSecond paragraph."]
    assert extraction.warnings == ()
    token = threading.Event()
    parser.cancel(token)
    with pytest.raises(ExtractionCancelled):
        parser(b"x", "x.txt", token)


def test_too_many_chunks_is_a_parse_limit() -> None:
    few = Chunker(load_minilm_tokenizer(), 8, 0, 40, max_chunks=3)
    text = b"Each of these sentences is a chunk of its own here. " * 10
    with pytest.raises(ParseLimitError, match=r"the limit is 3 \(CHUNK_MAX_PER_DOCUMENT\)"):
        extract(text, "many.txt", DEFAULT_LIMITS, few)
    assert len(extract(text[:60], "one.txt", DEFAULT_LIMITS, few).chunks) <= 3
