"""The API's read side: the queries its routes answer from (ownership checks, documents, chunks,
tasks, knowledge bases, the token lookup), each the repository function itself on a pooled
connection (:class:`~shared.adapters.postgres.pool.Pooled`).

The rule of the routes: reads through this object (and the search through :class:`PgSearch`),
writes through the use cases (:mod:`shared.usecases`, over the ``TaskStore`` port). A
connection-level failure leaves as ``DatabaseUnavailableError`` (503).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

import asyncpg
import numpy as np
import numpy.typing as npt

from shared.adapters.postgres.pool import Pooled, connection
from shared.adapters.postgres.repo import chunks as chunks_repo
from shared.adapters.postgres.repo import documents as documents_repo
from shared.adapters.postgres.repo import ops as ops_repo
from shared.adapters.postgres.repo import search as search_repo
from shared.adapters.postgres.repo import streams as streams_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.adapters.postgres.repo import users as users_repo
from shared.domain.records import ChunkCopy, ChunkDetails


class PgReads:
    """Read-only queries over ``pool`` (see the repository functions for the rows' shapes)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def close(self) -> None:
        """Close the pool (the API's one pool: the use cases' store shares it)."""
        await self.pool.close()

    user_for_token = Pooled(users_repo.user_for_token)
    kb_owned = Pooled(users_repo.kb_owned)
    list_kbs = Pooled(users_repo.list_kbs)
    document_owned = Pooled(documents_repo.document_owned)
    get_document = Pooled(documents_repo.get_document)
    list_documents = Pooled(documents_repo.list_documents)
    page_documents = Pooled(documents_repo.page_documents)
    list_chunks = Pooled(chunks_repo.list_chunks)
    get_task = Pooled(tasks_repo.get_task)
    stream_allowed = Pooled(streams_repo.stream_allowed)
    kb_changes = Pooled(streams_repo.kb_changes)
    outbox_backlog = Pooled(ops_repo.outbox_backlog)
    ping = Pooled(ops_repo.ping)


class PgSearch:
    """The ``SearchReads`` port over a pool (each call on its own pooled connection, so calls run
    at once: ``parallel``; connection-level failures leave as ``DatabaseUnavailableError``) or over
    one connection (calls one after the other; the caller translates errors)."""

    def __init__(self, db: asyncpg.Pool | asyncpg.Connection) -> None:
        self.db = db

    @property
    def parallel(self) -> bool:
        return isinstance(self.db, asyncpg.Pool)

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.Connection]:
        if isinstance(self.db, asyncpg.Pool):
            async with connection(self.db) as conn:
                yield conn
        else:
            yield self.db

    async def vector(self, kb_id: int, embedding: npt.NDArray[np.float32], limit: int, *, exact_max_chunks: int,
                     ef_search: int) -> list[tuple[int, float]]:
        async with self._conn() as conn, search_repo.ranking_transaction(conn):
            return await search_repo.vector_ranking(conn, kb_id, embedding, limit, exact_max_chunks=exact_max_chunks,
                                                    ef_search=ef_search)

    async def keyword(self, kb_id: int, text: str, limit: int, *, budget: int,
                      max_candidates: int) -> list[tuple[int, float]]:
        async with self._conn() as conn, search_repo.keyword_transaction(conn):
            return await search_repo.keyword_ranking(conn, kb_id, text, limit, budget=budget,
                                                     max_candidates=max_candidates)

    async def details(self, ids: Sequence[int]) -> dict[int, ChunkDetails]:
        async with self._conn() as conn:
            return await search_repo.details(conn, ids)

    async def copies(self, ids: Sequence[int], limit: int) -> dict[int, tuple[list[ChunkCopy], int]]:
        async with self._conn() as conn:
            return await search_repo.copies(conn, ids, limit)
