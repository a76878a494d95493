"""Request and response bodies of the HTTP API (the exact contract; shapes in OpenAPI)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from knowledge_service.search.modes import DEFAULT_MODE, SearchMode
from shared.domain.normalize import has_model_token, normalize_text


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KnowledgeBaseCreate(_Strict):
    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$",
                      description="no control characters; not blank")


class KnowledgeBaseRename(KnowledgeBaseCreate):
    """``PATCH /knowledge-bases/{id}``: the new name (same rules as at creation)."""


class KnowledgeBaseOut(BaseModel):
    kb_id: int
    name: str
    embedding_model: str | None = None
    embedding_dim: int | None = None
    create_time: datetime | None = None


class KnowledgeBaseList(BaseModel):
    items: list[KnowledgeBaseOut]


class TaskParts(BaseModel):
    """The parts of a split task (``SPLIT_MIN_CHUNKS`` chunks or more), by status."""

    total: int = Field(ge=1)
    done: int = Field(ge=0)
    running: int = Field(ge=0)
    waiting: int = Field(ge=0)


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
    stage: Literal["DOWNLOADING", "PARSING", "OCR", "CHUNKING", "MODEL_WAIT", "EMBEDDING", "WRITING"] | None = Field(
        None, description="where the current run is (FAILED/TIMEOUT: where it stopped; MODEL_WAIT: chunked, waiting"
                          " for its worker's model turn); null before the first claim")
    progress: float | None = Field(
        None, ge=0, le=1, description="stage OCR: share of the scanned pages OCRed; otherwise share of the run's "
                                      "chunks embedded (0 before EMBEDDING, 1 from WRITING on); "
                                      "written at most about once per second")
    queue_position: int | None = Field(
        None, description="WAITING/RETRYING: approximate 1-based place among all waiting tasks; null otherwise")
    parts: TaskParts | None = Field(
        None, description="a big document embedded in parts by any worker (issue 31): how many parts in all, done,"
                          " running and waiting; null when the task is not split (its progress is over all parts)")

    @field_validator("parts", mode="before")
    @classmethod
    def _parts_json(cls, v: Any) -> Any:
        """A row read directly carries ``parts`` as JSON text (jsonb); nested in a document's
        task JSON it is already an object."""
        return json.loads(v) if isinstance(v, str) else v


class PendingVersionOut(BaseModel):
    """New content not yet indexed: the document keeps serving its indexed version meanwhile.
    ``status``, ``error_code`` and ``message`` are those of its task (FAILED no_text, ...)."""

    task_id: int | None
    status: str | None
    generation: int | None
    error_code: str | None
    message: str | None
    filename: str
    content_type: str | None
    size_bytes: int
    sha256: str
    create_time: datetime


class OriginOut(BaseModel):
    """The archive a document came from (issue 29: one document per member of a ``.zip``/``.tar``)."""

    document_id: int
    filename: str


class DocumentOut(BaseModel):
    """The document's served version (the last indexed one; for a document never indexed, its
    only one) and, if new content awaits indexing, its ``pending`` version."""

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
    pending: PendingVersionOut | None = None
    origin: OriginOut | None = Field(
        None, description="a member of an archive: the archive's document (its id and file name); null for an "
                          "upload, and once the archive is deleted (its members stay)")
    members: int = Field(
        0, description="an archive: how many documents its members became (list them with "
                       "GET /knowledge-bases/{kb_id}/documents?origin={document_id}); 0 otherwise")


class DocumentList(BaseModel):
    items: list[DocumentOut]
    total: int = Field(description="documents matching the filter (all pages)")


class UploadAccepted(BaseModel):
    document_id: int
    task_id: int
    status: str
    task_status: str
    generation: int
    duplicate_of: int | None = Field(
        None, description="set (200) when the bytes equal this document's of the same KB: nothing was created"
    )


class FormatOut(BaseModel):
    """One entry of the format registry (``shared.domain.formats``)."""

    kind: str
    label: str
    extensions: list[str] = Field(description="lower case, without the dot; the canonical one first")
    mime: str = Field(description="the content type stored for it")
    mime_aliases: list[str]
    accepted: bool
    refusal: str | None = Field(description="for a format recognised only to be refused: what the 415 says")
    zip_based: bool = Field(description="ZIP-bomb and nesting limits apply (ZIP_MAX_*)")


class FormatList(BaseModel):
    items: list[FormatOut]
    accept: str = Field(description="the accepted extensions as an HTML file input's accept attribute")


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
    query: str = Field(min_length=1, max_length=10_000,
                       description="cleaned like document text (control characters, lone surrogates, NFC)")
    top_k: int = Field(5, ge=1, description="at most the search_max_top_k setting (422 above)")
    mode: SearchMode = DEFAULT_MODE

    @field_validator("query", mode="before")
    @classmethod
    def _clean(cls, v: object) -> object:
        """The query as document text is cleaned (``normalize_text``), before pydantic's own string
        check (which refuses lone surrogates, and whose error echoing one could not be encoded); no
        model token left → 422."""
        if not isinstance(v, str):
            return v
        cleaned = normalize_text(v)
        if not has_model_token(cleaned):
            raise ValueError("query has no searchable text once control characters, whitespace and lone "
                             "accents are removed")
        return cleaned


class SearchCopy(BaseModel):
    document_id: int
    filename: str
    chunk_index: int
    page: int | None
    section: str | None


class SearchHit(BaseModel):
    document_id: int
    filename: str
    chunk_index: int
    content: str
    page: int | None = Field(description="1-based PDF page of the chunk; null where unknown")
    section: str | None = Field(description='heading path "A > B > C"; null where unknown')
    score: float = Field(description="vector: cosine similarity (-1..1); keyword: weighted share of query terms "
                                     "found, +1 for a whole-phrase match (0..2); hybrid: RRF score (0..2/(k+1)), "
                                     "+1 for a decisive exact keyword hit")
    sources: dict[str, int] = Field(description='1-based rank in each list that held the chunk, e.g. '
                                                '{"vector": 3, "keyword": 1}')
    also_in: list[SearchCopy] = Field(default_factory=list, description=(
        "the other chunks of the knowledge base holding exactly this text (search shows one hit per text): "
        "by document, then chunk; at most 50, also_in_total counts them all"))
    also_in_total: int = Field(0, description="how many other chunks hold this text")


class SearchResponse(BaseModel):
    mode: SearchMode
    results: list[SearchHit]


class RetryRequest(_Strict):
    force: bool = False
    generation: int | None = Field(
        None, ge=1, le=2**63 - 1,
        description="the task generation the client read: 409 if the task has been re-armed since (a double "
                    "click retries once)",
    )


class ReindexRequest(_Strict):
    force: bool = False


class ReindexResponse(BaseModel):
    action: str
    reason: str
    document: DocumentOut


class Health(BaseModel):
    status: str
    detail: dict[str, str] = {}
