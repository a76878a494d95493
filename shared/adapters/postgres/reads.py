"""The API's read side: the queries its routes answer from (ownership checks, documents, chunks,
tasks, knowledge bases, the token lookup), each the repository function itself on a pooled
connection (:class:`~shared.adapters.postgres.pool.Pooled`).

The rule of the routes: reads through this object, writes through the use cases
(:mod:`shared.usecases`, over the ``TaskStore`` port). A connection-level failure leaves as
``DatabaseUnavailableError`` (503).
"""

from __future__ import annotations

import asyncpg

from shared.adapters.postgres.pool import Pooled
from shared.adapters.postgres.repo import chunks as chunks_repo
from shared.adapters.postgres.repo import documents as documents_repo
from shared.adapters.postgres.repo import tasks as tasks_repo
from shared.adapters.postgres.repo import users as users_repo


class PgReads:
    """Read-only queries over ``pool`` (see the repository functions for the rows' shapes)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    user_for_token = Pooled(users_repo.user_for_token)
    kb_owned = Pooled(users_repo.kb_owned)
    list_kbs = Pooled(users_repo.list_kbs)
    document_owned = Pooled(documents_repo.document_owned)
    get_document = Pooled(documents_repo.get_document)
    list_documents = Pooled(documents_repo.list_documents)
    page_documents = Pooled(documents_repo.page_documents)
    list_chunks = Pooled(chunks_repo.list_chunks)
    get_task = Pooled(tasks_repo.get_task)
