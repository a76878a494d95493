"""Outlook .msg candidates for ``bench/parsers.py`` on ``tests.fidelity.mail_corpus``.

- ``ours``: ``task_service.pipeline.readers.mail.msg.read`` (olefile + our property reader);
- ``extract-msg``: ``extract_msg.openMsg``: subject, sender, to, cc, date, then the plain body,
  else the HTML body through our HTML walker, else its RTF de-encapsulation (RTFDE); file
  attachments through ``parse_document`` as ours does, embedded messages recursing.
"""

from __future__ import annotations

from typing import Any

from tests.fidelity import Sample, mail_corpus


def ours(data: bytes) -> str:
    from task_service.pipeline.limits import DEFAULT_LIMITS
    from task_service.pipeline.parse import attachment_reader
    from task_service.pipeline.readers.mail.msg import read

    return read(data, DEFAULT_LIMITS, attachment_reader(DEFAULT_LIMITS)).text


def _extract_msg_text(message: Any) -> str:
    from task_service.pipeline.readers.mail.common import default_read_attachment
    from task_service.pipeline.readers.web.html import extract_html

    parts = [
        f"{k}: {v}"
        for k, v in (
            ("Subject", message.subject),
            ("From", message.sender),
            ("To", message.to),
            ("Cc", message.cc),
            ("Date", message.date),
        )
        if v
    ]
    body = message.body
    if not body and message.htmlBody:
        body = extract_html(message.htmlBody.decode("utf-8", "replace")).text
    if not body and message.rtfBody:
        body = extract_html(message.deencapsulatedRtf.content).text if message.deencapsulatedRtf else ""
    parts.append(body or "")
    for attachment in message.attachments:
        if attachment.type.name == "MSG":
            parts.append(_extract_msg_text(attachment.data))
        elif isinstance(attachment.data, bytes):
            name = attachment.longFilename or attachment.shortFilename or "x.bin"
            try:
                doc = default_read_attachment(name, attachment.data, 1)
            except Exception:
                doc = None
            parts.append(doc.text if doc else "")
    return "\n\n".join(parts)


def extract_msg(data: bytes) -> str:
    import extract_msg as library

    return _extract_msg_text(library.openMsg(data))


CANDIDATES = {"ours": ours, "extract-msg": extract_msg}


def samples() -> list[Sample]:
    return mail_corpus.msg_samples()


def big_sample(smoke: bool) -> Sample:
    return mail_corpus.big_msg(200 if smoke else 20_000)
