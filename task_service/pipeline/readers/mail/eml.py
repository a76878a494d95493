"""E-mail ``.eml`` (RFC 5322 / MIME) → blocks (pure; the standard library's ``email`` package).

The MIME tree is built by the stdlib feed parser with the ``compat32`` policy, and header values
are decoded here with ``email.header.decode_header`` (RFC 2047 encoded words, any charset
Python knows). Not ``policy.default``: its header parser is superlinear (measured, Python 3.12:
a ``To:`` of 8,000 addresses (56 KB) takes 4.7 s, of 32,000 addresses 23.7 s; a 6 MB
``Subject:`` of short words did not finish in 5 minutes) while ``decode_header`` takes
milliseconds on the same values.

Walk (our own; see ``mail.py`` for the layout and the limits):

- ``multipart/alternative``: ONE child, the richer of its text/plain and text/html bodies
  (``mail.richer_body``); a ``multipart/related`` child counts as its root part;
- ``multipart/related``: the root part (``start`` parameter, else the first) is body text, the
  other parts are inline resources (images counted);
- other ``multipart/*``: every child in order (several inline text parts are all kept);
- ``message/rfc822`` (and an attached ``.eml``): a nested message, read one level deeper;
- a text/plain or text/html leaf that is not an attachment: body text;
- anything else with a file name or ``Content-Disposition: attachment``: an attachment, read by
  ``attachments.read``; an inline image is counted.

Payloads: quoted-printable and base64 are undone by the stdlib (a bogus base64 body gives what
decodes, with a warning from the parser's defects); text is decoded with ``decode.decode`` and the
declared charset (UTF-8 first, then the declared charset, then detection; a missing or wrong
charset is detected and said in a warning).
"""

from __future__ import annotations

import email
import email.header
import email.policy
import mimetypes
from email.message import Message

from shared.domain.errors import UndecodableTextError
from task_service.pipeline.decode import decode, sniff_html_charset
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.mail.common import (
    HEADER_FIELDS,
    Attachments,
    Collector,
    check_nesting,
    cut_header,
    header_block,
    read_file,
    read_mail_file,
    richer_body,
)

__all__ = ["TAKES_ATTACHMENTS", "read", "read_into", "read_message"]

_LEGACY_ALIASES = {"iso-8859-1": "cp1252", "latin-1": "cp1252", "latin1": "cp1252", "us-ascii": "cp1252"}


#: ``read`` takes the :class:`Attachments` the dispatch hands in (``parse.attachment_reader``).
TAKES_ATTACHMENTS = True


def read(data: bytes, limits: ParseLimits, attachments: Attachments) -> ParsedDocument:
    """Return the blocks of the message in ``data`` (header block, body, attachments) and warnings.

    Raises ``ParseLimitError`` when the MIME structure nests more than ``limits.mail_max_nesting``
    levels, ``NoTextError`` when the bytes hold no header and no body (not a message).
    """
    return read_file(data, limits, attachments, read_into, "the e-mail")


def read_into(data: bytes, collector: Collector) -> None:
    """Append the message in ``data`` (RFC 5322 bytes) to ``collector`` (at its depth)."""
    read_message(email.message_from_bytes(data, policy=email.policy.compat32), collector)


def read_message(message: Message, collector: Collector) -> None:
    """Append one parsed message's header block, body and attachments to ``collector``."""
    _check_depth(message, collector)
    fields = {
        name: cut_header(name, decode_header(value), collector.limits, collector.warnings)
        for name in HEADER_FIELDS
        if (value := message.get(name)) is not None
    }
    block = header_block(fields)
    if block is not None:
        collector.blocks.append(block)
    _walk(message, collector)
    defects = _defects(message)
    if defects:
        collector.warnings.append(f"damaged MIME structure ({defects}); what could be read was kept")


def decode_header(value: object) -> str:
    """A raw header value with its RFC 2047 encoded words decoded (unknown charsets: detected)."""
    raw = str(value)
    try:
        parts = email.header.decode_header(raw)
    except (ValueError, email.errors.HeaderParseError):
        return raw
    out = []
    for chunk, charset in parts:
        if isinstance(chunk, str):
            out.append(chunk)
        else:
            out.append(_text(chunk, charset))
    return "".join(out)


def _text(payload: bytes, charset: str | None) -> str:
    declared = _LEGACY_ALIASES.get((charset or "").lower(), charset)
    try:
        return decode(payload, declared=declared).text
    except UndecodableTextError:  # binary bytes in a header: kept as replacement characters
        return payload.decode("utf-8", errors="replace")


def _check_depth(message: Message, collector: Collector) -> None:
    """``ParseLimitError`` when the MIME tree nests deeper than ``mail_max_nesting`` (iterative)."""
    todo: list[tuple[Message, int]] = [(message, 1)]
    while todo:
        part, level = todo.pop()
        check_nesting(level, collector.limits, "MIME parts")
        payload = part.get_payload()
        if isinstance(payload, list):
            todo.extend((child, level + 1) for child in payload if isinstance(child, Message))


def _defects(message: Message) -> str:
    names = sorted({type(d).__name__ for part in message.walk() for d in part.defects})
    return ", ".join(names)


def _walk(part: Message, collector: Collector) -> None:
    ctype = part.get_content_type()
    if part.is_multipart() and ctype == "message/rfc822":
        _nested(part, collector)
    elif ctype == "multipart/alternative":
        _alternative(part, collector)
    elif ctype == "multipart/related":
        _related(part, collector)
    elif part.is_multipart():
        for child in _children(part):
            _walk(child, collector)
    else:
        _leaf(part, collector)


def _children(part: Message) -> list[Message]:
    payload = part.get_payload()
    return [child for child in payload if isinstance(child, Message)] if isinstance(payload, list) else []


def _nested(part: Message, collector: Collector) -> None:
    children = _children(part)
    if not children:
        return
    inner = children[0]
    name = _filename(part) or f"{decode_header(inner.get('Subject', '')).strip() or 'message'}.eml"
    collector.nested(name, lambda child: read_message(inner, child))


def _alternative(part: Message, collector: Collector) -> None:
    plain = html = None
    others: list[Message] = []
    for child in _children(part):
        body = child
        if child.get_content_type() == "multipart/related":
            body = _related_root(child)
            collector.inline_images += sum(
                1 for c in _children(child) if c is not body and c.get_content_maintype() == "image"
            )
        kind = body.get_content_type()
        if kind == "text/plain" and plain is None and not _is_attachment(body):
            plain = _body_text(body, collector)
        elif kind == "text/html" and html is None and not _is_attachment(body):
            html = _body_text(body, collector)
        else:
            others.append(child)
    if plain is None and html is None and others:
        _walk(others[-1], collector)  # e.g. text/enriched only: the last (richest) alternative
        return
    collector.add(richer_body(plain, html))


def _related_root(part: Message) -> Message:
    children = _children(part)
    start = part.get_param("start")
    if isinstance(start, str):
        for child in children:
            if child.get("Content-ID", "").strip() == start.strip():
                return child
    return children[0] if children else part


def _related(part: Message, collector: Collector) -> None:
    root = _related_root(part)
    if root is not part:
        _walk(root, collector)
    for child in _children(part):
        if child is root:
            continue
        if child.get_content_maintype() == "image" and not _filename(child):
            collector.inline_images += 1
        else:
            _walk(child, collector)


def _leaf(part: Message, collector: Collector) -> None:
    ctype = part.get_content_type()
    if ctype in ("text/plain", "text/html") and not _is_attachment(part):
        text = _body_text(part, collector)
        collector.add(richer_body(text, None) if ctype == "text/plain" else richer_body(None, text))
        return
    if part.get_content_maintype() == "image" and part.get_content_disposition() != "attachment":
        collector.inline_images += 1
        return
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        return
    name = _filename(part) or f"attachment{mimetypes.guess_extension(ctype) or '.bin'}"
    if ctype == "message/rfc822" and not name.lower().endswith(".eml"):
        name += ".eml"
    if not read_mail_file(collector, name, data):
        collector.attachment(name, data)


def _is_attachment(part: Message) -> bool:
    return part.get_content_disposition() == "attachment" or bool(_filename(part))


def _filename(part: Message) -> str:
    raw = part.get_filename()
    return decode_header(raw).strip() if raw else ""


def _body_text(part: Message, collector: Collector) -> str:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes) or not payload:
        return ""
    charset = part.get_content_charset()
    if charset is None and part.get_content_type() == "text/html":
        charset = sniff_html_charset(payload)
    try:
        decoded = decode(payload, declared=_LEGACY_ALIASES.get(charset or "", charset))
    except UndecodableTextError as exc:
        collector.warnings.append(f"a {part.get_content_type()} body part was not read: {exc}")
        return ""
    collector.warnings.extend(f"body: {warning}" for warning in decoded.warnings)
    return decoded.text
