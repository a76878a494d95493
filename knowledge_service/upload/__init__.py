"""Uploads: ``multipart/form-data`` → typed by content → object storage, never whole in memory
or on disk.

| module         | does                                                                    |
|----------------|-------------------------------------------------------------------------|
| ``multipart``  | the request stream → the ``file`` part (:func:`receive_upload`)         |
| ``sniff``      | the type by name and content (pure; the registry's rules)               |
| ``filenames``  | the client's file name as display metadata (pure)                       |
| ``sink``       | the part → storage through the ``ObjectWriter`` port; hash; checks      |
| ``openapi``    | what the upload routes document                                         |
"""

from __future__ import annotations

from knowledge_service.upload.multipart import FILE_FIELD, MULTIPART_OVERHEAD, receive_upload
from knowledge_service.upload.openapi import OPENAPI_BODY, OPENAPI_ERRORS, OPENAPI_UNAVAILABLE
from knowledge_service.upload.sink import SINGLE_PUT_MAX, TAIL_BYTES, too_large

__all__ = [
    "FILE_FIELD",
    "MULTIPART_OVERHEAD",
    "OPENAPI_BODY",
    "OPENAPI_ERRORS",
    "OPENAPI_UNAVAILABLE",
    "SINGLE_PUT_MAX",
    "TAIL_BYTES",
    "receive_upload",
    "too_large",
]
