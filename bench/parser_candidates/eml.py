"""E-mail (.eml) candidates for ``bench/parsers.py`` on ``tests.fidelity.mail_corpus``.

- ``ours``: ``task_service.pipeline.readers.mail.eml.read`` (compat32 tree, our walker, attachments
  through ``parse_document``);
- ``stdlib-default``: ``policy.default`` as documented: the header fields, ``get_body()``
  (plain preferred, else HTML through our HTML walker) and nothing of the attachments or nested
  messages.
"""

from __future__ import annotations

from tests.fidelity import Sample, mail_corpus


def ours(data: bytes) -> str:
    from task_service.pipeline.limits import DEFAULT_LIMITS
    from task_service.pipeline.parse import attachment_reader
    from task_service.pipeline.readers.mail.eml import read

    return read(data, DEFAULT_LIMITS, attachment_reader(DEFAULT_LIMITS)).text


def stdlib_default(data: bytes) -> str:
    import email
    import email.policy

    from task_service.pipeline.readers.web.html import extract_html

    msg = email.message_from_bytes(data, policy=email.policy.default)
    head = [f"{name}: {msg[name]}" for name in ("Subject", "From", "To", "Cc", "Date") if msg[name]]
    body = msg.get_body(preferencelist=("plain", "html"))
    text = "" if body is None else str(body.get_content())  # type: ignore[attr-defined]
    if body is not None and body.get_content_type() == "text/html":
        text = extract_html(text).text
    return "\n".join(head) + "\n\n" + text


CANDIDATES = {"ours": ours, "stdlib-default": stdlib_default}


def samples() -> list[Sample]:
    return mail_corpus.eml_samples()


def big_sample(smoke: bool) -> Sample:
    return mail_corpus.big_eml(200 if smoke else 20_000)
