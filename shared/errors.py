"""Exception tree for the indexing pipeline; the class encodes the retry policy.

::

    IndexingError                      (base; never raised directly)
    ├── TransientError                 retry inside the task with backoff, then FAILED
    │   ├── StorageUnavailableError    storage_unavailable   object store unreachable / timed out
    │   ├── DatabaseUnavailableError   database_unavailable  PostgreSQL connection lost / timed out
    │   ├── BrokerUnavailableError     broker_unavailable    RabbitMQ unreachable / publish not confirmed
    │   └── EmbeddingUnavailableError  embedding_unavailable embedding endpoint refused / 5xx
    │       └── EmbeddingTimeoutError  embedding_timeout     embedding request timed out
    ├── PermanentError                 FAILED at once, never retried
    │   ├── UnsupportedTypeError       unsupported_type
    │   ├── PdfEncryptedError          pdf_encrypted
    │   ├── CorruptDocumentError       corrupt_document
    │   ├── NoTextError                no_text               zero chunks after parsing
    │   ├── UndecodableTextError       undecodable_text
    │   ├── OversizeError              oversize
    │   └── ParseLimitError            parse_limit           sandbox limit hit (memory, CPU, time, bomb)
    └── FencedOut                      not an error of the document: our claim is stale
        ├── StaleGenerationError       stale_generation      a newer generation exists
        └── LockLostError              lock_lost             the Redis lock could not be renewed

    ServiceError                       a use case refuses a request (the API maps it to HTTP)
    ├── NotFoundError                  the caller owns no such object                  (404)
    │   ├── DocumentNotFound
    │   ├── TaskNotFound
    │   └── PendingVersionNotFound     the document has no pending version
    ├── EnqueueConflict                retry refused: not FAILED/TIMEOUT, limit reached, or
    │                                  the task's generation is no longer the one sent   (409)
    └── EnqueueContention              the task kept changing under concurrent requests (409)

Third-party exceptions (asyncpg, aio-pika, minio, httpx, pypdfium2, ...) are translated into
this tree at the adapter that calls the library (cf. httpx ``_exceptions.py``), so the worker's
policy code never imports a third-party exception type.
"""

from __future__ import annotations


class IndexingError(Exception):
    """Base of every error the pipeline raises on purpose.

    ``error_code`` is machine-readable and stored in ``index_task.error_code``; ``str(exc)`` is
    the human-readable reason stored in ``error_message``.
    """

    error_code: str = "internal_error"

    def __init__(self, message: str, *, error_code: str | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class TransientError(IndexingError):
    """A dependency failed in a way that may succeed on retry."""

    error_code = "transient_error"


class StorageUnavailableError(TransientError):
    error_code = "storage_unavailable"


class DatabaseUnavailableError(TransientError):
    error_code = "database_unavailable"


class BrokerUnavailableError(TransientError):
    error_code = "broker_unavailable"


class EmbeddingUnavailableError(TransientError):
    error_code = "embedding_unavailable"


class EmbeddingTimeoutError(EmbeddingUnavailableError):
    error_code = "embedding_timeout"


class PermanentError(IndexingError):
    """The input itself is bad; retrying cannot help."""

    error_code = "permanent_error"


class UnsupportedTypeError(PermanentError):
    error_code = "unsupported_type"


class PdfEncryptedError(PermanentError):
    error_code = "pdf_encrypted"


class CorruptDocumentError(PermanentError):
    error_code = "corrupt_document"


class NoTextError(PermanentError):
    error_code = "no_text"

    def __init__(self, message: str = "no extractable text", **kw: str | None) -> None:
        super().__init__(message, **kw)


class UndecodableTextError(PermanentError):
    error_code = "undecodable_text"


class OversizeError(PermanentError):
    error_code = "oversize"


class ParseLimitError(PermanentError):
    error_code = "parse_limit"


class FencedOut(IndexingError):
    """Our claim on the task is no longer the current one; write nothing, mark nothing."""

    error_code = "fenced_out"


class StaleGenerationError(FencedOut):
    error_code = "stale_generation"


class LockLostError(FencedOut):
    error_code = "lock_lost"


class ServiceError(Exception):
    """A use case refuses the request; ``str(exc)`` is the client-facing detail."""


class NotFoundError(ServiceError):
    """The caller owns no such object (another user's objects are "not found" too)."""

    def __init__(self, message: str = "not found") -> None:
        super().__init__(message)


class DocumentNotFound(NotFoundError):
    pass


class TaskNotFound(NotFoundError):
    pass


class PendingVersionNotFound(NotFoundError):
    def __init__(self, message: str = "the document has no pending version") -> None:
        super().__init__(message)


class EnqueueConflict(ServiceError):
    """A retry was refused: ``reason`` from :func:`shared.fencing.decide_enqueue`, ``status`` the
    task's current status (``"FAILED"``, ...)."""

    def __init__(self, reason: str, status: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


class EnqueueContention(ServiceError):
    """The task changed under every one of our attempts (concurrent requests); try again."""


class ConfigurationError(Exception):
    """Settings are inconsistent; the process refuses to start (never caught by the worker)."""


class DependencyMissingError(ConfigurationError):
    """A model or parser resource is not installed; raised at worker start-up, not mid-task."""
