"""HTTP routes. Every ``/api/v1`` route authenticates and checks ownership (404 otherwise).

Routes parse the request, then read through ``res.reads``
(:class:`shared.adapters.postgres.reads.PgReads`; the search through ``res.search``, the
``SearchReads`` port) and write through a use case
(:mod:`shared.usecases`), never anything else, and shape the answer; errors are
``shared.domain.errors`` types, turned into HTTP by ``errors_http`` (the database down is a 503,
never a 500).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Annotated, Any

import asyncpg
import numpy as np
from fastapi import APIRouter, Path, Query, Request, Response, status
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from knowledge_service import schemas, streams, upload
from knowledge_service.deps import Res, UserId
from knowledge_service.search import retrieval
from knowledge_service.search.modes import SearchMode
from shared import usecases
from shared.domain import formats
from shared.domain.errors import DocumentNotFound, KnowledgeBaseNotFound, TaskNotFound, TopKTooLargeError
from shared.domain.fencing import Action
from shared.domain.records import Duplicate, NewContent
from shared.domain.states import DocumentStatus

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/v1", responses=upload.OPENAPI_UNAVAILABLE)
health = APIRouter()

# One Server-Sent Event as clients (and schemathesis, ST108) parse it: ``event`` name, ``id`` and
# ``data`` (a JSON document); "string" made schemathesis reject every event.
SSE_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"event": {"type": "string"}, "id": {"type": "string"}, "data": {"type": "string"},
                   "retry": {"type": "integer"}},
}
SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {"description": "Server-Sent Events", "content": {"text/event-stream": {"schema": SSE_EVENT_SCHEMA}}}
}
#: Path IDs are BIGSERIAL: out-of-range values are a 422, not a database error.
Id = Annotated[int, Path(ge=1, le=2**63 - 1)]


def _task(r: dict[str, Any] | None) -> schemas.TaskOut | None:
    return None if r is None else schemas.TaskOut.model_validate(r)


def _json(raw: Any) -> Any:
    return json.loads(raw) if isinstance(raw, str) else raw


def _document(r: asyncpg.Record) -> schemas.DocumentOut:
    d = dict(r.items())
    task = _task(_json(d.pop("task")))
    d["task"] = task
    warnings = d.pop("warnings", None)
    d["warnings"] = _json(warnings) or []
    origin_id, origin_name = d.pop("origin_document_id", None), d.pop("origin_filename", None)
    d["origin"] = None if origin_id is None else schemas.OriginOut(document_id=origin_id, filename=origin_name)
    d["members"] = d.pop("member_count", 0) or 0
    pending = _json(d.pop("pending", None))
    d["pending"] = None if pending is None else schemas.PendingVersionOut.model_validate({
        **pending,
        "task_id": task.task_id if task else None, "status": task.status if task else None,
        "generation": task.generation if task else None, "error_code": task.error_code if task else None,
        "message": task.error_message if task else None,
    })
    return schemas.DocumentOut.model_validate(d)


async def _owned_kb(res: Res, user_id: int, kb_id: Id) -> None:
    if not await res.reads.kb_owned(user_id, kb_id):
        raise KnowledgeBaseNotFound()


async def _owned_document(res: Res, user_id: int, document_id: Id) -> asyncpg.Record:
    row = await res.reads.document_owned(user_id, document_id)
    if row is None or row["task_id"] is None:
        raise DocumentNotFound()
    return row


async def _document_out(res: Res, user_id: int, document_id: Id) -> schemas.DocumentOut:
    row = await res.reads.get_document(user_id, document_id)
    if row is None:
        raise DocumentNotFound()
    return _document(row)


# ------------------------------------------------------------------ knowledge bases


@router.post("/knowledge-bases", status_code=201, response_model=schemas.KnowledgeBaseOut)
async def create_kb(body: schemas.KnowledgeBaseCreate, res: Res, user_id: UserId) -> schemas.KnowledgeBaseOut:
    row = await usecases.create_knowledge_base(res.deps, user_id, body.name, model=res.config.embedding_model,
                                               dim=res.config.embedding_dim)
    return schemas.KnowledgeBaseOut.model_validate(row)


@router.get("/knowledge-bases", response_model=schemas.KnowledgeBaseList)
async def list_kbs(res: Res, user_id: UserId) -> schemas.KnowledgeBaseList:
    rows = await res.reads.list_kbs(user_id)
    return schemas.KnowledgeBaseList(items=[schemas.KnowledgeBaseOut.model_validate(dict(r.items())) for r in rows])


@router.patch("/knowledge-bases/{kb_id}", response_model=schemas.KnowledgeBaseOut)
async def rename_kb(
    kb_id: Id, body: schemas.KnowledgeBaseRename, res: Res, user_id: UserId
) -> schemas.KnowledgeBaseOut:
    """Rename the knowledge base (404 if it is not the caller's)."""
    row = await usecases.rename_knowledge_base(res.deps, user_id, kb_id, body.name)
    return schemas.KnowledgeBaseOut.model_validate(row)


@router.delete("/knowledge-bases/{kb_id}", status_code=204,
               responses={404: {"description": "no such knowledge base of the caller's (also: already deleted)"}})
async def delete_kb(kb_id: Id, res: Res, user_id: UserId) -> Response:
    """Delete the knowledge base with all its documents, versions, chunks, vectors, stored objects
    and the caller's embedding-cache entries no other chunk of theirs has, also while documents
    are indexing (their runs are fenced out and commit nothing). A second DELETE is a 404 and
    changes nothing."""
    await usecases.delete_knowledge_base(res.deps, user_id, kb_id)
    return Response(status_code=204)


@router.get("/knowledge-bases/{kb_id}/events", response_class=EventSourceResponse,
            responses={**SSE_RESPONSE, **streams.SSE_429})
async def kb_events(kb_id: Id, request: Request, res: Res, user_id: UserId) -> EventSourceResponse:
    """Server-Sent Events: ``document`` (a document with its task, as in the list) for every
    document at first and on each change of status, stage, progress..., ``removed``
    (``{"document_id"}``); until the client disconnects, or ``end`` (``{"kb_id", "reason"}``)
    once the token is revoked or the KB deleted. 429 past the open-stream caps."""
    await _owned_kb(res, user_id, kb_id)
    return streams.kb_stream(request, res, user_id, kb_id, _document)


# ------------------------------------------------------------------ formats


@router.get("/formats", response_model=schemas.FormatList)
async def list_formats(user_id: UserId) -> schemas.FormatList:
    """The format registry: what uploads accept (and what is recognised only to be refused,
    with the answer it gets). Authenticated like every ``/api/v1`` route."""
    items = [
        schemas.FormatOut(kind=f.kind, label=f.label, extensions=list(f.extensions), mime=f.mime,
                          mime_aliases=list(f.mime_aliases), accepted=f.accepted, refusal=f.refusal,
                          zip_based=f.zip_based)
        for f in formats.FORMATS
    ]
    return schemas.FormatList(items=items, accept=",".join(f".{e}" for e in formats.accepted_extensions()))


# ------------------------------------------------------------------ documents


async def _receive(request: Request, res: Res, kb_id: int) -> NewContent:
    """Stream the ``file`` part into storage (see :mod:`knowledge_service.upload`). Raises
    ``UploadRejectedError`` subclasses and ``StorageUnavailableError``; nothing is stored then."""
    return await upload.receive_upload(request, res.store, kb_id=kb_id, limit=res.config.max_upload_bytes,
                                       part_size=res.config.upload_part_size)


@router.post("/knowledge-bases/{kb_id}/documents", status_code=202, response_model=schemas.UploadAccepted,
             openapi_extra=upload.OPENAPI_BODY,
             responses={**upload.OPENAPI_ERRORS, 200: {"model": schemas.UploadAccepted,
                                                       "description": "duplicate of an existing document"}})
async def upload_document(
    kb_id: Id, request: Request, res: Res, user_id: UserId, response: Response, allow_duplicate: bool = False,
) -> schemas.UploadAccepted:
    """Multipart ``file``: typed by content (the formats of ``GET /api/v1/formats``), streamed to storage.

    Bytes equal (SHA-256) to a document's of the same KB: 200 with that document and
    ``duplicate_of``, nothing created or kept; ``?allow_duplicate=true`` creates a new one anyway.
    """
    await _owned_kb(res, user_id, kb_id)
    await usecases.check_in_flight(res.deps, user_id)
    obj = await _receive(request, res, kb_id)
    msg = await usecases.create_document(res.deps, user_id=user_id, kb_id=kb_id, obj=obj,
                                         allow_duplicate=allow_duplicate)
    if isinstance(msg, Duplicate):
        response.status_code = status.HTTP_200_OK
        return schemas.UploadAccepted(
            document_id=msg.document_id, task_id=msg.task_id, status=msg.status, task_status=msg.task_status,
            generation=msg.generation, duplicate_of=msg.document_id,
        )
    return schemas.UploadAccepted(
        document_id=msg.document_id, task_id=msg.task_id, status="INDEXING", task_status="WAITING",
        generation=msg.generation,
    )


@router.get("/knowledge-bases/{kb_id}/documents", response_model=schemas.DocumentList)
async def list_documents(
    kb_id: Id, res: Res, user_id: UserId,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    status: Annotated[DocumentStatus | None, Query(description="only documents of this status")] = None,
    origin: Annotated[int | None, Query(ge=1, description="only the members of this archive document")] = None,
) -> schemas.DocumentList:
    """The knowledge base's documents by id, one page (``offset``, ``limit``); ``total`` counts
    every document matching ``status`` and ``origin`` (all when absent)."""
    await _owned_kb(res, user_id, kb_id)
    wanted = None if status is None else status.value
    rows, total = await res.reads.page_documents(user_id, kb_id, offset, limit, wanted, origin)
    return schemas.DocumentList(items=[_document(r) for r in rows], total=total)


@router.get("/documents/{document_id}", response_model=schemas.DocumentOut)
async def get_document(document_id: Id, res: Res, user_id: UserId) -> schemas.DocumentOut:
    return await _document_out(res, user_id, document_id)


@router.put("/documents/{document_id}/content", status_code=202, response_model=schemas.UploadAccepted,
            openapi_extra=upload.OPENAPI_BODY, responses=upload.OPENAPI_ERRORS)
async def replace_content(document_id: Id, request: Request, res: Res, user_id: UserId) -> schemas.UploadAccepted:
    """Multipart ``file`` replaces the content: a new generation; the old run is fenced out.

    A document that has been indexed keeps serving its indexed version (search, chunks, name,
    object) until the new one is indexed; the new one shows as ``pending`` meanwhile. ``status``
    in the answer is the document's (INDEXED while the served version stays). Counts toward the
    per-user in-flight cap (429)."""
    owned = await _owned_document(res, user_id, document_id)
    await usecases.check_in_flight(res.deps, user_id)  # new content counts toward the cap
    content = await _receive(request, res, owned["kb_id"])
    msg = await usecases.replace_content(res.deps, owned["task_id"], content)
    row = await res.reads.get_document(user_id, document_id)
    return schemas.UploadAccepted(
        document_id=document_id, task_id=msg.task_id, status=row["status"] if row else "INDEXING",
        task_status="WAITING", generation=msg.generation,
    )


@router.post("/documents/{document_id}/reindex", response_model=schemas.ReindexResponse,
             responses={202: {"model": schemas.ReindexResponse}})
async def reindex(
    document_id: Id, res: Res, user_id: UserId, body: schemas.ReindexRequest | None = None
) -> JSONResponse:
    owned = await _owned_document(res, user_id, document_id)
    result = await usecases.reindex(res.deps, owned["task_id"], force=bool(body and body.force))
    out = schemas.ReindexResponse(
        action=result.action.value, reason=result.reason, document=await _document_out(res, user_id, document_id)
    )
    code = 202 if result.action is Action.ISSUE else 200
    return JSONResponse(out.model_dump(mode="json"), status_code=code)


@router.delete("/documents/{document_id}", status_code=204)
async def delete_document(document_id: Id, res: Res, user_id: UserId) -> Response:
    await _owned_document(res, user_id, document_id)
    await usecases.delete_document(res.deps, document_id)
    return Response(status_code=204)


@router.delete("/documents/{document_id}/pending", status_code=204,
               responses={404: {"description": "no such document, or it has no pending version"}})
async def drop_pending(document_id: Id, res: Res, user_id: UserId) -> Response:
    """Drop the pending version (new content not yet indexed): its run is fenced out, its object
    removed; the served version is untouched."""
    await _owned_document(res, user_id, document_id)
    await usecases.drop_pending(res.deps, document_id)
    return Response(status_code=204)


@router.get("/documents/{document_id}/chunks", response_model=schemas.ChunkPage)
async def list_chunks(
    document_id: Id, res: Res, user_id: UserId,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> schemas.ChunkPage:
    await _owned_document(res, user_id, document_id)
    rows, total = await res.reads.list_chunks(document_id, offset, limit)
    return schemas.ChunkPage(items=[schemas.ChunkOut.model_validate(dict(r.items())) for r in rows], total=total)


# ------------------------------------------------------------------ tasks


@router.get("/tasks/{task_id}", response_model=schemas.TaskOut)
async def get_task(task_id: Id, res: Res, user_id: UserId) -> schemas.TaskOut:
    row = await res.reads.get_task(user_id, task_id)
    if row is None:
        raise TaskNotFound()
    return schemas.TaskOut.model_validate(dict(row.items()))


@router.get("/tasks/{task_id}/events", response_class=EventSourceResponse,
            responses={**SSE_RESPONSE, **streams.SSE_429})
async def task_events(task_id: Id, request: Request, res: Res, user_id: UserId) -> EventSourceResponse:
    """Server-Sent Events: ``task`` (the task, as ``GET /tasks/{id}``) at first and on every
    change of status, stage, progress or queue position; then ``end`` once the task is
    terminal (or the token revoked), or ``gone`` if it is deleted. 429 past the open-stream caps."""
    await get_task(task_id, res, user_id)  # 404 before the stream starts
    return streams.task_stream(request, res, user_id, task_id)


@router.post("/tasks/{task_id}/retry", status_code=202, response_model=schemas.TaskOut,
             responses={409: {"description": "task not FAILED/TIMEOUT, retry limit reached, or its generation "
                                             "is no longer the one sent"}})
async def retry_task(
    task_id: Id, res: Res, user_id: UserId, body: schemas.RetryRequest | None = None
) -> schemas.TaskOut:
    """Retry a FAILED/TIMEOUT task. With ``{"generation": g}`` only if the task is still at
    generation ``g`` (409 otherwise): a double click retries once."""
    await get_task(task_id, res, user_id)  # ownership (404)
    await usecases.retry(res.deps, task_id, force=bool(body and body.force),  # EnqueueConflict → 409
                         expected_generation=body.generation if body else None)
    return await get_task(task_id, res, user_id)


# ------------------------------------------------------------------ search


async def _query_vector(res: Res, query: str) -> np.ndarray:
    """The query's embedding, ``(dim,) float32``."""
    vector: np.ndarray = (await res.embedder.embed([query]))[0]
    return vector


@router.post("/knowledge-bases/{kb_id}/search", response_model=schemas.SearchResponse)
async def search(kb_id: Id, body: schemas.SearchRequest, res: Res, user_id: UserId) -> schemas.SearchResponse:
    """Vector, keyword or hybrid (default) search; scores per mode in :mod:`knowledge_service.search.retrieval`."""
    if body.top_k > res.config.search_max_top_k:
        raise TopKTooLargeError(body.top_k, res.config.search_max_top_k)  # 422, FastAPI's validation-error shape
    mode = body.mode
    # The query is embedded while the KB is checked and the keyword list runs (hybrid); only the vector list waits.
    vector = None if mode is SearchMode.KEYWORD else asyncio.ensure_future(_query_vector(res, body.query))
    try:
        await _owned_kb(res, user_id, kb_id)
        hits = await retrieval.search(res.search, kb_id, mode, body.query, vector, body.top_k, res.config.search)
    finally:
        if vector is not None:
            vector.cancel()  # the KB check or a list failed first (a no-op once done)
            if vector.done() and not vector.cancelled():
                vector.exception()  # retrieved: it was raised to the caller, or the KB check failed first
    return schemas.SearchResponse(mode=body.mode, results=[
        schemas.SearchHit(document_id=h.document_id, filename=h.filename, chunk_index=h.chunk_index,
                          content=h.content, page=h.page, section=h.section, score=h.score, sources=h.sources,
                          also_in=[schemas.SearchCopy(document_id=c.document_id, filename=c.filename,
                                                      chunk_index=c.chunk_index, page=c.page, section=c.section)
                                   for c in h.also_in],
                          also_in_total=h.also_in_total)
        for h in hits
    ])


# ------------------------------------------------------------------ health


@health.get("/healthz", response_model=schemas.Health)
async def healthz() -> schemas.Health:
    return schemas.Health(status="ok")


@health.get("/readyz", response_model=schemas.Health, responses={503: {"model": schemas.Health}})
async def readyz(res: Res) -> JSONResponse:
    detail: dict[str, str] = {}
    try:
        detail["database"] = "ok" if await asyncio.wait_for(res.reads.ping(), 3) else "unavailable"
    except Exception as exc:
        detail["database"] = f"unavailable: {type(exc).__name__}"
    try:
        await res.redis.ping()  # type: ignore[misc]
        detail["redis"] = "ok"
    except Exception as exc:
        detail["redis"] = f"unavailable: {type(exc).__name__}"
    try:
        await res.store.ping()
        detail["storage"] = "ok"
    except Exception as exc:
        detail["storage"] = f"unavailable: {type(exc).__name__}"
    broker_ok = res.publisher is not None and await res.publisher.ensure_open()  # reconnects after a node loss
    detail["broker"] = "ok" if broker_ok else "unavailable"
    ok = all(v == "ok" for v in detail.values())
    body = schemas.Health(status="ok" if ok else "unavailable", detail=detail)
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)
