"""The readers' wing: one package per family of formats, each reader a module exposing
``read(data: bytes, limits: ParseLimits) -> ParsedDocument``.

| family      | readers: short name (→ module)            | beside them                              |
|-------------|-------------------------------------------|------------------------------------------|
| ``pdf/``    | ``pdf`` (→ ``reader``)                    | ``layout``, ``annotations``, ``hyphens`` |
| ``office/`` | ``docx``, ``pptx``, ``xlsx``              | ``numbering``, ``equations`` (OMML),     |
|             |                                           | ``ooxml`` (parts they share)             |
| ``legacy/`` | ``doc``, ``xls``, ``ppt`` (Office         | ``_ole`` (open, kind check),             |
|             | 97-2003 compound files)                   | ``_wordstyles`` (Word heading styles)    |
| ``odf/``    | ``odt``, ``odp``, ``ods``                 | ``common`` (namespaces, text, tables)    |
| ``web/``    | ``html``, ``markdown``, ``epub``          | ``tree`` (the HTML nesting pre-check)    |
| ``plain/``  | ``text``, ``csv``, ``jsondoc``, ``xml``,  |                                          |
|             | ``rtf``                                   |                                          |
| ``mail/``   | ``eml``, ``msg``                          | ``common`` (header, body, attachments)   |
| ``image/``  | ``image`` (→ ``reader``: OCR)             |                                          |
| ``markup/`` | ``rst``, ``org``, ``asciidoc``, ``latex``,| ``_outline`` (headings → sections)       |
|             | ``code``, ``config``, ``log``             |                                          |
| ``archive/``| ``archive`` (→ ``reader``: refuses; an    | ``plan`` (an archive's members, decided  |
|             | upload is expanded by the worker)         | before inflating)                        |
| ``_shared/``| private helpers of several families       | ``xmlzip``, ``tables``, ``slides``,      |
|             |                                           | ``pictures``                             |

The registry (``shared.domain.formats``) names a format's reader by its short name;
``task_service.pipeline.parse`` resolves it here (:data:`FAMILIES`) and imports the module
only when a document of that format comes. A reader whose module sets ``TAKES_ATTACHMENTS``
(the mail family) gets a third argument, the attachment reader the dispatch builds with the
configured limits (``readers.mail.common.Attachments``). Adding a format: a module in its
family, one line in :data:`FAMILIES`, one registry entry, tests.
"""

from __future__ import annotations

__all__ = ["FAMILIES", "module_of"]

_HERE = "task_service.pipeline.readers"

#: A reader's short name (``Format.reader``) → the module, relative to this package.
FAMILIES: dict[str, str] = {
    "pdf": "pdf.reader",
    "docx": "office.docx",
    "pptx": "office.pptx",
    "xlsx": "office.xlsx",
    "doc": "legacy.doc",
    "xls": "legacy.xls",
    "ppt": "legacy.ppt",
    "odt": "odf.odt",
    "odp": "odf.odp",
    "ods": "odf.ods",
    "html": "web.html",
    "markdown": "web.markdown",
    "epub": "web.epub",
    "text": "plain.text",
    "csv": "plain.csv",
    "jsondoc": "plain.jsondoc",
    "xml": "plain.xml",
    "rtf": "plain.rtf",
    "eml": "mail.eml",
    "msg": "mail.msg",
    "image": "image.reader",
    "rst": "markup.rst",
    "org": "markup.org",
    "asciidoc": "markup.asciidoc",
    "latex": "markup.latex",
    "config": "markup.config",
    "log": "markup.log",
    "code": "markup.code",
    "archive": "archive.reader",
}


def module_of(name: str) -> str | None:
    """The dotted module path of the reader named ``name``; None when no reader has that name."""
    relative = FAMILIES.get(name)
    return None if relative is None else f"{_HERE}.{relative}"
