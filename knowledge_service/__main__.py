"""``python -m knowledge_service``: the HTTP API on ``KS_HOST:KS_PORT`` (default 127.0.0.1:8000).

``--help`` prints help and starts nothing; ``rag api`` is the same command.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
import uvicorn

from knowledge_service.app import create_app
from knowledge_service.edge import server_config
from shared.adapters.embedding.models import minilm_model_dir
from shared.adapters.embedding.onnx_graph import fused_graph
from shared.domain.errors import DependencyMissingError
from shared.log import configure
from shared.settings import KnowledgeSettings


def check_local_model(settings: KnowledgeSettings) -> None:
    """Raise ``DependencyMissingError`` when the local model's ONNX graph (the default runtime)
    is missing or stale: before the server starts, not as a traceback from its lifespan."""
    if settings.embedding_provider == "sentence-transformers" and settings.embedding_runtime == "onnx":
        fused_graph(minilm_model_dir())


def serve() -> None:
    """Build settings and serve until SIGTERM/SIGINT."""
    settings = KnowledgeSettings()
    configure(settings.log_level, json_lines=settings.log_json)
    try:
        check_local_model(settings)
    except DependencyMissingError as exc:
        print(f"knowledge_service: refusing to start: {exc}", file=sys.stderr)
        sys.exit(2)
    uvicorn.Server(server_config(create_app(settings), settings)).run()


def api(
    host: Annotated[str | None, typer.Option("--host", help="listen address (KS_HOST)")] = None,
    port: Annotated[int | None, typer.Option("--port", help="listen port (KS_PORT)", min=1, max=65535)] = None,
) -> None:
    if host is not None:
        os.environ["KS_HOST"] = host
    if port is not None:
        os.environ["KS_PORT"] = str(port)
    serve()


def main() -> None:
    cli = typer.Typer(add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})
    cli.command(help="Start the HTTP API (knowledge_service): /api/v1, /docs, /metrics. Settings come from the "
                     "environment and .env (see .env.example); `rag api` is the same command.")(api)
    cli()


if __name__ == "__main__":
    main()
