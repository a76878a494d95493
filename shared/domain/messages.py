"""The wire schema of ``rag.index.queue`` messages and the wire names (pure; the one source of
exchange, queue, routing-key and header names: the RabbitMQ adapter, the outbox and the worker
read them here).

Body: JSON ``{"taskId", "documentId", "kbId", "userId", "generation"}``, IDs only; the worker
reads everything else from the database. A message of one part of a split document (ARCHITECTURE.md,
"Flow 3") adds ``"part": p`` (0-based); a document message has no ``part`` key at all, so its bytes
are those of earlier versions.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.domain.errors import InvalidMessageError

__all__ = ["CARRIED_HEADER", "DEAD_REASON_HEADER", "DELIVERY_LIMIT", "DLQ", "DLX", "EXCHANGE", "GENERATION_HEADER",
           "QUEUE", "ROUTING_KEY", "IndexMessage", "InvalidMessageError", "delay_queue_name"]

EXCHANGE = "rag.index.exchange"
QUEUE = "rag.index.queue"
ROUTING_KEY = "rag.index.document"
DLX = "rag.index.dlx"
DLQ = "rag.index.dlq"
DELIVERY_LIMIT = 5
#: Failed deliveries carried across delay re-publishes: a re-published message is a new message
#: to RabbitMQ, whose x-delivery-count starts again at 0, so without this a message that crashes
#: workers while its (dead) holder's lock lingers would escape the quorum queue's delivery limit.
CARRIED_HEADER = "x-rag-failed-deliveries"
#: Set when the worker dead-letters a message itself (a limit the broker cannot see).
DEAD_REASON_HEADER = "x-rag-dead-reason"
#: The message's generation (fencing token), so "Get messages" in the console shows it.
GENERATION_HEADER = "x-rag-generation"


def delay_queue_name(delay_ms: int) -> str:
    """The delay queue of a TTL: a quorum queue (replicated, so a held delivery survives the loss of
    a broker node; the classic ``rag.index.delay.<ms>ms`` of earlier versions drains on its own)."""
    return f"rag.index.delay.quorum.{delay_ms}ms"


class IndexMessage(BaseModel):
    """One indexing request; ``generation`` is the fencing token issued by PostgreSQL; ``part``
    names one part of a split task (None: the document itself)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, strict=True)

    task_id: int = Field(alias="taskId", gt=0)
    document_id: int = Field(alias="documentId", gt=0)
    kb_id: int = Field(alias="kbId", gt=0)
    user_id: int = Field(alias="userId", gt=0)
    generation: int = Field(gt=0)
    part: int | None = Field(default=None, ge=0)

    def to_json(self) -> bytes:
        """UTF-8 JSON with the wire (camelCase) names; ``part`` only when set."""
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()

    def to_dict(self) -> dict[str, int]:
        """The wire fields as a dict (``part`` only when set)."""
        return self.model_dump(by_alias=True, exclude_none=True)

    def for_part(self, part: int) -> IndexMessage:
        """The message of part ``part`` (0-based) of this document's split; raises
        ``ValidationError`` for a negative ``part``."""
        return IndexMessage.model_validate({**self.to_dict(), "part": part})

    def document(self) -> IndexMessage:
        """The document message this (part) message belongs to."""
        return self.model_copy(update={"part": None})

    @classmethod
    def from_json(cls, body: bytes) -> IndexMessage:
        """Decode and validate; raises InvalidMessageError (extra or missing fields, bad types)."""
        try:
            return cls.model_validate_json(body)
        except ValidationError as exc:
            raise InvalidMessageError(f"invalid index message: {exc.errors(include_url=False)}") from exc
