"""OLE compound files the worker is handed: legacy .doc/.xls/.ppt and password-protected Office files.

None is read: each ends with the error ``shared.domain.ole.refusal`` chooses, whose message names
the format to save as (``unsupported_type``) or says the file is password-protected
(``encrypted``). Why refuse rather than convert with LibreOffice: bench/RESULTS.md, "legacy".
An Outlook ``.msg`` is also an OLE file; it is the e-mail reader's, so here it is only named.
"""

from __future__ import annotations

from shared.domain.errors import UnsupportedTypeError
from shared.domain.ole import refusal
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Never returns: raises UnsupportedTypeError, EncryptedDocumentError or CorruptDocumentError."""
    del limits  # the directory read is bounded by ``data`` itself
    error = refusal(data)
    if error is None:
        raise UnsupportedTypeError("this is an Outlook message (.msg): upload it with the .msg extension")
    raise error
