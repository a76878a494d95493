"""Document bytes → normalized blocks; the reader is chosen by the file extension.

The extension names a format of the registry (``shared.domain.formats``), whose entry names its
reader by a short name that ``readers.FAMILIES`` resolves to a module of a family package
(``readers/office/docx.py``, exposing ``read(data, limits) -> ParsedDocument``). A format whose
reader module does not exist (yet) and an unknown extension are ``UnsupportedTypeError``; a
refused format (none at present) answers its refusal (``unsupported_type``). For every ZIP-based
format the ZIP-bomb limits are checked before its reader opens the package; an OLE2 file where a
ZIP package is expected is a password-protected Office file (``encrypted``), a legacy one (it is
read under its own extension: ``unsupported_type`` saying which) or corrupt.

| extension        | reader (``readers/``)                                            |
|------------------|------------------------------------------------------------------|
| pdf              | ``pdf``: pypdfium2 text layer (``pdf/reader.py``)                |
| docx             | ``docx``: our OOXML walker over the package parts (``office/``)  |
| html, htm        | ``html``: ``decode.py`` → ``web/html.py`` (lexbor, our walker)   |
| md, markdown     | ``markdown``: ``decode.py`` → ``web/markdown.py`` (pyromark)     |
| txt              | ``text``: ``decode.py`` → ``normalize.reflow_plain_text``        |
| eml, msg         | ``mail/``: attachments through :func:`attachment_reader`         |
| the others       | one module per format (the README's format table)                |

A mail reader (``TAKES_ATTACHMENTS``) gets the attachment reader built here with the same
limits as the message (:func:`attachment_reader`): an attachment is parsed as a document of
its own under the configured limits, and an attached message by the mail reader of its
extension one level deeper.

Plain text does not go through unstructured's ``partition_text``: measured on this 2-core
machine with the spaCy model loaded, it took 3.41 s for the first 100,000 characters and
10.55 s for the first 400,000 characters of ``book-war-and-peace-1225p.txt`` (3.2 MB), i.e.
≈85-110 s for the whole novel, almost all in its per-paragraph narrative-text classification
(spaCy sentence splitting and POS tagging), whose labels we throw away. Our own paragraph
reflow + normalization parses the whole novel in 0.53-0.61 s (3 runs).

Known cost of the unstructured path: the same classification runs on every HTML/MD
element. Measured: 3,000 paragraphs of the novel as a 764 KB HTML file take 19.6 s (≈25 s/MB;
97 % in ``unstructured.nlp.tokenize.sent_tokenize``); HTML and Markdown therefore have their
own readers (``web/html.py``, ``web/markdown.py``; figures in ``bench/RESULTS.md``, section parsers),
which also keep what unstructured lost (``<details>``, ``<figcaption>``, text outside
``<main>``, Markdown link targets, anything after 256 levels of nesting or a 10 MB text node).

Call ``ensure_parsers_ready()`` once at worker start-up; ``parse_document`` is synchronous and
CPU-bound: run it with ``asyncio.to_thread``. The worker runs it in a resource-limited child
process (``sandbox.py``); the structural limits (ZIP bomb pre-check before a reader opens a
package, PDF page count and text size) are checked here (``limits.py``), wherever it runs.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType

from shared.domain import formats, ole
from shared.domain.errors import CorruptDocumentError, DependencyMissingError, NoTextError, UnsupportedTypeError
from shared.domain.formats import Format
from shared.domain.normalize import has_visible_text, normalize_text
from task_service.pipeline import readers
from task_service.pipeline.document import Block, ParsedDocument, text_budget
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits, check_zip_limits
from task_service.pipeline.readers.mail.common import Attachments, ReadInto

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "Reader",
    "attachment_reader",
    "document_kind",
    "ensure_parsers_ready",
    "parse_document",
    "parse_text",
    "reader_for",
]

#: Every accepted format's extensions → its kind (the registry's; the API accepts the same).
SUPPORTED_EXTENSIONS: dict[str, str] = {ext: f.kind for f in formats.ACCEPTED for ext in f.extensions}
#: What an attachment may be read as: every accepted extension but an archive's (one level: an
#: archive is expanded only as an upload, ARCHITECTURE.md "Flow 4").
_ATTACHMENT_EXTENSIONS = frozenset(ext for f in formats.ACCEPTED if not f.is_archive for ext in f.extensions)


@dataclass(frozen=True)
class Reader:
    """A format's reader: ``read(data, limits)``; ``normalized``: its blocks need no second pass."""

    read: Callable[[bytes, ParseLimits], ParsedDocument]
    normalized: bool = False

    @classmethod
    def of(cls, module: ModuleType) -> Reader:
        """The reader a module exposes; a mail reader (``TAKES_ATTACHMENTS``) gets
        :func:`attachment_reader` of the limits it is called with."""
        read = module.read
        if getattr(module, "TAKES_ATTACHMENTS", False):
            return cls(lambda data, limits: read(data, limits, attachment_reader(limits)))
        return cls(read, bool(getattr(module, "NORMALIZED", False)))


_WARM_UP: tuple[tuple[str, bytes], ...] = (
    ("warm-up.html", b"<h1>Warm-up</h1><p>The parser reads this sentence once at start-up.</p>"),
    ("warm-up.md", b"# Warm-up\n\nThe parser reads [this](https://example.invalid) once."),
    ("warm-up.txt", b"The parser reads this sentence once at start-up."),
)


def ensure_parsers_ready() -> None:
    """Import every reader module that exists and parse a tiny document of each text kind once
    (tens of milliseconds; no network). Raises ``DependencyMissingError`` when a reader's
    library (selectolax, pyromark, lxml, pypdfium2...) is not installed."""
    for fmt in formats.FORMATS:
        try:
            reader_for(fmt)
        except UnsupportedTypeError:
            continue  # no reader module for it in this version
    for name, data in _WARM_UP:
        parse_document(data, name)


def reader_for(fmt: Format) -> Reader:
    """The reader module the registry names for ``fmt`` (``readers.FAMILIES``), imported (a
    refused format's reader only raises its refusal).

    Raises ``UnsupportedTypeError`` for a format whose reader module does not exist,
    ``DependencyMissingError`` when the module imports a library that is not installed.
    """
    return Reader.of(_module(fmt))


def _module(fmt: Format) -> ModuleType:
    name = readers.module_of(fmt.reader)
    if name is None:
        raise UnsupportedTypeError(f"{fmt.label} files cannot be read by this version (no reader)")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name + ".").startswith(exc.name + "."):  # the reader module itself
            raise UnsupportedTypeError(f"{fmt.label} files cannot be read by this version (no reader)") from None
        raise DependencyMissingError(f"the {fmt.label} reader needs {exc.name!r}, which is not installed") from exc


def attachment_reader(limits: ParseLimits) -> Attachments:
    """What a mail reader reads its attachments with: :func:`parse_document` under ``limits``
    for the extensions of an accepted format but an archive (``None`` for others), and the mail readers'
    ``read_into`` by extension for attached messages."""

    def read(filename: str, data: bytes, depth: int) -> ParsedDocument | None:
        del depth
        suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
        return parse_document(data, filename, limits) if suffix in _ATTACHMENT_EXTENSIONS else None

    return Attachments(read, _nested_readers())


@functools.cache
def _nested_readers() -> Mapping[str, ReadInto]:
    """Extension → ``read_into`` of every mail reader (a module with ``TAKES_ATTACHMENTS``)."""
    nested: dict[str, ReadInto] = {}
    for fmt in formats.ACCEPTED:
        name = readers.module_of(fmt.reader)
        if name is None:
            continue
        module = importlib.import_module(name)
        if getattr(module, "TAKES_ATTACHMENTS", False):
            nested.update(dict.fromkeys(fmt.extensions, module.read_into))
    return nested


def document_kind(filename: str) -> str:
    """Map a file name to its document kind by extension (case-insensitive); a refused kind
    (``doc``) too: its reader raises the refusal.

    Raises ``UnsupportedTypeError`` for any other extension or none.
    """
    suffix = formats.extension(filename)
    fmt = formats.by_extension(suffix)
    if fmt is None:
        shown = f".{suffix}" if suffix else "no extension"
        raise UnsupportedTypeError(f"unsupported file type ({shown}) for {filename!r}; supported: {formats.hint()}")
    return fmt.kind


def parse_document(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    """Return the blocks of a document, each normalized: NFC, ``\\n`` line ends, no NUL/control
    characters, stripped, none empty; with the reader's warnings.

    ``data`` is the whole file; ``filename`` only selects the reader by extension.
    Raises ``UnsupportedTypeError`` (extension; no reader; Strict Open XML DOCX; legacy Office),
    ``EncryptedDocumentError`` (password-protected Office file), ``PdfEncryptedError`` (password PDF),
    ``CorruptDocumentError`` (unreadable file), ``UndecodableTextError`` (text bytes in no
    recognizable encoding), ``NoTextError`` (nothing visible left after normalization),
    ``DependencyMissingError`` (a reader's library not installed),
    and ``ParseLimitError`` when the document exceeds ``limits`` (ZIP bomb, too many PDF pages,
    too much PDF text), an XML part exceeds the parser's nesting/text-node limits, or
    HTML/Markdown nests elements deeper than ``html.MAX_DEPTH``.
    """
    fmt = formats.by_kind(document_kind(filename))
    if fmt.refusal is not None and not ole.is_ole(data):
        raise UnsupportedTypeError(fmt.refusal)  # named .doc, not even an OLE file: the name's refusal
    reader = reader_for(fmt)
    if fmt.zip_based:
        _check_package(fmt, data, limits)
    with text_budget(limits.text_max_chars):
        parsed = reader.read(data, limits)
    clean = str if reader.normalized else normalize_text
    blocks = tuple(
        Block.restated(text, block.section, block.page)
        for block in parsed.blocks
        if has_visible_text(text := clean(block.text))
    )
    if not blocks:
        raise NoTextError()
    return ParsedDocument(blocks, parsed.warnings)


def _check_package(fmt: Format, data: bytes, limits: ParseLimits) -> None:
    """Before a ZIP-based reader: an OLE2 file instead of the ZIP is refused as
    ``shared.domain.ole.refusal`` says (encrypted, legacy, other), then the ZIP-bomb limits."""
    if ole.is_ole(data):
        error = ole.refusal(data)
        raise error or CorruptDocumentError(f"the {fmt.label} is an Outlook message (.msg), not a ZIP package")
    check_zip_limits(data, limits, kind=fmt.extensions[0].upper())


def parse_text(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> str:
    """``parse_document(...).text``: the blocks joined by blank lines (tests, benchmarks)."""
    return parse_document(data, filename, limits).text
