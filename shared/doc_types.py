"""Document types the service accepts, shared by the API (typing uploads) and the worker
(picking a parser) — pure, no I/O.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Literal

Kind = Literal["pdf", "docx", "html", "md", "txt"]

#: Mirror of ``task_service.pipeline.parse.SUPPORTED_EXTENSIONS`` (a unit test keeps them equal;
#: not imported, so the API does not load the parsers).
ALLOWED_EXTENSIONS: dict[str, Kind] = {
    "pdf": "pdf", "docx": "docx", "html": "html", "htm": "html", "md": "md", "markdown": "md", "txt": "txt",
}
MIME_TYPES: dict[Kind, str] = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "html": "text/html",
    "md": "text/markdown",
    "txt": "text/plain",
}
_KIND_BY_MIME: dict[str, Kind] = {mime: kind for kind, mime in MIME_TYPES.items()}
#: The canonical extension of each kind (what the worker's parser keys on).
_EXTENSION: dict[Kind, str] = {"pdf": "pdf", "docx": "docx", "html": "html", "md": "md", "txt": "txt"}


def extension(name: str) -> str:
    """The lower-case extension the worker's parser would see (``document_kind``'s rule:
    ``PurePosixPath`` suffix after ``\\`` → ``/``), without the dot; ``""`` if none."""
    return PurePosixPath(name.replace("\\", "/")).suffix.lower().lstrip(".")


def parser_filename(filename: str, content_type: str | None) -> str:
    """The name to hand the worker's parser (which picks the reader by extension): the stored
    name when its extension is an allowed one (the API checked that it agrees with the content),
    else ``document.<ext>`` for the type detected at upload (``content_type``). Older rows whose
    content type is not one of ours keep their name (→ ``unsupported_type`` as before).
    """
    if extension(filename) in ALLOWED_EXTENSIONS:
        return filename
    kind = _KIND_BY_MIME.get((content_type or "").split(";", 1)[0].strip().lower())
    return filename if kind is None else f"document.{_EXTENSION[kind]}"
