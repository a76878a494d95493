"""The wire schema of ``rag.index.queue`` messages (pure).

Body: JSON ``{"taskId", "documentId", "kbId", "userId", "generation"}``, IDs only; the worker
reads everything else from the database.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.errors import InvalidMessageError

__all__ = ["IndexMessage", "InvalidMessageError"]


class IndexMessage(BaseModel):
    """One indexing request; ``generation`` is the fencing token issued by PostgreSQL."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, strict=True)

    task_id: int = Field(alias="taskId", gt=0)
    document_id: int = Field(alias="documentId", gt=0)
    kb_id: int = Field(alias="kbId", gt=0)
    user_id: int = Field(alias="userId", gt=0)
    generation: int = Field(gt=0)

    def to_json(self) -> bytes:
        """UTF-8 JSON with the wire (camelCase) names."""
        return self.model_dump_json(by_alias=True).encode()

    def to_dict(self) -> dict[str, int]:
        return self.model_dump(by_alias=True)

    @classmethod
    def from_json(cls, body: bytes) -> IndexMessage:
        """Decode and validate; raises InvalidMessageError (extra or missing fields, bad types)."""
        try:
            return cls.model_validate_json(body)
        except ValidationError as exc:
            raise InvalidMessageError(f"invalid index message: {exc.errors(include_url=False)}") from exc
