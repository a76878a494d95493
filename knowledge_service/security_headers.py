"""Security headers on every response (an ASGI middleware: streaming responses pass untouched).

Every response: ``X-Frame-Options: DENY`` and a CSP with ``frame-ancestors 'none'`` (no page
may frame ours: issue 18 framed ``/admin`` signed in from another port of the same host, with
Retry, Reindex and Delete clickable), ``X-Content-Type-Options: nosniff`` and
``Referrer-Policy: no-referrer``. The CSP by path:

- ``/admin`` and ``/static/admin/``: ``default-src 'self'`` with no inline script or style
  (the page is one HTML file, ``admin.js`` and ``admin.css``; its favicon is a ``data:`` URI);
- ``/docs`` and ``/static/swagger/``: the same, but styles may be inline (Swagger UI sets them)
  and images may be ``data:`` URIs (its icons); its start-up script is a file
  (``static/docs/init.js``), not inline;
- anything else (JSON, Server-Sent Events, ``/metrics``): ``default-src 'none'``: nothing an
  API answer holds may run or load anything if a browser ever renders it.

The header values follow the OWASP HTTP Headers Cheat Sheet and CSP Level 3
(https://www.w3.org/TR/CSP3/#directive-frame-ancestors). ``X-Frame-Options`` is for browsers
without ``frame-ancestors``.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

COMMON: tuple[tuple[bytes, bytes], ...] = (
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
_PAGE = ("default-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; object-src 'none'; "
         "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
ADMIN_CSP = _PAGE + "; style-src 'self'"
DOCS_CSP = _PAGE + "; style-src 'self' 'unsafe-inline'"
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


def policy_for(path: str) -> str:
    """The Content-Security-Policy of a response to ``path`` (see the module docstring)."""
    if path == "/admin" or path.startswith(("/admin/", "/static/admin/")):
        return ADMIN_CSP
    if path == "/docs" or path.startswith(("/docs/", "/static/swagger/", "/static/docs/")):
        return DOCS_CSP
    return API_CSP


class SecurityHeadersMiddleware:
    """Adds :data:`COMMON` and the path's CSP to every HTTP response (replacing any already set)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = (*COMMON, (b"content-security-policy", policy_for(scope.get("path", "")).encode()))
        names = {name for name, _ in extra}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
