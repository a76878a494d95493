"""Every API route is in the OpenAPI schema, so the schemathesis runs (tests/e2e/test_access.py),
which read the live schema, fuzz all of them — routes added later included."""

from __future__ import annotations

from fastapi.routing import APIRoute

from knowledge_service.app import create_app
from shared.settings import KnowledgeSettings

# routes deliberately left out of the schema, with the reason
HIDDEN_ON_PURPOSE: dict[str, str] = {
    "/docs": "the interactive API page (HTML from the bundled Swagger UI), not an API operation",
}


def test_every_api_route_is_in_the_openapi_schema() -> None:
    app = create_app(KnowledgeSettings())
    hidden = {r.path for r in app.routes if isinstance(r, APIRoute) and not r.include_in_schema}
    assert hidden <= set(HIDDEN_ON_PURPOSE), f"routes schemathesis would not see: {hidden - set(HIDDEN_ON_PURPOSE)}"
    paths = app.openapi()["paths"]
    for route in app.routes:
        if isinstance(route, APIRoute) and route.include_in_schema:
            assert route.path in paths
            assert {m.lower() for m in route.methods} <= set(paths[route.path]), route.path
