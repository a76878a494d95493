"""Every exception the project raises on purpose, in one tree (pure: imports nothing).

The class encodes the policy: whether the worker retries (``TransientError``), fails the task at
once (``PermanentError``) or writes nothing (``FencedOut``); which HTTP answer the API gives
(``ServiceError`` subclasses carry it: ``http_status``, ``error_code`` and the body's detail and
headers, which ``knowledge_service/errors_http.py`` writes out; nothing else builds an error
status). ``error_code`` is a class attribute, stored in ``index_task.error_code``.

One root, :class:`RagError`: ``except RagError`` catches whatever the project raised on purpose
and nothing a library raised untranslated.

::

    RagError (Exception)
    ├── IndexingError                       (base of the task errors; never raised directly)
    │   ├── InternalError                   internal_error        a bug or an untranslated library error
    │   ├── TaskTimeoutError                timeout               budget spent, model stalled, or the scanner
    │   ├── DeliveryLimitError              delivery_limit        the message crashed workers too many times
    │   ├── TransientError                  retry inside the task with backoff, then FAILED
    │   │   ├── StorageUnavailableError     storage_unavailable   object store unreachable / timed out (API: 503)
    │   │   ├── DatabaseUnavailableError    database_unavailable  PostgreSQL unreachable / connection lost (API: 503)
    │   │   ├── BrokerUnavailableError      broker_unavailable    RabbitMQ unreachable / publish not confirmed
    │   │   ├── LockUnavailableError        lock_unavailable      Redis unreachable (document lock)
    │   │   ├── ParserUnavailableError      parser_unavailable    the sandbox child could not start
    │   │   └── EmbeddingUnavailableError   embedding_unavailable embedding endpoint refused / 5xx
    │   │       └── EmbeddingTimeoutError   embedding_timeout     embedding request timed out
    │   ├── PermanentError                  FAILED at once, never retried
    │   │   ├── UnsupportedTypeError        unsupported_type
    │   │   ├── PdfEncryptedError           pdf_encrypted
    │   │   ├── EncryptedDocumentError      encrypted             password / DRM protected (Office, ODF, EPUB)
    │   │   ├── CorruptDocumentError        corrupt_document
    │   │   ├── NoTextError                 no_text               zero chunks after parsing
    │   │   ├── UndecodableTextError        undecodable_text
    │   │   ├── ParseLimitError             parse_limit           sandbox limit hit (memory, CPU, time, bomb)
    │   │   │   └── TextBudgetError         parse_limit           the file's text passes PARSE_MAX_TEXT_CHARS
    │   │   ├── ObjectMissingError          object_missing        the stored object is gone
    │   │   ├── EmbeddingRejectedError      embedding_rejected    endpoint answered 4xx (model, auth, input)
    │   │   └── EmbeddingDimensionError     embedding_dim_mismatch vectors of another dimension
    │   └── FencedOut                       not an error of the document: our claim is stale
    │       ├── StaleGenerationError        stale_generation      a newer generation / claim exists
    │       └── LockLostError               lock_lost             the Redis lock could not be renewed
    ├── ServiceError                        a use case refuses a request (the API maps it to HTTP)
    │   ├── NotFoundError                   the caller owns no such object           (404)
    │   │   ├── KnowledgeBaseNotFound
    │   │   ├── DocumentNotFound
    │   │   ├── TaskNotFound
    │   │   └── PendingVersionNotFound      the document has no pending version
    │   ├── EnqueueConflict                 retry refused: not FAILED/TIMEOUT, limit reached, or
    │   │                                   the task's generation is no longer the one sent (409)
    │   ├── EnqueueContention               the task kept changing under concurrent requests (409)
    │   ├── InFlightLimitExceeded           the user is at the in-flight cap           (429 + Retry-After)
    │   ├── UnauthorizedError               no, an unknown or a revoked bearer token   (401)
    │   ├── TopKTooLargeError               top_k above SEARCH_MAX_TOP_K               (422)
    │   ├── StreamLimitError                too many open event streams                (429 + Retry-After)
    │   └── UploadRejectedError             the upload is refused; nothing stored      (400)
    │       ├── UploadTooLargeError         over MAX_UPLOAD_BYTES                      (413)
    │       ├── UnsupportedUploadError      type not allowed / disagrees with the name (415,
    │       │                               ``error_code`` unsupported_type or encrypted)
    │       ├── MalformedUploadError        broken multipart body                      (400)
    │       └── MissingFileError            no ``file`` part                           (422)
    ├── InvalidMessageError (ValueError)    a queue message that is not an IndexMessage → DLQ
    ├── UnsupportedContentError (ValueError) sniffing: type not allowed or disagrees with the name
    ├── ConfigurationError                  settings inconsistent: the process refuses to start
    │   └── DependencyMissingError          a model / parser resource is not installed
    └── control flow, never seen outside their module:
        NeedBytesError (sniff), UploadAbortedError (upload), ExtractionCancelled,
        ParserCrashError (RuntimeError; sandbox)

Third-party exceptions (asyncpg, aio-pika, minio, redis, httpx, pypdfium2, ...) are translated
into this tree at the adapter that calls the library (cf. httpx ``_exceptions.py``), so policy
code and use cases never import a third-party exception type.
"""

from __future__ import annotations

__all__ = [
    "BrokerUnavailableError",
    "ConfigurationError",
    "CorruptDocumentError",
    "DatabaseUnavailableError",
    "DeliveryLimitError",
    "DependencyMissingError",
    "DocumentNotFound",
    "EmbeddingDimensionError",
    "EmbeddingRejectedError",
    "EmbeddingTimeoutError",
    "EmbeddingUnavailableError",
    "EncryptedDocumentError",
    "EnqueueConflict",
    "EnqueueContention",
    "ExtractionCancelled",
    "FencedOut",
    "InFlightLimitExceeded",
    "IndexingError",
    "InternalError",
    "InvalidMessageError",
    "KnowledgeBaseNotFound",
    "LockLostError",
    "LockUnavailableError",
    "MalformedUploadError",
    "MissingFileError",
    "NeedBytesError",
    "NoTextError",
    "NotFoundError",
    "ObjectMissingError",
    "ParseLimitError",
    "ParserCrashError",
    "ParserUnavailableError",
    "PdfEncryptedError",
    "PendingVersionNotFound",
    "PermanentError",
    "RagError",
    "ServiceError",
    "StaleGenerationError",
    "StorageUnavailableError",
    "StreamLimitError",
    "TaskNotFound",
    "TaskTimeoutError",
    "TextBudgetError",
    "TopKTooLargeError",
    "TransientError",
    "UnauthorizedError",
    "UndecodableTextError",
    "UnsupportedContentError",
    "UnsupportedTypeError",
    "UnsupportedUploadError",
    "UploadAbortedError",
    "UploadRejectedError",
    "UploadTooLargeError",
]


# ====================================================================== task errors (worker)


class RagError(Exception):
    """The root of every exception this project raises on purpose (module docstring)."""


class IndexingError(RagError):
    """Base of every error the pipeline raises on purpose.

    ``error_code`` is machine-readable and stored in ``index_task.error_code``; ``str(exc)`` is
    the human-readable reason stored in ``error_message``.
    """

    error_code: str = "internal_error"


class InternalError(IndexingError):
    """A bug or a library error nobody translated: the task fails, the worker goes on."""

    error_code = "internal_error"


class TaskTimeoutError(IndexingError):
    """A run or part spent its budget, its model completed no batch for ``EMBED_STALL_TIMEOUT_S``,
    or it lost its heartbeat (status TIMEOUT); the message says which."""

    error_code = "timeout"


class DeliveryLimitError(IndexingError):
    """The message was delivered more than ``messages.DELIVERY_LIMIT`` times without a settle.

    ``error_code`` equals RabbitMQ's own ``x-death`` reason for the same event.
    """

    error_code = "delivery_limit"


class TransientError(IndexingError):
    """A dependency failed in a way that may succeed on retry."""

    error_code = "transient_error"


class StorageUnavailableError(TransientError):
    error_code = "storage_unavailable"


class DatabaseUnavailableError(TransientError):
    """PostgreSQL cannot be reached or the connection failed (``shared.adapters.postgres.pool.unavailable``): the
    worker retries, the API answers 503 with ``Retry-After``. Never an SQL error or a bug."""

    error_code = "database_unavailable"


class BrokerUnavailableError(TransientError):
    error_code = "broker_unavailable"


class LockUnavailableError(TransientError):
    """Redis did not answer while taking the document lock."""

    error_code = "lock_unavailable"


class ParserUnavailableError(TransientError):
    """The parser child could not be started or warmed up (not the document's fault)."""

    error_code = "parser_unavailable"


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


class EncryptedDocumentError(PermanentError):
    """The document's content is encrypted (a password-protected Office/ODF file, a DRM-protected
    EPUB): nothing can be read without the key."""

    error_code = "encrypted"


class CorruptDocumentError(PermanentError):
    error_code = "corrupt_document"


class NoTextError(PermanentError):
    error_code = "no_text"

    def __init__(self, message: str = "no extractable text") -> None:
        super().__init__(message)


class UndecodableTextError(PermanentError):
    error_code = "undecodable_text"


class ParseLimitError(PermanentError):
    error_code = "parse_limit"


class TextBudgetError(ParseLimitError):
    """The whole file gives more text than ``PARSE_MAX_TEXT_CHARS``: refused as a whole, also when
    an attachment or embedded part passes the budget (never only that part skipped)."""


class ObjectMissingError(PermanentError):
    """The document's object is not in storage (deleted behind our back)."""

    error_code = "object_missing"


class EmbeddingRejectedError(PermanentError):
    """The embedding endpoint answered a non-retryable 4xx (bad model, input too long, auth)."""

    error_code = "embedding_rejected"


class EmbeddingDimensionError(PermanentError):
    """The embedding endpoint returned vectors of another dimension than configured."""

    error_code = "embedding_dim_mismatch"


class FencedOut(IndexingError):
    """Our claim on the task is no longer the current one; write nothing, mark nothing."""

    error_code = "fenced_out"


class StaleGenerationError(FencedOut):
    error_code = "stale_generation"


class LockLostError(FencedOut):
    error_code = "lock_lost"


# ====================================================================== use-case errors (API, CLI)


class ServiceError(RagError):
    """A use case refuses the request; ``str(exc)`` is the client-facing detail and
    ``error_code`` the machine-readable one (every 4xx body of the API carries it). The API
    answers ``http_status`` with ``{"detail": response_detail(), "error_code": error_code}`` and
    :meth:`response_headers`."""

    error_code: str = "refused"
    http_status: int = 400

    def response_detail(self) -> object:
        """The body's ``detail`` (JSON-like): the message."""
        return str(self)

    def response_headers(self) -> dict[str, str]:
        """Headers of the answer (none by default)."""
        return {}


class NotFoundError(ServiceError):
    """The caller owns no such object (another user's objects are "not found" too)."""

    error_code = "not_found"
    http_status = 404

    def __init__(self, message: str = "not found") -> None:
        super().__init__(message)


class KnowledgeBaseNotFound(NotFoundError):
    error_code = "knowledge_base_not_found"


class DocumentNotFound(NotFoundError):
    error_code = "document_not_found"


class TaskNotFound(NotFoundError):
    error_code = "task_not_found"


class PendingVersionNotFound(NotFoundError):
    error_code = "pending_version_not_found"

    def __init__(self, message: str = "the document has no pending version") -> None:
        super().__init__(message)


class EnqueueConflict(ServiceError):
    """A retry was refused: ``reason`` from :func:`shared.domain.fencing.decide_enqueue`, ``status`` the
    task's current status (``"FAILED"``, ...)."""

    error_code = "enqueue_conflict"
    http_status = 409

    def __init__(self, reason: str, status: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status

    def response_detail(self) -> object:
        return {"reason": self.reason, "status": self.status}


class EnqueueContention(ServiceError):
    """The task changed under every one of our attempts (concurrent requests); try again."""

    error_code = "enqueue_contention"
    http_status = 409  # a concurrent request changed the task first: re-read and decide


class InFlightLimitExceeded(ServiceError):
    """The user already has ``limit`` tasks WAITING/RETRYING/RUNNING; retry after
    ``retry_after_s`` seconds. ``before_body``: refused before an upload body was read (the
    API then closes the connection instead of draining the body)."""

    error_code = "in_flight_limit"
    http_status = 429

    def __init__(self, limit: int, retry_after_s: int, *, before_body: bool = False) -> None:
        super().__init__(f"too many tasks in flight (limit {limit} per user); retry when some have finished")
        self.limit = limit
        self.retry_after_s = retry_after_s
        self.before_body = before_body

    def response_headers(self) -> dict[str, str]:
        """``Retry-After``; ``Connection: close`` when refused before the body was read (not drained)."""
        return {"Retry-After": str(self.retry_after_s), **({"Connection": "close"} if self.before_body else {})}


class UnauthorizedError(ServiceError):
    """No bearer token, or an unknown or revoked one (401 with ``WWW-Authenticate: Bearer``)."""

    error_code = "unauthorized"
    http_status = 401

    def __init__(self, message: str = "invalid or missing bearer token") -> None:
        super().__init__(message)

    def response_headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": "Bearer"}


class TopKTooLargeError(ServiceError):
    """A search asked for more than ``limit`` results (``SEARCH_MAX_TOP_K``): a 422 in FastAPI's
    validation-error shape, as if the schema had said so."""

    error_code = "validation_error"
    http_status = 422

    def __init__(self, top_k: int, limit: int) -> None:
        super().__init__(f"top_k must be at most {limit} (SEARCH_MAX_TOP_K)")
        self.top_k = top_k
        self.limit = limit

    def response_detail(self) -> object:
        return [{"type": "less_than_equal", "loc": ["body", "top_k"], "input": self.top_k, "msg": str(self),
                 "ctx": {"le": self.limit}}]


class StreamLimitError(ServiceError):
    """Too many open event streams (``scope``: for this user, or on this server): 429 with
    ``Retry-After``."""

    error_code = "too_many_requests"
    http_status = 429

    def __init__(self, scope: str, retry_after_s: int) -> None:
        super().__init__(f"too many open event streams ({scope}); retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s

    def response_headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


class UploadRejectedError(ServiceError):
    """The upload is refused and nothing is stored; ``detail`` is the client-facing answer (a
    string, or FastAPI's validation-error list for :class:`MissingFileError`)."""

    error_code = "upload_rejected"

    def __init__(self, detail: str | list[dict[str, object]]) -> None:
        super().__init__(str(detail))
        self.detail = detail

    def response_detail(self) -> object:
        return self.detail

    def response_headers(self) -> dict[str, str]:
        """``Connection: close``: the rest of the body is not read (nor drained for ever)."""
        return {"Connection": "close"}


class UploadTooLargeError(UploadRejectedError):
    error_code = "upload_too_large"
    http_status = 413


class UnsupportedUploadError(UploadRejectedError):
    """415: the type is not accepted, or the content disagrees with the name. ``error_code``
    (in the 415 body): ``unsupported_type``, or ``encrypted`` for a password-protected file."""

    http_status = 415

    def __init__(self, detail: str, *, error_code: str = "unsupported_type") -> None:
        super().__init__(detail)
        self.error_code = error_code


class MalformedUploadError(UploadRejectedError):
    error_code = "malformed_upload"


class MissingFileError(UploadRejectedError):
    """No ``file`` part (answered in FastAPI's own validation-error shape)."""

    error_code = "missing_file"
    http_status = 422

    def __init__(self, field: str = "file") -> None:
        super().__init__([{"type": "missing", "loc": ["body", field], "msg": "Field required", "input": None}])


# ====================================================================== input and configuration


class InvalidMessageError(RagError, ValueError):
    """The body is not valid JSON for ``IndexMessage``: reject to the dead-letter queue."""


class UnsupportedContentError(RagError, ValueError):
    """The file's type is not allowed, or its content disagrees with its name (→ 415);
    ``error_code`` as :class:`UnsupportedUploadError`'s."""

    def __init__(self, message: str, *, error_code: str = "unsupported_type") -> None:
        super().__init__(message)
        self.error_code = error_code


class ConfigurationError(RagError):
    """Settings are inconsistent; the process refuses to start (never caught by the worker)."""


class DependencyMissingError(ConfigurationError):
    """A model or parser resource is not installed; raised at worker start-up, not mid-task."""


# ====================================================================== control flow


class NeedBytesError(RagError):
    """A reader of part of a file (``shared.domain.containers.SparseFile``) needs ``length``
    bytes from ``offset`` on, which it was not given."""

    def __init__(self, offset: int, length: int = 0) -> None:
        super().__init__(f"need {length} bytes from offset {offset}")
        self.offset = offset
        self.length = length


class UploadAbortedError(RagError):
    """Raised inside the storage thread's ``read`` when the request side gives up (the SDK then
    aborts the multipart upload). Deliberately not an OSError/ValueError, which the storage
    adapter would report as "storage unavailable"."""


class ParserCrashError(RagError, RuntimeError):
    """The parser raised something outside the error tree (a bug); message = ``Class: text``."""


class ExtractionCancelled(RagError):
    """The request was cancelled (``cancel(token)``); its child was killed."""
