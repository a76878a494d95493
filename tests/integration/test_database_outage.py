"""PostgreSQL unreachable for the API: every route answers 503 + Retry-After, never 500; an
upload whose object is already stored leaves nothing behind; the API works again once the
database is back.

The API app runs in this process on the real services (PostgreSQL, RabbitMQ, Redis, S3) with
its ``DATABASE_URL`` pointing at a TCP proxy the test controls (:mod:`tests.tcp_proxy`): cutting
the proxy resets the API's pooled connections and refuses new ones, as a stopped or unreachable
server would; the machine's PostgreSQL server is never touched.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import asyncpg
import httpx
import numpy as np
import pytest

from knowledge_service.app import create_app
from knowledge_service.deps import Resources, token_digest
from shared.adapters.embedding.vectors import FloatMatrix
from shared.adapters.postgres.pool import PoolConfig, connection, create_pool
from shared.adapters.postgres.repo import users as users_repo
from shared.domain.errors import DatabaseUnavailableError
from shared.settings import KnowledgeSettings
from tests.integration.helpers import apoll
from tests.tcp_proxy import TcpProxy

TEXT = ("A database outage must be a clear 503 and leave no orphan object. " * 40 + "\n\n") * 8


@pytest.fixture
async def proxy(services_env: dict[str, str]) -> AsyncIterator[TcpProxy]:
    url = urlsplit(services_env["DATABASE_URL"])
    p = await TcpProxy.start(url.hostname or "127.0.0.1", url.port or 5432)
    yield p
    await p.close()


@pytest.fixture
def proxied(settings: KnowledgeSettings, proxy: TcpProxy) -> KnowledgeSettings:
    """The test settings with the database behind the proxy; a 2 s connect timeout (hang())."""
    return settings.model_copy(update={
        "database_url": proxy.dsn(settings.database_url), "db_connect_timeout_s": 2.0,
        # never loads the local model; the routes get a fake embedder (see api())
        "embedding_provider": "openai", "embedding_base_url": "http://127.0.0.1:9",
    })


class _Embedder:
    """The embedder port: a fixed unit vector; cuts ``proxy_cut`` first, once, when set (the
    database goes away in the middle of a search request)."""

    model_name = "fake"
    dim = 384

    def __init__(self) -> None:
        self.proxy_cut: TcpProxy | None = None

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        if self.proxy_cut is not None:
            proxy, self.proxy_cut = self.proxy_cut, None
            await proxy.cut()
        vecs = np.zeros((len(texts), self.dim), dtype=np.float32)
        vecs[:, 0] = 1.0
        return vecs


@dataclass
class Api:
    http: httpx.AsyncClient
    resources: Resources
    embedder: _Embedder


@pytest.fixture
async def api(proxied: KnowledgeSettings, db: asyncpg.Connection) -> AsyncIterator[Api]:
    """The app (lifespan entered) behind an in-process ASGI client, authenticated as a fresh user;
    an exception no handler maps is a 500 answer, as from a server."""
    token = uuid.uuid4().hex
    user_id = await users_repo.create_user(db, f"dbdown-{token[:8]}")
    await users_repo.create_token(db, user_id, token_digest(token))
    app = create_app(proxied)
    async with app.router.lifespan_context(app):
        resources: Resources = app.state.resources
        embedder = _Embedder()
        resources.embedder = embedder
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False), base_url="http://api",
                                     headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            yield Api(http, resources, embedder)


async def _new_kb(api: Api) -> int:
    r = await api.http.post("/api/v1/knowledge-bases", json={"name": "outage"})
    assert r.status_code == 201, r.text
    return int(r.json()["kb_id"])


async def _objects(api: Api, kb_id: int) -> list[str]:
    return [key for key, _ in await api.resources.store.list_page(f"kb/{kb_id}/", None, 1000)]


def _assert_unavailable(r: httpx.Response) -> None:
    assert r.status_code == 503, (r.status_code, r.text)
    assert r.json() == {"detail": "database unavailable", "error_code": "database_unavailable"}
    assert r.headers["retry-after"] == "5"


async def test_every_route_answers_503_while_postgres_is_unreachable_then_works_again(
    api: Api, proxy: TcpProxy, db: asyncpg.Connection
) -> None:
    kb = await _new_kb(api)
    r = await api.http.post(f"/api/v1/knowledge-bases/{kb}/documents", files={"file": ("before.txt", TEXT.encode())})
    assert r.status_code == 202, r.text
    doc = r.json()["document_id"]
    assert proxy.connections >= 1  # the API's pool is connected through the proxy

    await proxy.cut()
    _assert_unavailable(await api.http.post(f"/api/v1/knowledge-bases/{kb}/documents",
                                            files={"file": ("during.txt", b"refused while the database is down")}))
    _assert_unavailable(await api.http.get(f"/api/v1/documents/{doc}"))
    _assert_unavailable(await api.http.post(f"/api/v1/knowledge-bases/{kb}/search",
                                            json={"query": "database outage", "mode": "keyword"}))
    _assert_unavailable(await api.http.get("/api/v1/knowledge-bases"))
    ready = await api.http.get("/readyz")
    assert ready.status_code == 503 and ready.json()["detail"]["database"].startswith("unavailable")
    assert (await api.http.get("/healthz")).status_code == 200  # liveness: the process is fine
    assert len(await _objects(api, kb)) == 1  # the refused upload stored nothing

    await proxy.hang()  # a server that accepts and never answers: the connect timeout (2 s) fires
    _assert_unavailable(await api.http.get("/api/v1/knowledge-bases"))

    await proxy.restore()
    r = await api.http.post(f"/api/v1/knowledge-bases/{kb}/documents", files={"file": ("after.txt", b"back again")})
    assert r.status_code == 202, r.text
    assert (await api.http.get(f"/api/v1/documents/{doc}")).json()["document_id"] == doc
    r = await api.http.post(f"/api/v1/knowledge-bases/{kb}/search", json={"query": "database outage"})
    assert r.status_code == 200, r.text
    r = await api.http.get("/api/v1/knowledge-bases")
    assert r.status_code == 200 and kb in [k["kb_id"] for k in r.json()["items"]]
    assert (await api.http.get("/readyz")).json()["detail"]["database"] == "ok"
    assert await db.fetchval("SELECT count(*) FROM document_info WHERE kb_id = $1", kb) == 2


async def test_upload_whose_object_is_stored_when_the_database_goes_leaves_no_object(
    api: Api, proxy: TcpProxy, db: asyncpg.Connection
) -> None:
    kb = await _new_kb(api)
    boundary = uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"cut.txt\"\r\n"
            "Content-Type: text/plain\r\n\r\n").encode()
    data = TEXT.encode()

    async def body() -> AsyncIterator[bytes]:
        # the route asks for the body only once the token, the KB and the in-flight cap were
        # checked on the database: cut it then, while the object is being stored
        yield head + data[: len(data) // 2]
        await proxy.cut()
        yield data[len(data) // 2:] + f"\r\n--{boundary}--\r\n".encode()

    r = await api.http.post(f"/api/v1/knowledge-bases/{kb}/documents", content=body(),
                            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    _assert_unavailable(r)
    assert await _objects(api, kb) == []  # stored, then removed when its rows could not be written
    assert api.resources.metrics.registry.get_sample_value("rag_uploads_total", {"result": "503"}) == 1

    await proxy.restore()
    assert await db.fetchval("SELECT count(*) FROM document_info WHERE kb_id = $1", kb) == 0
    r = await api.http.post(f"/api/v1/knowledge-bases/{kb}/documents", files={"file": ("cut.txt", data)})
    assert r.status_code == 202, r.text  # the same bytes again: a new document, not a duplicate
    assert len(await _objects(api, kb)) == 1


async def test_search_losing_the_database_mid_request_is_a_503(api: Api, proxy: TcpProxy) -> None:
    kb = await _new_kb(api)
    api.embedder.proxy_cut = proxy  # the query is embedded after the ownership check: cut then
    _assert_unavailable(await api.http.post(f"/api/v1/knowledge-bases/{kb}/search", json={"query": "outage"}))
    await proxy.restore()
    r = await api.http.post(f"/api/v1/knowledge-bases/{kb}/search", json={"query": "outage"})
    assert r.status_code == 200 and r.json()["results"] == []


async def test_a_connection_dropped_mid_query_is_database_unavailable(
    proxied: KnowledgeSettings, proxy: TcpProxy, db: asyncpg.Connection
) -> None:
    name = f"dbdown-{uuid.uuid4().hex[:8]}"
    pool = await create_pool(PoolConfig.from_settings(proxied, max_size=2), app_name=name)
    try:
        async def sleep_on_the_server() -> None:
            async with connection(pool) as conn:
                await conn.fetchval("SELECT pg_sleep(3)")

        query = asyncio.ensure_future(sleep_on_the_server())
        await apoll(lambda: db.fetchval("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1"
                                        " AND state = 'active' AND query LIKE '%pg_sleep%'", name),
                    deadline_s=10, what="the query running on the server")
        await proxy.cut()
        with pytest.raises(DatabaseUnavailableError) as info:
            await query
        assert isinstance(info.value.__cause__, asyncpg.exceptions.ConnectionDoesNotExistError | OSError)
        with pytest.raises(DatabaseUnavailableError) as info:  # and no new connection: refused
            async with connection(pool):
                pass
        assert isinstance(info.value.__cause__, OSError)
        await proxy.restore()
        async with connection(pool) as conn:
            assert await conn.fetchval("SELECT 1") == 1
    finally:
        await pool.close()
