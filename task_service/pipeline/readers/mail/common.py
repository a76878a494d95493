"""What the .eml and .msg readers share (pure): the header block, the body choice, attachments.

A message becomes, in reading order:

1. one header block ``"Subject: … / From: … / To: … / Cc: … / Date: …"`` (fields that are
   present, RFC 2047 words decoded by the caller);
2. its body: the plain text, or the HTML through our HTML walker (``html.extract_html``) when
   that has more words; both (plain first) when they differ (the poorer holds more than 3, and
   more than 20 %, of distinct words the richer lacks: ``richer_body``), never two copies of one text;
3. each attachment a supported reader can read, as blocks whose ``section`` starts with
   ``"attachment: report.docx"`` (then the attachment's own heading path); a nested message
   the same way, read by the mail reader itself one level deeper.

Attachments are read by what the dispatch hands in (:class:`Attachments`, built by
``parse.attachment_reader`` with the configured limits): ``read(filename, data, depth)``, the
registry's dispatch for the kinds it knows (``None`` for others), and ``nested``, the mail
readers' ``read_into`` by extension for attached messages. The mail family imports neither
the dispatch nor its own readers. What is not read is counted in warnings
("2 attachments not read: a.zip, b.exe", "3 inline images ignored").

Nesting (``ParseLimits``): nested messages up to ``mail_max_depth`` levels (MAIL_MAX_DEPTH,
default 3) are read; deeper ones are skipped with a warning (real forwarded chains rarely go
further, and their words are usually quoted in the outer body anyway). A structure nested more
than ``mail_max_nesting`` levels (MAIL_MAX_NESTING, default 50; MIME parts of an .eml, embedded
messages of a .msg) is refused with ``ParseLimitError``: no real mail nests so deep, it is a
nesting bomb. Header values longer than ``mail_max_header_chars`` (MAIL_MAX_HEADER_CHARS,
default 100,000) are cut there with a warning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from shared.domain.errors import (
    CorruptDocumentError,
    NoTextError,
    ParseLimitError,
    PdfEncryptedError,
    TextBudgetError,
    UndecodableTextError,
    UnsupportedTypeError,
)
from shared.domain.normalize import sanitize
from task_service.pipeline.document import SECTION_SEPARATOR, Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.web.html import extract_html

AttachmentReader = Callable[[str, bytes, int], "ParsedDocument | None"]
"""``read_attachment(filename, data, depth)``: the attachment's document, or ``None`` when its
type is not supported; ``depth`` is the nesting level of the message holding it (0: the file)."""
ReadInto = Callable[[bytes, "Collector"], None]
"""``read_into(data, collector)``: a mail reader appending the message in ``data`` to ``collector``."""


@dataclass(frozen=True)
class Attachments:
    """How a message's attachments are read, handed in by the dispatch with the configured limits.

    ``read``: an attachment's document or ``None`` (type not supported); ``nested``: lower-case
    extension (``"eml"``, ``"msg"``) → the mail reader that appends such an attached message.
    """

    read: AttachmentReader
    nested: Mapping[str, ReadInto] = field(default_factory=dict)


HEADER_FIELDS = ("Subject", "From", "To", "Cc", "Date")
_WORD = re.compile(r"\w+")
# Errors that make one attachment unreadable without making the message unreadable.
_ATTACHMENT_ERRORS = (
    CorruptDocumentError,
    NoTextError,
    ParseLimitError,
    PdfEncryptedError,
    UndecodableTextError,
    UnsupportedTypeError,
)


def read_mail_file(collector: Collector, name: str, data: bytes) -> bool:
    """Read an attached message file (``.eml``/``.msg``: ``collector.attachments.nested``) one
    level deeper; ``False`` for other names."""
    suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    read_into = collector.attachments.nested.get(suffix)
    if read_into is None:
        return False
    collector.nested(name, lambda child: read_into(data, child))
    return True


def header_block(fields: dict[str, str]) -> Block | None:
    """``"Subject: …\\nFrom: …"`` for the non-empty ``fields`` in ``HEADER_FIELDS`` order."""
    lines = [f"{name}: {' '.join(value.split())}" for name in HEADER_FIELDS if (value := fields.get(name, "").strip())]
    return Block("\n".join(lines)) if lines else None


def cut_header(name: str, value: str, limits: ParseLimits, warnings: list[str]) -> str:
    """``value`` cut to ``limits.mail_max_header_chars`` (with a warning when it was longer)."""
    if len(value) <= limits.mail_max_header_chars:
        return value
    warnings.append(
        f"{name} header cut from {len(value):,} to {limits.mail_max_header_chars:,} characters (MAIL_MAX_HEADER_CHARS)"
    )
    return value[: limits.mail_max_header_chars]


def word_count(text: str) -> int:
    return len(_WORD.findall(text))


def plain_blocks(text: str) -> list[Block]:
    """Plain body text → one block per paragraph (blank-line separated)."""
    return [Block(p) for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n")) if p.strip()]


#: Two bodies of one message are copies when the poorer one's distinct words (case folded) missing
#: from the richer one are at most this many, or this share of them: a plain part that is the HTML
#: part's text re-wrapped, with its links shown or a word such as "Plain" for "HTML".
SAME_BODY_MISSING = (3, 0.2)


def richer_body(plain: str | None, html: str | None) -> ParsedDocument:
    """The richer of the plain body and the HTML body's blocks (more words), or both, plain first,
    when they differ: the poorer holds more words the richer lacks than ``SAME_BODY_MISSING`` allows,
    e.g. a plain part saying "view this message in a browser: <link>" beside the HTML text."""
    html_doc = extract_html(sanitize(html)) if html else None
    plain_doc = ParsedDocument(tuple(plain_blocks(plain))) if plain else None
    if html_doc is None:
        return plain_doc or ParsedDocument(())
    if plain_doc is None:
        return html_doc
    richer, poorer = ((html_doc, plain_doc) if word_count(html_doc.text) > word_count(plain_doc.text)
                      else (plain_doc, html_doc))
    words = {w.casefold() for w in _WORD.findall(poorer.text)}
    missing = words - {w.casefold() for w in _WORD.findall(richer.text)}
    if len(missing) <= max(SAME_BODY_MISSING[0], SAME_BODY_MISSING[1] * len(words)):
        return richer
    return ParsedDocument(plain_doc.blocks + html_doc.blocks, plain_doc.warnings + html_doc.warnings)


def read_file(
    data: bytes, limits: ParseLimits, attachments: Attachments, read_into: ReadInto, what: str,
) -> ParsedDocument:
    """The message file ``data`` read by ``read_into`` at depth 0: header block, body, attachments, warnings.

    Raises what ``read_into`` raises, and ``NoTextError`` (naming ``what``, "the e-mail") when nothing is left.
    """
    collector = Collector(attachments, limits)
    read_into(data, collector)
    result = collector.result()
    if not result.blocks:
        raise NoTextError(f"{what} has no subject, addresses, body or readable attachment")
    return result


def check_nesting(level: int, limits: ParseLimits, what: str) -> None:
    """Raise ``ParseLimitError`` when ``level`` exceeds ``limits.mail_max_nesting``."""
    if level > limits.mail_max_nesting:
        raise ParseLimitError(
            f"{what} nested more than {limits.mail_max_nesting} levels deep (MAIL_MAX_NESTING): a nesting bomb"
        )


@dataclass
class Collector:
    """Blocks and warnings of one message being read, with the attachment bookkeeping."""

    attachments: Attachments
    limits: ParseLimits
    depth: int = 0
    blocks: list[Block] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    not_read: list[str] = field(default_factory=list)
    too_deep: list[str] = field(default_factory=list)
    inline_images: int = 0

    def add(self, document: ParsedDocument, section: str | None = None, prefix: str = "") -> None:
        """Append ``document``'s blocks under ``section`` and its warnings after ``prefix``."""
        for block in document.blocks:
            inner = block.section
            path = section if inner is None else (inner if section is None else section + SECTION_SEPARATOR + inner)
            self.blocks.append(Block.restated(block.text, path, block.page))
        self.warnings.extend(prefix + warning for warning in document.warnings)

    def attachment(self, filename: str, data: bytes) -> None:
        """Read one attachment through ``attachments.read``; count it when it cannot be read."""
        try:
            document = self.attachments.read(filename, data, self.depth)
        except TextBudgetError:
            raise  # the file as a whole gives too much text: not one attachment skipped
        except _ATTACHMENT_ERRORS as exc:
            self.warnings.append(f"attachment {filename} not read: {exc}")
            return
        if document is None:
            self.not_read.append(filename)
            return
        self.add(document, f"attachment: {filename}", f"attachment {filename}: ")

    def nested(self, name: str, read: Callable[[Collector], None]) -> None:
        """Read a nested message with ``read`` one level deeper, unless that exceeds ``mail_max_depth``."""
        if self.depth + 1 > self.limits.mail_max_depth:
            self.too_deep.append(name)
            return
        child = Collector(self.attachments, self.limits, self.depth + 1)
        read(child)
        self.add(child.result(), f"attachment: {name}", f"attachment {name}: ")

    def result(self) -> ParsedDocument:
        """The blocks and the warnings, with the counts of what was not read."""
        warnings = list(self.warnings)
        if self.not_read:
            warnings.append(f"{_plural(len(self.not_read), 'attachment')} not read: {', '.join(self.not_read)}")
        if self.too_deep:
            warnings.append(
                f"{_plural(len(self.too_deep), 'nested message')} not read, deeper than "
                f"{self.limits.mail_max_depth} levels (MAIL_MAX_DEPTH): {', '.join(self.too_deep)}"
            )
        if self.inline_images:
            warnings.append(f"{_plural(self.inline_images, 'inline image')} ignored")
        return ParsedDocument(tuple(self.blocks), tuple(warnings))


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"
