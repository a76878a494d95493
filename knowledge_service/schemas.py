"""Request and response bodies of the HTTP API (the exact contract; shapes in OpenAPI)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KnowledgeBaseCreate(_Strict):
    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$",
                      description="no control characters; not blank")


class KnowledgeBaseOut(BaseModel):
    kb_id: int
    name: str
    embedding_model: str | None = None
    embedding_dim: int | None = None
    create_time: datetime | None = None


class KnowledgeBaseList(BaseModel):
    items: list[KnowledgeBaseOut]


class TaskOut(BaseModel):
    task_id: int
    document_id: int
    kb_id: int
    status: str
    generation: int
    attempt: int
    retry_count: int
    max_retry_count: int
    error_code: str | None
    error_message: str | None
    start_time: datetime | None
    end_time: datetime | None
    create_time: datetime
    update_time: datetime


class DocumentOut(BaseModel):
    document_id: int
    kb_id: int
    filename: str
    content_type: str | None
    size_bytes: int
    sha256: str
    status: str
    index_generation: int
    chunk_count: int
    error_message: str | None
    warnings: list[str] = Field(
        default_factory=list,
        description="what the last indexing run could not index or altered (e.g. '2 of 40 pages had no text layer')",
    )
    create_time: datetime
    update_time: datetime
    task: TaskOut | None


class DocumentList(BaseModel):
    items: list[DocumentOut]


class UploadAccepted(BaseModel):
    document_id: int
    task_id: int
    status: str
    task_status: str
    generation: int


class ChunkOut(BaseModel):
    chunk_index: int
    content: str
    token_count: int
    page: int | None = Field(None, description="PDF page (1-based) where the chunk starts")
    section: str | None = Field(None, description="heading path where the chunk starts, e.g. 'Guide > Install'")


class ChunkPage(BaseModel):
    items: list[ChunkOut]
    total: int


class SearchRequest(_Strict):
    query: str = Field(min_length=1, max_length=10_000)
    top_k: int = Field(5, ge=1, le=50)


class SearchHit(BaseModel):
    document_id: int
    filename: str
    chunk_index: int
    content: str
    score: float


class SearchResponse(BaseModel):
    results: list[SearchHit]


class RetryRequest(_Strict):
    force: bool = False


class ReindexRequest(_Strict):
    force: bool = False


class ReindexResponse(BaseModel):
    action: str
    reason: str
    document: DocumentOut


class Health(BaseModel):
    status: str
    detail: dict[str, str] = {}
