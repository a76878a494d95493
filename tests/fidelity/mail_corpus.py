"""E-mail fidelity corpus: generated .eml (``email.message.EmailMessage``) and .msg (``msg_writer``)
messages, one marker word per construct.

``ONCE`` markers sit in both copies of a ``multipart/alternative`` (or a .msg's plain and HTML
bodies): they must come out exactly once. ``SECTIONS`` gives the section expected for a few
attachment markers. ``must_not``: the base64 of an inline image never becomes text.
"""

from __future__ import annotations

import datetime as dt
import io
from email.message import EmailMessage

from tests.fidelity import Sample
from tests.fidelity.msg_writer import Attachment, Message, build_msg

ONCE = ("ALTMARK", "MSGALTMARK")
SECTIONS = {
    "ATTDOCXMARK": "attachment: report.docx",
    "FWDBODYMARK": "attachment: forwarded.eml",
    "MSGATTTXTMARK": "attachment: notes.txt",
    "MSGNESTEDBODYMARK": "attachment: inner.msg",
}
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + b"IMAGEBYTES" * 20


def docx_bytes(text: str) -> bytes:
    import docx  # python-docx (dev dependency)

    document = docx.Document()
    document.add_heading("Report heading", level=1)
    document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _eml(subject: str = "Plain SUBJECTMARK") -> EmailMessage:
    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = "Ann FROMNAMEMARK <ann@example.org>"
    msg["To"] = "Bob TONAMEMARK <bob@example.org>"
    msg["Cc"] = "Cy CCNAMEMARK <cy@example.org>"
    msg["Date"] = "Fri, 01 Mar 2024 12:00:00 +0000"
    return msg


def _raw(head: str, body: bytes) -> bytes:
    return (head.replace("\n", "\r\n") + "\r\n\r\n").encode() + body


def eml_samples() -> list[Sample]:
    plain = _eml()
    plain.set_content("The plain body PLAINBODYMARK.\n\nSecond paragraph PLAINPARAMARK.")
    html_only = _eml("HTML only")
    html_only.set_content(
        "<html><body><h1>Head HTMLHEADMARK</h1><p>Only HTML HTMLONLYMARK</p></body></html>", subtype="html"
    )
    alternative = _eml("Alternative")
    alternative.set_content("Plain copy ALTMARK")
    alternative.add_alternative("<p>HTML copy <b>ALTMARK</b> with more words HTMLRICHERMARK</p>", subtype="html")
    html_part = list(alternative.iter_parts())[1]
    assert isinstance(html_part, EmailMessage)
    html_part.add_related(PNG, "image", "png", cid="<logo@x>")
    rfc2047 = _eml("Grüße RFC2047ÜMARK und 中文标题MARK")
    rfc2047.set_content("body of the encoded subject ENCSUBJBODYMARK")
    qp = _eml("QP")
    qp.set_content("A long line " + "filler " * 20 + "QUOTEDPRINTABLEMARK café", cte="quoted-printable")
    b64 = _eml("B64")
    b64.set_content("Base64 body BASE64BODYMARK ü", cte="base64")
    latin = _raw(
        'Subject: Latin\nContent-Type: text/plain; charset="iso-8859-1"\nContent-Transfer-Encoding: 8bit',
        "Déjà vu LATINÉTÉMARK".encode("latin-1"),
    )
    nocharset = _raw(
        "Subject: No charset\nContent-Type: text/plain\nContent-Transfer-Encoding: 8bit",
        "Ça déménage à Noël, garçon NOCHARSETÇAMARK".encode("cp1252"),
    )
    attachments = _eml("With attachments")
    attachments.set_content("See the attachments BODYWITHATTMARK")
    attachments.add_attachment(b"attached text ATTTXTMARK", maintype="text", subtype="plain", filename="notes.txt")
    attachments.add_attachment(
        b"<p>attached html ATTHTMLMARK</p>", maintype="text", subtype="html", filename="page.html"
    )
    attachments.add_attachment(
        docx_bytes("attached docx ATTDOCXMARK"),
        maintype="application",
        subtype="vnd.openxmlformats-officedocument.wordprocessingml.document",
        filename="report.docx",
    )
    attachments.add_attachment(b"PK\x05\x06" + bytes(18), maintype="application", subtype="zip", filename="a.zip")
    inner = _eml("Inner NESTEDSUBJMARK")
    inner.set_content("Forwarded body FWDBODYMARK")
    outer = _eml("Fwd")
    outer.set_content("Outer body OUTERBODYMARK")
    outer.add_attachment(inner, filename="forwarded.eml")
    raw = [
        ("plain", plain.as_bytes()),
        ("html-only", html_only.as_bytes()),
        ("alternative", alternative.as_bytes()),
        ("rfc2047", rfc2047.as_bytes()),
        ("qp", qp.as_bytes()),
        ("base64", b64.as_bytes()),
        ("latin1", latin),
        ("no-charset", nocharset),
        ("attachments", attachments.as_bytes()),
        ("nested", outer.as_bytes()),
    ]
    return [Sample(f"eml-{name}", f"{name}.eml", data, _markers(data, name)) for name, data in raw]


_EML_MARKS = {
    "plain": ("SUBJECTMARK", "FROMNAMEMARK", "TONAMEMARK", "CCNAMEMARK", "PLAINBODYMARK", "PLAINPARAMARK"),
    "html-only": ("HTMLHEADMARK", "HTMLONLYMARK"),
    "alternative": ("ALTMARK", "HTMLRICHERMARK"),
    "rfc2047": ("RFC2047ÜMARK", "中文标题MARK", "ENCSUBJBODYMARK"),
    "qp": ("QUOTEDPRINTABLEMARK",),
    "base64": ("BASE64BODYMARK",),
    "latin1": ("LATINÉTÉMARK",),
    "no-charset": ("NOCHARSETÇAMARK",),
    "attachments": ("BODYWITHATTMARK", "ATTTXTMARK", "ATTHTMLMARK", "ATTDOCXMARK"),
    "nested": ("OUTERBODYMARK", "NESTEDSUBJMARK", "FWDBODYMARK"),
}


def _markers(data: bytes, name: str) -> tuple[str, ...]:
    del data
    return _EML_MARKS[name]


def _msg(subject: str, **kwargs: object) -> Message:
    base: dict[str, object] = {
        "subject": subject,
        "sender_name": "Mia MSGFROMMARK",
        "sender_email": "mia@example.org",
        "to": [("Tom MSGTOMARK", "tom@example.org")],
        "cc": [("Cat MSGCCMARK", "cat@example.org")],
        "date": dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.UTC),
    }
    base.update(kwargs)
    return Message(**base)  # type: ignore[arg-type]


def msg_samples() -> list[Sample]:
    from compressed_rtf import compress  # type: ignore[import-untyped]

    rtf_plain = (
        rb"{\rtf1\ansi\ansicpg1252{\fonttbl{\f0 Arial;}}\f0 RTF only body MSGRTFMARK\par"
        rb" caf\'e9 \u8364? MSGRTFEUROMARK\par}"
    )
    rtf_html = (
        rb"{\rtf1\ansi\ansicpg1252\fromhtml1 {\fonttbl{\f0 Arial;}}{\*\htmltag19 <html><body>}"
        rb"{\*\htmltag64 <p>}\htmlrtf {\htmlrtf0 Encapsulated MSGRTFHTMLMARK\htmlrtf }\htmlrtf0"
        rb"{\*\htmltag72 </p>}\htmlrtf\par\htmlrtf0{\*\htmltag27 </body></html>}}"
    )
    messages = {
        "msg-plain": (
            _msg("Hello MSGSUBJECTMARK", body="Plain body MSGPLAINMARK.\r\n\r\nMore MSGPARAMARK"),
            ("MSGSUBJECTMARK", "MSGFROMMARK", "MSGTOMARK", "MSGCCMARK", "MSGPLAINMARK", "MSGPARAMARK"),
        ),
        "msg-html-only": (
            _msg("Html", html=b"<html><body><p>HTML only MSGHTMLONLYMARK</p></body></html>"),
            ("MSGHTMLONLYMARK",),
        ),
        "msg-alternative": (
            _msg("Alt", body="plain MSGALTMARK", html=b"<p>html <b>MSGALTMARK</b> MSGRICHERMARK</p>"),
            ("MSGALTMARK", "MSGRICHERMARK"),
        ),
        "msg-codepage": (
            _msg("Ansi MSGCP1252ÉMARK", body="Ansi body é MSGANSIBODYMARK", codepage=1252),
            ("MSGCP1252ÉMARK", "MSGANSIBODYMARK"),
        ),
        "msg-rtf": (_msg("Rtf", rtf_compressed=compress(rtf_plain, compressed=True)), ("MSGRTFMARK", "MSGRTFEUROMARK")),
        "msg-rtf-html": (_msg("RtfHtml", rtf_compressed=compress(rtf_html, compressed=True)), ("MSGRTFHTMLMARK",)),
        "msg-attachments": (
            _msg(
                "Att",
                body="with attachments MSGBODYATTMARK",
                attachments=[
                    Attachment("notes.txt", b"attached MSGATTTXTMARK"),
                    Attachment("page.html", b"<p>attached MSGATTHTMLMARK</p>"),
                    Attachment("report.docx", docx_bytes("attached MSGATTDOCXMARK")),
                    Attachment("logo.png", PNG, mime_type="image/png", content_id="logo@x"),
                    Attachment("tool.exe", b"MZ\x90\x00"),
                ],
            ),
            ("MSGBODYATTMARK", "MSGATTTXTMARK", "MSGATTHTMLMARK", "MSGATTDOCXMARK"),
        ),
        "msg-nested": (
            _msg(
                "Outer",
                body="outer MSGOUTERMARK",
                attachments=[
                    Attachment(
                        "inner.msg", message=Message(subject="Inner MSGNESTEDSUBJMARK", body="inner MSGNESTEDBODYMARK")
                    )
                ],
            ),
            ("MSGOUTERMARK", "MSGNESTEDSUBJMARK", "MSGNESTEDBODYMARK"),
        ),
    }
    return [Sample(name, f"{name}.msg", build_msg(msg), must) for name, (msg, must) in messages.items()]


def samples() -> list[Sample]:
    return eml_samples() + msg_samples()


def big_eml(paragraphs: int) -> Sample:
    """A multipart/alternative message with ``paragraphs`` paragraphs in each copy and a text attachment."""
    text = "\n\n".join(f"Paragraph {i} of the long message, with words to index BIGMARK{i}." for i in range(paragraphs))
    msg = _eml("Big")
    msg.set_content(text)
    msg.add_alternative("".join(f"<p>{p}</p>" for p in text.split("\n\n")), subtype="html")
    msg.add_attachment(text.encode(), maintype="text", subtype="plain", filename="copy.txt")
    return Sample("eml-big", "big.eml", msg.as_bytes(), ("BIGMARK0",))


def big_msg(paragraphs: int) -> Sample:
    text = "\r\n\r\n".join(f"Paragraph {i} of the long message, with words BIGMARK{i}." for i in range(paragraphs))
    html = "".join(f"<p>{p}</p>" for p in text.split("\r\n\r\n")).encode()
    msg = _msg("Big", body=text, html=html, attachments=[Attachment("copy.txt", text.encode())])
    return Sample("msg-big", "big.msg", build_msg(msg), ("BIGMARK0",))
