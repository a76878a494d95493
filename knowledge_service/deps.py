"""FastAPI dependencies: resources from the lifespan, and the caller's identity."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Annotated

import redis.asyncio as aioredis
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from knowledge_service.config import ApiConfig
from knowledge_service.metrics import ApiMetrics
from shared import usecases
from shared.adapters.embedding import Embedder
from shared.adapters.postgres.reads import PgReads
from shared.adapters.rabbitmq import FailoverPublisher
from shared.adapters.s3 import ObjectStore
from shared.domain.errors import UnauthorizedError
from shared.ports import SearchReads


@dataclass
class Resources:
    """Everything the routes use; built and closed by the lifespan (the composition root)."""

    #: what the routes read of the settings, built once (``ApiConfig.from_settings``)
    config: ApiConfig
    store: ObjectStore
    redis: aioredis.Redis
    embedder: Embedder
    publisher: FailoverPublisher | None
    #: the use cases' ports (PostgreSQL store, object store, publisher) and limits: every write
    deps: usecases.Deps
    #: the read side of the routes (ownership checks, documents, tasks, chunks, tokens, streams, health)
    reads: PgReads
    #: the search's reads (shared.adapters.postgres.reads.PgSearch over the pool)
    search: SearchReads
    metrics: ApiMetrics = field(default_factory=ApiMetrics.unregistered)


def get_resources(request: Request) -> Resources:
    res: Resources = request.app.state.resources
    return res


Res = Annotated[Resources, Depends(get_resources)]

_bearer = HTTPBearer(auto_error=False)


def token_digest(token: str) -> bytes:
    """SHA-256 of an API token: what the database stores (never the token itself)."""
    return hashlib.sha256(token.encode()).digest()


async def current_user(
    res: Res, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> int:
    """The user id behind ``Authorization: Bearer <token>``; ``UnauthorizedError`` (401) if
    missing, unknown or revoked, ``DatabaseUnavailableError`` (503) if the token cannot be checked."""
    if creds is None or creds.scheme.lower() != "bearer" or not creds.credentials:
        raise UnauthorizedError()
    digest = token_digest(creds.credentials)
    user_id = await res.reads.user_for_token(digest)  # DatabaseUnavailableError → 503
    # Looked up by SHA-256 digest: an index comparison on the digest leaks nothing usable about
    # the secret (no prefix of the token can be probed through timing).
    if user_id is None:
        raise UnauthorizedError()
    return user_id


UserId = Annotated[int, Depends(current_user)]
