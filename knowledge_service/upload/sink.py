"""The ``file`` part of an upload → object storage (through the ``ObjectWriter`` port).

Types the first :data:`~knowledge_service.upload.sniff.HEAD_BYTES` (:func:`sniff.judge`: a 415
there touches no storage), then counts the bytes and holds up to :data:`SINGLE_PUT_MAX`: a file
that ends within it is stored with ONE PUT; a longer one is streamed (``ObjectWriter.
put_stream``: a multipart upload, one part in memory). The SHA-256 is computed by the writer's
tap, off the event loop. Stops on the first byte past the limit (413) or a NUL byte in text
(415); a ZIP or OLE2 file is typed whole (:func:`sniff.identify_package`): before its single PUT
when held, else once stored, from the first and last bytes kept (:data:`TAIL_BYTES`) and ranged
reads. Whatever is refused is aborted and removed: nothing is left behind.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import deque

from knowledge_service.upload import sniff
from shared.domain.containers import MAX_DIRECTORY_BYTES
from shared.domain.errors import (
    NeedBytesError,
    StorageUnavailableError,
    UnsupportedContentError,
    UnsupportedUploadError,
    UploadTooLargeError,
)
from shared.domain.formats import extension
from shared.domain.records import NewContent
from shared.domain.text_sniff import MAX_IMPLAUSIBLE_SHARE, control_bytes, nuls_by_offset, stray_nuls_allowed
from shared.ports import ObjectStream, ObjectWriter

log = logging.getLogger(__name__)

#: Files up to this size are held in memory and stored with one PUT request (a multipart upload
#: costs two more round trips: initiate and complete); larger ones are streamed.
SINGLE_PUT_MAX = 1024 * 1024
#: The end of a ZIP kept in memory to type it (its central directory is usually here).
TAIL_BYTES = 1024 * 1024
#: A directory outside the bytes kept is read from storage in ranges of at least this size.
FETCH_BYTES = 64 * 1024
#: At most this many ranged reads to type a stored package (an OLE2 directory: FAT, DIFAT and
#: directory sectors; a ZIP: its central directory).
MAX_FETCHES = 16


def too_large(limit: int) -> str:
    """The 413 detail (the same whether the header, the body or the file part gave it away)."""
    return f"upload exceeds the limit of {limit} bytes"


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


class FileSink:
    """The ``file`` part: sniff, count, hold (small) or stream (large) to storage, hash."""

    def __init__(self, writer: ObjectWriter, key: str, filename: str, limit: int, part_size: int) -> None:
        self._writer, self.key, self.filename = writer, key, filename
        self._limit, self._part_size = limit, part_size
        self.size = 0
        self._sha = hashlib.sha256()  # updated by the writer's tap only
        self._head = bytearray()
        self._first = b""  # the judged head, kept for a package's check
        self._held: list[bytes] = []  # sniffed bytes not yet sent (a single PUT if the file ends here)
        self._held_size = 0
        self._nuls = [0, 0, 0, 0]  # NUL bytes so far by offset modulo 4 (text that is not UTF-16/32: _count_nuls)
        self._controls = 0  # other control bytes so far (ibid.)
        self._tail = _Tail(TAIL_BYTES)
        self.verdict: sniff.Verdict | None = None
        self._stream: ObjectStream | None = None
        self._sent = False  # something may be in storage under the key

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
            self._count_nuls(data)
        await self._send(data)

    def _count_nuls(self, data: bytes) -> None:
        """Text (not UTF-16/32) may hold stray NULs (``text_sniff.stray_nuls_allowed``: few, or not
        in a UTF-16/32 pattern and at most ``MAX_STRAY_NUL_SHARE`` of the bytes so far); otherwise
        it is binary. ``data``: the bytes just received (already counted in ``self.size``)."""
        for k, n in enumerate(nuls_by_offset(data, self.size - len(data))):
            self._nuls[k] += n
        self._controls += control_bytes(data)
        nuls = sum(self._nuls)
        if not stray_nuls_allowed(self.size, self._nuls) or self._controls > MAX_IMPLAUSIBLE_SHARE * (self.size - nuls):
            assert self.verdict is not None
            raise UnsupportedUploadError(
                f"the content is binary ({nuls} NUL bytes and {self._controls} other control bytes in its first "
                f"{self.size} bytes), not {self.verdict.kind} text")

    async def _decide(self) -> None:
        head = bytes(self._head)
        self._head = bytearray()
        self._nuls = nuls_by_offset(head)
        self._controls = control_bytes(head)
        try:
            self.verdict = sniff.judge(extension(self.filename), head)
        except UnsupportedContentError as exc:
            raise UnsupportedUploadError(str(exc), error_code=exc.error_code) from exc
        if self.verdict.reject_nul:  # the head may be longer than what judge looked at
            self._count_nuls(b"")
        if self.verdict.check_package:
            self._first = head[:sniff.HEAD_BYTES]
        await self._send(head)

    async def _send(self, data: bytes) -> None:
        assert self.verdict is not None
        if self.verdict.check_package:
            self._tail.add(data)
        if self._stream is None:
            self._held.append(data)
            self._held_size += len(data)
            if self._held_size <= SINGLE_PUT_MAX:
                return
            self._sent = True
            self._stream = self._writer.put_stream(self.key, content_type=self.verdict.mime,
                                                   part_size=self._part_size, tap=self._sha.update)
            held, self._held, self._held_size = self._held, [], 0
            for piece in held:
                await self._stream.write(piece)
            return
        await self._stream.write(data)

    async def finish(self) -> NewContent:
        if self.verdict is None:
            await self._decide()
        verdict = self.verdict
        assert verdict is not None
        if self._stream is None:  # the whole file is held: typed, then one PUT
            data = b"".join(self._held)
            self._held, self._held_size = [], 0
            if verdict.check_package:
                verdict = await self._identify(verdict, [(0, data)])
            self._sent = True
            await self._writer.put_bytes(self.key, data, content_type=verdict.mime, tap=self._sha.update)
        else:
            await self._stream.close()
            if verdict.check_package:
                tail = self._tail.value()
                verdict = await self._identify(verdict, [(0, self._first), (self.size - len(tail), tail)])
        return NewContent(self.filename, verdict.mime, self.size, self._sha.hexdigest(), self.key)

    async def _identify(self, verdict: sniff.Verdict, pieces: list[tuple[int, bytes]]) -> sniff.Verdict:
        """:func:`sniff.identify_package`, reading what it asks for from storage. Raises
        UnsupportedUploadError."""
        for _ in range(MAX_FETCHES):
            try:
                return await asyncio.to_thread(sniff.identify_package, verdict, self.size, pieces)
            except UnsupportedContentError as exc:
                raise UnsupportedUploadError(str(exc), error_code=exc.error_code) from exc
            except NeedBytesError as need:
                fetched = sum(len(piece) for _, piece in pieces)
                if need.length > MAX_DIRECTORY_BYTES or fetched > 2 * MAX_DIRECTORY_BYTES:
                    break
                length = min(max(need.length, FETCH_BYTES), self.size - need.offset)
                pieces.append((need.offset, await self._writer.get_range(self.key, need.offset, length)))
        raise UnsupportedUploadError("the file's directory (ZIP or OLE2) could not be read within the limits")

    async def discard(self) -> None:
        """Abort the storage upload (if started) and remove whatever it stored."""
        self._held = []
        if self._stream is not None:
            await self._stream.abort()
        if not self._sent:
            return  # nothing was sent to storage
        try:
            await self._writer.remove(self.key)
        except StorageUnavailableError:
            log.warning("rejected upload not removed from storage", extra={"object_key": self.key})
