"""Operator use cases of the ``rag`` CLI that work on the database and broker directly (users,
tokens, knowledge bases, stuck tasks, dead letters). Each opens what it needs and closes it.

Every function returns plain data (dicts) for the CLI to print; none prints.
"""

from __future__ import annotations

import secrets
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any

import asyncpg

from knowledge_service.deps import token_digest
from shared.adapters.postgres.migrate import migrate
from shared.adapters.postgres.pool import PoolConfig, session
from shared.adapters.postgres.repo import ops as ops_repo
from shared.adapters.postgres.repo import users as users_repo
from shared.domain.scan_policy import ScanThresholds
from shared.settings import CommonSettings, KnowledgeSettings, WorkerSettings


class NotFoundError(LookupError):
    """A named user (or other row) does not exist."""


def new_token() -> str:
    """A fresh API token (shown once; the database keeps only its SHA-256)."""
    return "rag_" + secrets.token_urlsafe(32)


def _session(settings: CommonSettings) -> AbstractAsyncContextManager[asyncpg.Connection]:
    """One connection for one command, through the pool helper (codec, statement timeout, errors)."""
    return session(PoolConfig.from_settings(settings), app_name="rag-cli")


async def create_user(settings: CommonSettings, name: str) -> dict[str, Any]:
    """Create user ``name`` (or reuse it) and give it a new token: ``{"user_id", "token"}``."""
    await migrate(settings.database_url)
    async with _session(settings) as conn:
        token = new_token()
        async with conn.transaction():
            user_id = await ops_repo.user_id_by_name(conn, name)
            if user_id is None:
                user_id = await users_repo.create_user(conn, name)
            await users_repo.create_token(conn, user_id, token_digest(token))
        return {"user_id": user_id, "token": token}


async def create_token(settings: CommonSettings, user: str) -> dict[str, Any]:
    """A new token for an existing user: ``{"user_id", "token_id", "token"}``; NotFoundError."""
    async with _session(settings) as conn:
        user_id = await ops_repo.user_id_by_name(conn, user)
        if user_id is None:
            raise NotFoundError(f"no user named {user!r}")
        token = new_token()
        token_id = await users_repo.create_token(conn, user_id, token_digest(token))
        return {"user_id": user_id, "token_id": token_id, "token": token}


async def list_tokens(settings: CommonSettings, user: str | None) -> list[dict[str, Any]]:
    """``[{"id", "user", "fingerprint", "create_time", "revoked_at"}]`` (never the secret)."""
    async with _session(settings) as conn:
        return [dict(r.items()) for r in await ops_repo.list_tokens(conn, user)]


async def revoke_token(settings: CommonSettings, token: str | None = None, token_id: int | None = None) -> bool:
    """Revoke by secret or by id; False if unknown or already revoked."""
    async with _session(settings) as conn:
        if token is not None:
            return await users_repo.revoke_token(conn, token_digest(token))
        assert token_id is not None
        return await ops_repo.revoke_token_id(conn, token_id)


async def create_kb(settings: KnowledgeSettings, user: str, name: str) -> dict[str, Any]:
    """A knowledge base owned by ``user``: ``{"kb_id", "name", ...}``; NotFoundError."""
    async with _session(settings) as conn:
        user_id = await ops_repo.user_id_by_name(conn, user)
        if user_id is None:
            raise NotFoundError(f"no user named {user!r}")
        return await users_repo.create_knowledge_base(conn, user_id, name, settings.embedding_model,
                                                      settings.embedding_dim)


async def requeue_stuck(waiting_after_s: float | None, running_after_s: float | None) -> dict[str, Any]:
    """One recovery pass now (``task_service.jobs.scanner.once``) with optional thresholds,
    then one outbox relay pass so re-published messages leave at once:
    ``{"timed_out": [task ids], "republished": [...], "dead_lettered": [...], "published": n,
    "rearmed_parts": [[task id, part], ...], "republished_parts": [...]}`` (parts of split tasks)."""
    from shared.adapters.rabbitmq import BrokerConfig, open_publisher
    from task_service import APP_ID
    from task_service.jobs import relay, scanner
    from task_service.jobs.oneshot import one_shot

    async with one_shot("rag.requeue-stuck") as (settings, pool, conn, channel):
        th = _thresholds(scanner.thresholds(settings), waiting_after_s, running_after_s)
        report = await scanner.once(pool, channel, th)
        publisher = await open_publisher(BrokerConfig.from_settings(settings), conn, app_id=APP_ID)
        published = await relay.once(pool, publisher, grace_s=0.0, dispatch_limit=settings.dispatch_limit,
                                     batch=10_000)
    return {"timed_out": report.timed_out, "republished": report.republished,
            "dead_lettered": report.dead_lettered, "published": published,
            "rearmed_parts": [list(p) for p in report.rearmed_parts],
            "republished_parts": [list(p) for p in report.republished_parts]}


def _thresholds(base: ScanThresholds, waiting_after_s: float | None, running_after_s: float | None) -> ScanThresholds:
    return ScanThresholds(
        heartbeat_timeout=base.heartbeat_timeout if running_after_s is None else timedelta(seconds=running_after_s),
        hard_limit=base.hard_limit,
        requeue_after=base.requeue_after if waiting_after_s is None else timedelta(seconds=waiting_after_s),
    )


async def dlq_list(include_replayed: bool) -> list[dict[str, Any]]:
    from task_service.dlq import DlqConfig, list_dead

    return await list_dead(DlqConfig.from_settings(WorkerSettings()), include_replayed)


async def dlq_replay(dead_letter_id: int) -> dict[str, Any]:
    from task_service.dlq import DlqConfig, replay

    return await replay(DlqConfig.from_settings(WorkerSettings()), dead_letter_id)
