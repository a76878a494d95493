"""Document bytes → normalized plain text; the type is chosen by the file extension.

| extension        | reader                                                     |
|------------------|------------------------------------------------------------|
| pdf              | pypdfium2 text layer (``pdf.py``)                          |
| docx             | our OOXML walker over the package parts (``docx.py``)      |
| html, htm        | ``decode.py`` → ``html.py`` (lexbor tree, our walker)      |
| md, markdown     | ``decode.py`` → ``markdown.py`` (pyromark → ``html.py``)   |
| txt              | ``decode.py`` → ``normalize.reflow_plain_text``            |
|                  | (html, md, txt: with the decoder's warnings)               |

Plain text does not go through unstructured's ``partition_text``: measured on this 2-core
machine with the spaCy model loaded, it took 3.41 s for the first 100,000 characters and
10.55 s for the first 400,000 characters of ``book-war-and-peace-1225p.txt`` (3.2 MB), i.e.
≈85-110 s for the whole novel, almost all in its per-paragraph narrative-text classification
(spaCy sentence splitting and POS tagging), whose labels we throw away. Our own paragraph
reflow + normalization parses the whole novel in 0.53-0.61 s (3 runs).

Known cost of the unstructured path: the same classification runs on every HTML/MD
element. Measured: 3,000 paragraphs of the novel as a 764 KB HTML file take 19.6 s (≈25 s/MB;
97 % in ``unstructured.nlp.tokenize.sent_tokenize``); HTML and Markdown therefore have their
own readers (``html.py``, ``markdown.py``; figures in ``bench/RESULTS.md``, section parsers),
which also keep what unstructured lost (``<details>``, ``<figcaption>``, text outside
``<main>``, Markdown link targets, anything after 256 levels of nesting or a 10 MB text node).

Call ``ensure_parsers_ready()`` once at worker start-up; ``parse_document`` is synchronous and
CPU-bound: run it with ``asyncio.to_thread``. The worker runs it in a resource-limited child
process (``sandbox.py``); the structural limits (ZIP bomb pre-check before the DOCX reader opens
the package, PDF page count and text size) are checked here (``limits.py``), wherever it runs.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Literal

from shared.domain.errors import NoTextError, UnsupportedTypeError
from shared.domain.normalize import (
    has_visible_text,
    normalize_text,
    reflow_plain_text,
    sanitize,
)
from task_service.pipeline.decode import decode, sniff_html_charset
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.docx import extract_docx
from task_service.pipeline.html import extract_html
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits, check_zip_limits
from task_service.pipeline.markdown import extract_markdown
from task_service.pipeline.pdf import extract_pdf

__all__ = ["SUPPORTED_EXTENSIONS", "document_kind", "ensure_parsers_ready", "parse_document", "parse_text"]

DocumentKind = Literal["pdf", "docx", "html", "md", "txt"]

SUPPORTED_EXTENSIONS: dict[str, DocumentKind] = {
    "pdf": "pdf",
    "docx": "docx",
    "html": "html",
    "htm": "html",
    "md": "md",
    "markdown": "md",
    "txt": "txt",
}


_WARM_UP: tuple[tuple[str, bytes], ...] = (
    ("warm-up.html", b"<h1>Warm-up</h1><p>The parser reads this sentence once at start-up.</p>"),
    ("warm-up.md", b"# Warm-up\n\nThe parser reads [this](https://example.invalid) once."),
    ("warm-up.txt", b"The parser reads this sentence once at start-up."),
)


def ensure_parsers_ready() -> None:
    """Import every reader's library and parse a tiny document of each text kind once (tens of
    milliseconds; no network). Raises ``DependencyMissingError`` when a reader's library
    (selectolax, pyromark, lxml, pypdfium2) is not installed."""
    for name, data in _WARM_UP:
        parse_document(data, name)


def document_kind(filename: str) -> DocumentKind:
    """Map a file name to its document kind by extension (case-insensitive).

    Raises ``UnsupportedTypeError`` for any other extension or none.
    """
    suffix = PurePosixPath(filename.replace("\\", "/")).suffix.lower().lstrip(".")
    try:
        return SUPPORTED_EXTENSIONS[suffix]
    except KeyError:
        supported = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        shown = f".{suffix}" if suffix else "no extension"
        raise UnsupportedTypeError(
            f"unsupported file type ({shown}) for {filename!r}; supported: {supported}"
        ) from None


def parse_document(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    """Return the blocks of a document, each normalized: NFC, ``\\n`` line ends, no NUL/control
    characters, stripped, none empty; with the reader's warnings.

    ``data`` is the whole file; ``filename`` only selects the reader by extension.
    Raises ``UnsupportedTypeError`` (extension; Strict Open XML DOCX), ``PdfEncryptedError`` (password PDF),
    ``CorruptDocumentError`` (unreadable PDF/DOCX), ``UndecodableTextError`` (txt/html/md bytes
    in no recognizable encoding), ``NoTextError`` (nothing visible left after normalization),
    ``DependencyMissingError`` (a reader's library not installed),
    and ``ParseLimitError`` when the document exceeds ``limits`` (ZIP bomb, too many PDF pages,
    too much PDF text), a DOCX part's XML exceeds the parser's nesting/text-node limits, or
    HTML/Markdown nests elements deeper than ``html.MAX_DEPTH``.
    """
    kind = document_kind(filename)
    parsed = _read(kind, data, limits)
    # The plain-text reader normalizes before it reflows (the reflow needs clean lines): not twice.
    clean = str if kind == "txt" else normalize_text
    blocks = tuple(
        Block(text, block.section, block.page)
        for block in parsed.blocks
        if has_visible_text(text := clean(block.text))
    )
    if not blocks:
        raise NoTextError()
    return ParsedDocument(blocks, parsed.warnings)


def _read(kind: DocumentKind, data: bytes, limits: ParseLimits) -> ParsedDocument:
    if kind == "pdf":
        return extract_pdf(data, max_pages=limits.pdf_max_pages, max_text_chars=limits.pdf_max_text_chars,
                           limits=limits)
    if kind == "docx":
        check_zip_limits(data, limits)
        return extract_docx(data, limits)
    if kind == "html":
        decoded = decode(data, declared=sniff_html_charset(data))
        return _with_warnings(extract_html(sanitize(decoded.text)), decoded.warnings)
    if kind == "md":
        decoded = decode(data)
        return _with_warnings(extract_markdown(sanitize(decoded.text)), decoded.warnings)
    decoded = decode(data)
    text = reflow_plain_text(normalize_text(decoded.text))
    return ParsedDocument(tuple(Block(p) for p in text.split("\n\n")), decoded.warnings)


def _with_warnings(parsed: ParsedDocument, warnings: tuple[str, ...]) -> ParsedDocument:
    """``parsed`` with the decoder's ``warnings`` first."""
    return ParsedDocument(parsed.blocks, (*warnings, *parsed.warnings)) if warnings else parsed


def parse_text(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> str:
    """``parse_document(...).text``: the blocks joined by blank lines (tests, benchmarks)."""
    return parse_document(data, filename, limits).text
