"""``python -m knowledge_service``: the HTTP API on ``KS_HOST:KS_PORT`` (default 127.0.0.1:8000)."""

from __future__ import annotations

import uvicorn

from knowledge_service.app import create_app
from shared.log import configure
from shared.settings import KnowledgeSettings


def main() -> None:
    settings = KnowledgeSettings()
    configure(settings.log_level, json_lines=settings.log_json)
    uvicorn.run(create_app(settings), host=settings.ks_host, port=settings.ks_port, log_config=None,
                timeout_graceful_shutdown=10)


if __name__ == "__main__":
    main()
