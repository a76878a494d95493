"""Operator CLI: ``python -m knowledge_service.cli create-user NAME`` and ``revoke-token TOKEN``.

``create-user`` prints JSON ``{"user_id": .., "token": ..}``; the token is shown once and stored
only as its SHA-256.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys

import asyncpg

from knowledge_service.deps import token_digest
from shared import queries
from shared.migrate import migrate
from shared.settings import KnowledgeSettings


async def create_user(dsn: str, name: str) -> dict[str, object]:
    await migrate(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        token = "rag_" + secrets.token_urlsafe(32)
        async with conn.transaction():
            user_id = await conn.fetchval("SELECT id FROM app_user WHERE name = $1", name)
            if user_id is None:
                user_id = await queries.create_user(conn, name)
            await queries.create_token(conn, user_id, token_digest(token))
        return {"user_id": user_id, "token": token}
    finally:
        await conn.close()


async def revoke_token(dsn: str, token: str) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        return await queries.revoke_token(conn, token_digest(token))
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m knowledge_service.cli")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("create-user", help="create a user (or add a token to it); prints JSON")
    p.add_argument("name")
    p = sub.add_parser("revoke-token", help="revoke an API token")
    p.add_argument("token")
    args = parser.parse_args(argv)
    dsn = KnowledgeSettings().database_url
    if args.cmd == "create-user":
        print(json.dumps(asyncio.run(create_user(dsn, args.name))))
        return 0
    ok = asyncio.run(revoke_token(dsn, args.token))
    print(json.dumps({"revoked": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
