"""Streaming ``multipart/form-data`` → the ``file`` part's :class:`~knowledge_service.upload.sink.FileSink`.

FastAPI's ``UploadFile`` spools the whole body to a temp file before the route runs, so the
upload routes take the raw :class:`~starlette.requests.Request` instead and this module:

1. answers 413 at once when ``Content-Length`` exceeds the limit (+ :data:`MULTIPART_OVERHEAD`);
2. parses ``request.stream()`` incrementally with python-multipart's ``MultipartParser``;
3. feeds the ``file`` part's pieces to the sink (typing, storage, hashing: ``sink.py``);
4. stops on a malformed body, a second ``file`` part or the byte past the limit, and leaves
   nothing in storage.

Object keys are generated (``kb/{kb_id}/{uuid}``); the client's file name is metadata only.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from knowledge_service.upload.filenames import clean_filename, decode_form_filename
from knowledge_service.upload.sink import FileSink, too_large
from shared.domain.errors import MalformedUploadError, MissingFileError, UnsupportedUploadError, UploadTooLargeError
from shared.domain.records import NewContent
from shared.ports import ObjectWriter

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

#: Allowance for boundaries and part headers on top of the file size limit (the whole body is
#: capped at ``limit + MULTIPART_OVERHEAD``; the ``file`` part alone at ``limit``).
MULTIPART_OVERHEAD = 64 * 1024
#: Per part header line; generous so long (percent-escaped) file names are accepted and capped.
MAX_PART_HEADER_BYTES = 16 * 1024
FILE_FIELD = "file"


class _Form:
    """python-multipart callbacks: find the ``file`` part; collect its data pieces."""

    def __init__(self) -> None:
        self._field = bytearray()
        self._value = bytearray()
        self._headers: dict[bytes, bytes] = {}
        self._in_file = False
        self.file_parts = 0
        self.filename: str | None = None
        self.pieces: list[bytes] = []
        self.ended = False

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self._part_begin, "on_header_field": self._header_field,
            "on_header_value": self._header_value, "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished, "on_part_data": self._part_data,
            "on_part_end": self._part_end, "on_end": self._end,
        }

    def _part_begin(self) -> None:
        self._headers = {}
        self._in_file = False

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._field += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def _header_end(self) -> None:
        self._headers[bytes(self._field).strip().lower()] = bytes(self._value).strip()
        self._field, self._value = bytearray(), bytearray()

    def _headers_finished(self) -> None:
        _, params = parse_options_header(self._headers.get(b"content-disposition", b""))
        if params.get(b"name") != FILE_FIELD.encode():
            return
        self.file_parts += 1
        self._in_file = self.file_parts == 1
        if self._in_file:
            raw = params.get(b"filename")
            self.filename = clean_filename(None if raw is None else decode_form_filename(raw))

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._in_file:
            self.pieces.append(data[start:end])

    def _part_end(self) -> None:
        self._in_file = False

    def _end(self) -> None:
        self.ended = True

    def take(self) -> list[bytes]:
        pieces, self.pieces = self.pieces, []
        return pieces


def _boundary(content_type: str | None) -> bytes:
    media, params = parse_options_header(content_type or "")
    if media != b"multipart/form-data":
        raise UnsupportedUploadError("the request body must be multipart/form-data with a 'file' part")
    boundary = params.get(b"boundary", b"")
    if not 0 < len(boundary) <= 200:
        raise MalformedUploadError("multipart/form-data without a valid boundary")
    return boundary


def _check_declared_length(header: str | None, body_limit: int, limit: int) -> None:
    if header is not None and header.strip().isdigit() and int(header) > body_limit:
        raise UploadTooLargeError(too_large(limit))


async def receive_upload(request: Request, writer: ObjectWriter, *, kb_id: int, limit: int,
                         part_size: int) -> NewContent:
    """Stream the ``file`` part of a multipart request into storage under a new key.

    Raises :class:`UploadRejectedError` subclasses (400/413/415/422) and StorageUnavailableError;
    nothing is left in storage when it raises.
    """
    boundary = _boundary(request.headers.get("content-type"))
    _check_declared_length(request.headers.get("content-length"), limit + MULTIPART_OVERHEAD, limit)
    receiver = _Receiver(writer, boundary, kb_id=kb_id, limit=limit, part_size=part_size)
    try:
        async for chunk in request.stream():
            await receiver.write(chunk)
        return await receiver.finish()
    except ClientDisconnect as exc:
        await receiver.discard()
        raise MalformedUploadError("the client disconnected during the upload") from exc
    except BaseException:
        await receiver.discard()
        raise


class _Receiver:
    """Request body chunks → multipart parser → the ``file`` part's sink."""

    def __init__(self, writer: ObjectWriter, boundary: bytes, *, kb_id: int, limit: int, part_size: int) -> None:
        self._writer, self._kb_id, self._limit, self._part_size = writer, kb_id, limit, part_size
        self._form = _Form()
        self._parser = MultipartParser(boundary, self._form.callbacks(), max_header_size=MAX_PART_HEADER_BYTES)
        self._sink: FileSink | None = None
        self._received = 0

    async def write(self, chunk: bytes) -> None:
        self._received += len(chunk)
        if self._received > self._limit + MULTIPART_OVERHEAD:
            raise UploadTooLargeError(too_large(self._limit))
        try:
            self._parser.write(chunk)
        except FormParserError as exc:
            raise MalformedUploadError(f"malformed multipart body: {exc}") from exc
        if self._form.file_parts > 1:
            raise MalformedUploadError(f"more than one '{FILE_FIELD}' part")
        if self._sink is None and self._form.filename is not None:
            key = f"kb/{self._kb_id}/{uuid.uuid4()}"
            self._sink = FileSink(self._writer, key, self._form.filename, self._limit, self._part_size)
        for piece in self._form.take():
            assert self._sink is not None
            await self._sink.feed(piece)

    async def finish(self) -> NewContent:
        if not self._form.ended:
            raise MalformedUploadError("incomplete multipart body (no closing boundary)")
        if self._sink is None:
            raise MissingFileError(FILE_FIELD)
        return await self._sink.finish()

    async def discard(self) -> None:
        if self._sink is not None:
            await self._sink.discard()
