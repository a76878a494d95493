"""Streaming upload: ``multipart/form-data`` request body → object storage, never whole in memory
or on disk.

FastAPI's ``UploadFile`` spools the whole body to a temp file before the route runs, so the
upload routes take the raw :class:`~starlette.requests.Request` instead and this module:

1. answers 413 at once when ``Content-Length`` exceeds the limit (+ :data:`MULTIPART_OVERHEAD`);
2. parses ``request.stream()`` incrementally with python-multipart's ``MultipartParser``;
3. buffers the first :data:`~knowledge_service.sniff.HEAD_BYTES` of the ``file`` part and types
   them (:func:`knowledge_service.sniff.judge`) — a 415 here touches no storage at all;
4. then counts the bytes and holds up to :data:`SINGLE_PUT_MAX`: a file that ends within it is
   stored with ONE S3 PUT (hashed in the same thread); a longer one goes through a bounded
   :class:`_Pipe` to a storage thread running an S3 multipart upload (one ``upload_part_size``
   part in memory), which also hashes (SHA-256) what it reads — neither hash runs on the loop;
5. stops reading on the first byte past the limit (413) or a NUL byte in text (415), aborts the
   multipart upload and removes the key, so nothing is left behind;
6. for a ZIP, checks its central directory lists ``word/document.xml`` once stored (from the
   last :data:`TAIL_BYTES` it kept, or a ranged read), and removes the object otherwise (415).

Object keys are generated (``kb/{kb_id}/{uuid}``); the client's file name is metadata only.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from knowledge_service import sniff
from knowledge_service.filenames import clean_filename, decode_form_filename
from shared.adapters.s3 import ObjectStore
from shared.doc_types import extension
from shared.domain.errors import (
    MalformedUploadError,
    MissingFileError,
    NeedBytesError,
    StorageUnavailableError,
    UnsupportedContentError,
    UnsupportedUploadError,
    UploadAbortedError,
    UploadTooLargeError,
)

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

log = logging.getLogger(__name__)

#: Allowance for boundaries and part headers on top of the file size limit (the whole body is
#: capped at ``limit + MULTIPART_OVERHEAD``; the ``file`` part alone at ``limit``).
MULTIPART_OVERHEAD = 64 * 1024
#: Bytes queued between the request and the storage thread (on top of the part being built).
PIPE_CAPACITY = 1024 * 1024
#: Files up to this size are held in memory and stored with one PUT request (a multipart upload
#: costs two more round trips: initiate and complete); larger ones are streamed.
SINGLE_PUT_MAX = 1024 * 1024
#: The end of a ZIP kept in memory for the DOCX check (its central directory is usually here).
TAIL_BYTES = 1024 * 1024
#: Per part header line; generous so long (percent-escaped) file names are accepted and capped.
MAX_PART_HEADER_BYTES = 16 * 1024
FILE_FIELD = "file"


#: The request body the upload routes document (they read the raw stream, so FastAPI cannot
#: derive it from their parameters).
OPENAPI_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": [FILE_FIELD],
                    "properties": {
                        FILE_FIELD: {
                            "type": "string", "format": "binary",
                            "description": "pdf, docx, html, md or txt (typed by content); at most MAX_UPLOAD_BYTES",
                        },
                    },
                }
            }
        },
    }
}
_ERROR_BODY = {"application/json": {"schema": {
    "type": "object", "required": ["detail"], "properties": {"detail": {"type": "string"}},
}}}
#: The refusals the upload routes document (``{"detail": "..."}``).
OPENAPI_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "malformed multipart body", "content": _ERROR_BODY},
    413: {"description": "file larger than MAX_UPLOAD_BYTES (nothing stored)", "content": _ERROR_BODY},
    415: {"description": "type not allowed, or content disagrees with the name (nothing stored)",
          "content": _ERROR_BODY},
    429: {"description": "too many tasks in flight for this user; see Retry-After", "content": _ERROR_BODY},
    503: {"description": "object storage or database unavailable (nothing kept; for the database, see Retry-After)",
          "content": _ERROR_BODY},
}
#: What every other ``/api/v1`` route may answer when the database cannot be reached.
OPENAPI_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"description": "database unavailable; see Retry-After", "content": _ERROR_BODY},
}


def too_large(limit: int) -> str:
    """The 413 detail (the same whether the header, the body or the file part gave it away)."""
    return f"upload exceeds the limit of {limit} bytes"


@dataclass(frozen=True)
class ReceivedFile:
    """A stored upload: object key, size, SHA-256, cleaned name, detected MIME type."""

    key: str
    size_bytes: int
    sha256: str
    filename: str
    content_type: str


# ------------------------------------------------------------------ request side → storage thread


class _Pipe:
    """Bytes from the event loop to one blocking reader thread, at most ``capacity`` queued.

    ``write`` (event loop) waits for room without blocking the loop; ``read`` (thread) blocks
    until it has ``size`` bytes or the end, so the SDK gets a whole part in one call.
    """

    def __init__(self, capacity: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._capacity = capacity
        self._cond = threading.Condition()
        self._chunks: deque[bytes] = deque()
        self._queued = 0
        self._eof = False
        self._aborted = False
        self._reader_gone = False
        self._room = asyncio.Event()

    async def write(self, data: bytes) -> bool:
        """Queue ``data``; False if the reader has stopped (its error is the upload's result)."""
        while True:
            with self._cond:
                if self._reader_gone:
                    return False
                if self._queued < self._capacity:
                    self._chunks.append(data)
                    self._queued += len(data)
                    self._cond.notify_all()
                    return True
                self._room.clear()
            await self._room.wait()

    def close(self) -> None:
        """End of data: the reader sees EOF once the queue is drained."""
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def abort(self) -> None:
        """The reader's next ``read`` raises :class:`UploadAbortedError`."""
        with self._cond:
            self._aborted = True
            self._chunks.clear()
            self._queued = 0
            self._cond.notify_all()

    def _signal_room(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._room.set)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    def reader_done(self) -> None:
        """Called by the reader thread when it stops, whatever the reason."""
        with self._cond:
            self._reader_gone = True
        self._signal_room()

    def read(self, size: int = -1) -> bytes:
        out = bytearray()
        with self._cond:
            while size < 0 or len(out) < size:
                if self._aborted:
                    raise UploadAbortedError("upload abandoned by the request")
                if not self._chunks:
                    if self._eof:
                        break
                    self._cond.wait()
                    continue
                chunk = self._chunks.popleft()
                want = len(chunk) if size < 0 else min(len(chunk), size - len(out))
                if want < len(chunk):
                    self._chunks.appendleft(chunk[want:])
                out += chunk[:want]
                self._queued -= want
                self._signal_room()
        return bytes(out)


class _HashingReader:
    """``read`` of the pipe, hashing what it hands out (in the storage thread, off the loop)."""

    def __init__(self, pipe: _Pipe, sha: Any) -> None:
        self._pipe, self._sha = pipe, sha

    def read(self, size: int = -1) -> bytes:
        data = self._pipe.read(size)
        self._sha.update(data)
        return data


def _in_thread(fn: Callable[[], None], name: str) -> asyncio.Future[None]:
    """Run ``fn`` in a thread of its own (not the default executor: a slow client would hold
    one of its few threads for the whole upload and starve every other storage call)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(exc: BaseException | None) -> None:
        if done.done():
            return
        if exc is None:
            done.set_result(None)
        else:
            done.set_exception(exc)

    def run() -> None:
        error: BaseException | None = None
        try:
            fn()
        except BaseException as exc:  # handed to the awaiting coroutine
            error = exc
        try:
            loop.call_soon_threadsafe(settle, error)
        except RuntimeError:  # loop closed (shutdown)
            pass

    threading.Thread(target=run, name=name, daemon=True).start()
    return done


class _Tail:
    """The last ``limit`` bytes seen (whole chunks, trimmed from the front)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0

    def add(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        while self._chunks and self._size - len(self._chunks[0]) >= self._limit:
            self._size -= len(self._chunks.popleft())

    def value(self) -> bytes:
        return b"".join(self._chunks)[-self._limit:]


class _FileSink:
    """The ``file`` part: sniff, count, hold (small) or stream (large) to storage, hash."""

    def __init__(self, store: ObjectStore, key: str, filename: str, limit: int, part_size: int) -> None:
        self._store, self.key, self.filename = store, key, filename
        self._limit, self._part_size = limit, part_size
        self.size = 0
        self._sha = hashlib.sha256()  # updated by the storage thread only
        self._head = bytearray()
        self._held: list[bytes] = []  # sniffed bytes not yet sent (a single PUT if the file ends here)
        self._held_size = 0
        self._nuls = 0  # NUL bytes seen so far (text that is not UTF-16/32: see _count_nuls)
        self._tail = _Tail(TAIL_BYTES)
        self.verdict: sniff.Verdict | None = None
        self._pipe: _Pipe | None = None
        self._upload: asyncio.Future[None] | None = None

    async def feed(self, data: bytes) -> None:
        if self.size + len(data) > self._limit:
            raise UploadTooLargeError(too_large(self._limit))
        self.size += len(data)
        if self.verdict is None:
            self._head += data
            if len(self._head) >= sniff.HEAD_BYTES:
                await self._decide()
            return
        if self.verdict.reject_nul:
            self._count_nuls(data, self.verdict.kind)
        await self._send(data)

    def _count_nuls(self, data: bytes, kind: str) -> None:
        """Text (not UTF-16/32) may hold a few stray NULs; more than ``stray_nul_limit`` of the
        bytes so far make it binary."""
        self._nuls += data.count(0)
        if self._nuls > sniff.stray_nul_limit(self.size):
            raise UnsupportedUploadError(
                f"the content is binary ({self._nuls} NUL bytes in its first {self.size} bytes), not {kind} text")

    async def _decide(self) -> None:
        head = bytes(self._head)
        self._head = bytearray()
        self._nuls = head.count(0)
        try:
            self.verdict = sniff.judge(extension(self.filename), head)
        except UnsupportedContentError as exc:
            raise UnsupportedUploadError(str(exc)) from exc
        if self.verdict.reject_nul:  # the head may be longer than what judge looked at
            self._count_nuls(b"", self.verdict.kind)
        await self._send(head)

    def _start_stream(self) -> None:
        assert self.verdict is not None
        pipe = self._pipe = _Pipe(PIPE_CAPACITY)
        reader, mime = _HashingReader(pipe, self._sha), self.verdict.mime

        def upload() -> None:
            try:
                self._store.put_stream_blocking(self.key, cast(BinaryIO, reader), self._part_size, mime)
            finally:
                pipe.reader_done()

        self._upload = _in_thread(upload, f"upload:{self.key}")

    async def _send(self, data: bytes) -> None:
        assert self.verdict is not None
        if self.verdict.check_docx:
            self._tail.add(data)
        if self._pipe is None:
            self._held.append(data)
            self._held_size += len(data)
            if self._held_size <= SINGLE_PUT_MAX:
                return
            self._start_stream()
            held, self._held, self._held_size = self._held, [], 0
            for piece in held:
                await self._write(piece)
            return
        await self._write(data)

    async def _write(self, data: bytes) -> None:
        assert self._pipe is not None and self._upload is not None
        if not await self._pipe.write(data):
            await self._upload  # raises the storage thread's error
            raise StorageUnavailableError(f"put {self.key}: upload ended early")

    async def finish(self) -> ReceivedFile:
        if self.verdict is None:
            await self._decide()
        assert self.verdict is not None
        if self._pipe is None:  # the whole file is held: one PUT
            data = b"".join(self._held)
            self._held, self._held_size = [], 0
            mime, sha = self.verdict.mime, self._sha

            def put() -> None:
                sha.update(data)
                self._store.put_bytes_blocking(self.key, data, mime)

            # the default executor: one short call (a dedicated thread costs its start-up)
            self._upload = asyncio.ensure_future(asyncio.to_thread(put))
        else:
            self._pipe.close()
        assert self._upload is not None
        await self._upload
        if self.verdict.check_docx and not await self._is_docx():
            raise UnsupportedUploadError(
                f"the content is a ZIP archive without {sniff.DOCX_MAIN_PART}, not a DOCX document")
        return ReceivedFile(self.key, self.size, self._sha.hexdigest(), self.filename, self.verdict.mime)

    async def _is_docx(self) -> bool:
        tail = self._tail.value()
        for _ in range(2):
            try:
                return await asyncio.to_thread(sniff.docx_has_document, self.size, tail)
            except NeedBytesError as need:
                if self.size - need.offset > sniff.MAX_ZIP_DIRECTORY_BYTES:
                    return False
                tail = await self._store.get_range(self.key, need.offset, self.size - need.offset)
        return False

    async def discard(self) -> None:
        """Abort the storage upload (if started) and remove whatever it stored."""
        self._held = []
        if self._upload is None:
            return  # nothing was sent to storage
        if self._pipe is not None:
            self._pipe.abort()
        try:
            await asyncio.shield(self._upload)
        except BaseException:  # its error is not ours to report: the rejection is
            pass
        try:
            await self._store.remove(self.key)
        except StorageUnavailableError:
            log.warning("rejected upload not removed from storage", extra={"object_key": self.key})


# ------------------------------------------------------------------ multipart


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


async def receive_upload(request: Request, store: ObjectStore, *, kb_id: int, limit: int,
                         part_size: int) -> ReceivedFile:
    """Stream the ``file`` part of a multipart request into storage under a new key.

    Raises :class:`UploadRejectedError` subclasses (400/413/415/422) and StorageUnavailableError;
    nothing is left in storage when it raises.
    """
    boundary = _boundary(request.headers.get("content-type"))
    _check_declared_length(request.headers.get("content-length"), limit + MULTIPART_OVERHEAD, limit)
    receiver = _Receiver(store, boundary, kb_id=kb_id, limit=limit, part_size=part_size)
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

    def __init__(self, store: ObjectStore, boundary: bytes, *, kb_id: int, limit: int, part_size: int) -> None:
        self._store, self._kb_id, self._limit, self._part_size = store, kb_id, limit, part_size
        self._form = _Form()
        self._parser = MultipartParser(boundary, self._form.callbacks(), max_header_size=MAX_PART_HEADER_BYTES)
        self._sink: _FileSink | None = None
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
            self._sink = _FileSink(self._store, key, self._form.filename, self._limit, self._part_size)
        for piece in self._form.take():
            assert self._sink is not None
            await self._sink.feed(piece)

    async def finish(self) -> ReceivedFile:
        if not self._form.ended:
            raise MalformedUploadError("incomplete multipart body (no closing boundary)")
        if self._sink is None:
            raise MissingFileError(FILE_FIELD)
        return await self._sink.finish()

    async def discard(self) -> None:
        if self._sink is not None:
            await self._sink.discard()
