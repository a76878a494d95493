"""Object storage adapter (the ``minio`` SDK against any S3 server); errors mapped to shared.domain.errors.

The SDK is synchronous: every call runs in a worker thread so the event loop (and the AMQP
heartbeats it serves) never blocks on storage I/O. :meth:`ObjectStore.put_stream` (the
``ObjectWriter`` port) bridges an async producer to the SDK's blocking multipart upload: the
producer writes into a bounded :class:`_Pipe`; a thread of its own runs the SDK, which reads
whole parts from it (and taps each piece, e.g. to hash it off the loop).
"""

from __future__ import annotations

import asyncio
import io
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO, cast

import urllib3
from minio import Minio
from minio.error import MinioException, S3Error

from shared.domain.errors import ObjectMissingError, StorageUnavailableError, UploadAbortedError
from shared.ports import ObjectStream, Tap
from shared.settings import CommonSettings


def _translate(exc: Exception, what: str) -> Exception:
    if isinstance(exc, S3Error) and exc.code in ("NoSuchKey", "NoSuchObject"):
        return ObjectMissingError(f"{what}: object not found in storage")
    return StorageUnavailableError(f"{what}: storage unavailable: {type(exc).__name__}: {exc}")


#: Kept-alive connections to the S3 server (concurrent calls beyond it open and drop one each).
POOL_CONNECTIONS = 64
_MIN_PART = 5 * 1024 * 1024  # S3's smallest multipart part; below it put_object sends one PUT
_ERRORS = (MinioException, urllib3.exceptions.HTTPError, OSError, ValueError)
#: Bytes queued between the producer and the storage thread (on top of the part being built).
PIPE_CAPACITY = 1024 * 1024


@dataclass(frozen=True)
class StorageConfig:
    """What the object store needs (``S3_ENDPOINT`` host:port, keys, ``S3_BUCKET``, ``S3_SECURE``
    for TLS, ``S3_TIMEOUT_S`` seconds per read); built by the composition root."""

    endpoint: str
    access_key: str
    secret_key: str
    bucket: str
    secure: bool
    timeout_s: float

    @classmethod
    def from_settings(cls, s: CommonSettings) -> StorageConfig:
        return cls(endpoint=s.s3_endpoint, access_key=s.s3_access_key.get_secret_value(),
                   secret_key=s.s3_secret_key.get_secret_value(), bucket=s.s3_bucket, secure=s.s3_secure,
                   timeout_s=s.s3_timeout_s)

    def __repr__(self) -> str:  # never the keys
        return f"StorageConfig(endpoint={self.endpoint!r}, bucket={self.bucket!r}, secure={self.secure})"


class ObjectStore:
    """One bucket of an S3 server."""

    def __init__(self, config: StorageConfig) -> None:
        timeout = config.timeout_s
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=min(5.0, timeout), read=timeout),
            retries=urllib3.Retry(total=1, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504]),
            maxsize=POOL_CONNECTIONS,
        )
        self._client = Minio(
            config.endpoint,
            access_key=config.access_key,
            secret_key=config.secret_key,
            secure=config.secure,
            http_client=http,
        )
        self.bucket = config.bucket

    async def ensure_bucket(self) -> None:
        """Create the bucket if missing. Raises StorageUnavailableError."""

        def _do() -> None:
            if not self._client.bucket_exists(self.bucket):
                try:
                    self._client.make_bucket(self.bucket)
                except S3Error as exc:
                    if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                        raise

        try:
            await asyncio.to_thread(_do)
        except _ERRORS as exc:
            raise _translate(exc, "ensure bucket") from exc

    async def put(self, key: str, stream: BinaryIO, length: int, part_size: int) -> None:
        """Store ``length`` bytes (``-1``: unknown, multipart with ``part_size`` bytes per part)."""
        try:
            await asyncio.to_thread(
                self._client.put_object, self.bucket, key, stream, length, part_size=part_size
            )
        except _ERRORS as exc:
            raise _translate(exc, f"put {key}") from exc

    async def get(self, key: str) -> bytes:
        """The whole object. Raises StorageUnavailableError or ObjectMissingError."""
        return await self._read(key, 0, 0, f"get {key}")

    async def remove(self, key: str) -> None:
        try:
            await asyncio.to_thread(self._client.remove_object, self.bucket, key)
        except _ERRORS as exc:
            raise _translate(exc, f"remove {key}") from exc

    async def exists(self, key: str) -> bool:
        try:
            await asyncio.to_thread(self._client.stat_object, self.bucket, key)
            return True
        except S3Error as exc:
            if exc.code in ("NoSuchKey", "NoSuchObject"):
                return False
            raise _translate(exc, f"stat {key}") from exc
        except _ERRORS as exc:
            raise _translate(exc, f"stat {key}") from exc

    def put_stream(self, key: str, *, content_type: str, part_size: int, tap: Tap) -> ObjectStream:
        """Start a multipart upload of unknown length fed by the returned stream's ``write``
        (``ObjectWriter`` port); ``tap`` sees every piece in the storage thread."""
        return StreamUpload(lambda stream: self.put_stream_blocking(key, stream, part_size, content_type),
                            tap, name=f"upload:{key}")

    async def put_bytes(self, key: str, data: bytes, *, content_type: str, tap: Tap) -> None:
        """Store ``data`` with one PUT request (``tap(data)`` first, in the same thread)."""

        def _do() -> None:
            tap(data)
            self.put_bytes_blocking(key, data, content_type)

        await asyncio.to_thread(_do)

    def put_stream_blocking(self, key: str, stream: BinaryIO, part_size: int, content_type: str) -> None:
        """Store a stream of unknown length (BLOCKING: call it from a thread of its own).

        Multipart upload in ``part_size`` parts, one at a time (``num_parallel_uploads=1``: the
        SDK's parallel mode queues parts without bound, so a slow store would buffer the body).
        At most one part is in memory. An exception raised by ``stream.read`` aborts the
        multipart upload (nothing is left) and propagates unchanged; storage errors raise
        StorageUnavailableError.
        """
        try:
            self._client.put_object(self.bucket, key, stream, -1, content_type=content_type,
                                    part_size=part_size, num_parallel_uploads=1)
        except _ERRORS as exc:
            raise _translate(exc, f"put {key}") from exc

    def put_bytes_blocking(self, key: str, data: bytes, content_type: str) -> None:
        """Store ``data`` with one PUT request (BLOCKING: call it from a thread). Raises
        StorageUnavailableError."""
        try:
            self._client.put_object(self.bucket, key, io.BytesIO(data), len(data), content_type=content_type,
                                    part_size=max(_MIN_PART, len(data)))
        except _ERRORS as exc:
            raise _translate(exc, f"put {key}") from exc

    async def get_range(self, key: str, offset: int, length: int) -> bytes:
        """``length`` bytes of an object from ``offset`` (fewer at its end). Raises
        StorageUnavailableError or ObjectMissingError."""
        return await self._read(key, offset, length, f"get {key} [{offset}:+{length}]")

    async def _read(self, key: str, offset: int, length: int, what: str) -> bytes:
        """``length`` 0 = to the end."""

        def _do() -> bytes:
            resp = self._client.get_object(self.bucket, key, offset=offset, length=length)
            try:
                return resp.read()
            finally:
                resp.close()
                resp.release_conn()

        try:
            return await asyncio.to_thread(_do)
        except _ERRORS as exc:
            raise _translate(exc, what) from exc

    async def list_page(self, prefix: str, start_after: str | None, limit: int) -> list[tuple[str, datetime]]:
        """Up to ``limit`` objects under ``prefix`` after ``start_after`` in key order, as
        ``(key, last_modified)`` (timezone-aware). Raises StorageUnavailableError."""

        def _do() -> list[tuple[str, datetime]]:
            out: list[tuple[str, datetime]] = []
            for o in self._client.list_objects(self.bucket, prefix=prefix, recursive=True,
                                               start_after=start_after or None):
                if o.object_name is None or o.last_modified is None or o.is_dir:
                    continue
                out.append((o.object_name, o.last_modified))
                if len(out) >= limit:
                    break
            return out

        try:
            return await asyncio.to_thread(_do)
        except _ERRORS as exc:
            raise _translate(exc, f"list {prefix}") from exc

    async def ping(self) -> None:
        """Raises StorageUnavailableError unless the bucket answers."""
        try:
            await asyncio.to_thread(self._client.bucket_exists, self.bucket)
        except _ERRORS as exc:
            raise _translate(exc, "ping") from exc


# ------------------------------------------------------------------ async producer → SDK thread


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


class _TapReader:
    """``read`` of the pipe, handing what it reads to ``tap`` (in the storage thread)."""

    def __init__(self, pipe: _Pipe, tap: Tap) -> None:
        self._pipe, self._tap = pipe, tap

    def read(self, size: int = -1) -> bytes:
        data = self._pipe.read(size)
        self._tap(data)
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


class StreamUpload:
    """:class:`~shared.ports.ObjectStream` over a blocking ``put(stream)`` (the SDK's
    ``put_object`` with length -1) running in a thread of its own, fed through a :class:`_Pipe`
    of :data:`PIPE_CAPACITY` bytes. ``stream.read`` raises ``UploadAbortedError`` after
    :meth:`abort`, which makes the SDK abort its multipart upload."""

    def __init__(self, put: Callable[[BinaryIO], None], tap: Tap, *, name: str,
                 capacity: int = PIPE_CAPACITY) -> None:
        pipe = self._pipe = _Pipe(capacity)
        reader = _TapReader(pipe, tap)

        def run() -> None:
            try:
                put(cast(BinaryIO, reader))
            finally:
                pipe.reader_done()

        self._done = _in_thread(run, name)

    async def write(self, data: bytes) -> None:
        if not await self._pipe.write(data):
            await self._done  # raises the storage thread's error
            raise StorageUnavailableError("upload ended early")

    async def close(self) -> None:
        self._pipe.close()
        await self._done

    async def abort(self) -> None:
        self._pipe.abort()
        try:
            await asyncio.shield(self._done)
        except BaseException:  # its error is not ours to report: the caller's reason is
            pass
