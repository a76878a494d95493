"""The S3 adapter's bridge from an async producer to the SDK's blocking multipart upload
(``shared.adapters.s3.StreamUpload``, behind ``ObjectWriter.put_stream``), with a blocking ``put``
that reads like the minio SDK (no network)."""

from __future__ import annotations

import hashlib
import threading
from typing import BinaryIO

import pytest

from shared.adapters.s3 import StreamUpload
from shared.domain.errors import StorageUnavailableError, UploadAbortedError


class SdkLike:
    """``put(stream)`` reading ``part_size + 1`` bytes at a time, as ``put_object(length=-1)`` does."""

    def __init__(self, part_size: int, fail_after: int | None = None) -> None:
        self.part_size, self.fail_after = part_size, fail_after
        self.reads: list[int] = []
        self.stored: bytes | None = None
        self.aborted = threading.Event()

    def __call__(self, stream: BinaryIO) -> None:
        data = bytearray()
        try:
            while piece := stream.read(self.part_size + 1):
                self.reads.append(len(piece))
                data += piece
                if self.fail_after is not None and len(data) > self.fail_after:
                    raise StorageUnavailableError("put: storage went away")
        except UploadAbortedError:
            self.aborted.set()
            raise
        self.stored = bytes(data)


async def test_the_sdk_reads_whole_parts_and_the_tap_sees_every_byte() -> None:
    sdk, sha = SdkLike(part_size=2**20), hashlib.sha256()
    upload = StreamUpload(sdk, sha.update, name="t", capacity=2**20)
    data = b"0123456789abcdef" * (2 * 2**20 // 16) + b"tail"
    for i in range(0, len(data), 65536):
        await upload.write(data[i:i + 65536])
    await upload.close()
    assert sdk.stored == data and sha.hexdigest() == hashlib.sha256(data).hexdigest()
    assert sdk.reads[:2] == [2**20 + 1, 2**20 + 1]  # a part per read, not 64 KiB pieces


async def test_abort_makes_the_sdk_abort_and_never_raises() -> None:
    sdk = SdkLike(part_size=1024)
    upload = StreamUpload(sdk, lambda _: None, name="t", capacity=4096)
    await upload.write(b"x" * 100)
    await upload.abort()
    assert sdk.aborted.is_set() and sdk.stored is None


async def test_a_storage_error_surfaces_on_write_or_close() -> None:
    sdk = SdkLike(part_size=1024, fail_after=10)
    upload = StreamUpload(sdk, lambda _: None, name="t", capacity=4096)
    with pytest.raises(StorageUnavailableError):
        for _ in range(100):
            await upload.write(b"y" * 4096)
        await upload.close()
