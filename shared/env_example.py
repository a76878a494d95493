"""``.env.example``, generated from the settings' fields and descriptions (one source for both).

``python -m shared.env_example`` writes the file at the repository root; ``--check`` exits 1
(and names the difference) when the file on disk is not what the settings give. Every field of
:class:`~shared.settings.KnowledgeSettings` and :class:`~shared.settings.WorkerSettings` is
listed once, in declaration order (the settings both services read first), with its description
as a comment and its declared default as the value; a field defaulting to ``None`` is commented
out. A few headings group the fields; the variables read only by Docker Compose or the scripts
(no setting of ours) close the file.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from pydantic.fields import FieldInfo

from shared.settings import CommonSettings, KnowledgeSettings, WorkerSettings

PATH = Path(__file__).resolve().parents[1] / ".env.example"
WIDTH = 100

HEADER = """\
# Configuration for knowledge_service and task_service (pydantic-settings: every variable below
# can also be set in the environment, which wins over this file). `make env` copies this file to
# .env with freshly generated secrets; never commit .env.
# GENERATED from shared/settings.py by `python -m shared.env_example`: edit the settings'
# descriptions there, not this file (tests/unit/test_env_example.py checks it is current).
"""

#: a heading printed before the field it names (lower-case field name)
SECTIONS: dict[str, str] = {
    "database_url": "PostgreSQL",
    "amqp_url": "RabbitMQ. `make env` fills in a generated user (RABBITMQ_DEFAULT_USER/PASS below) that "
                "scripts/services.sh creates on the local broker; in production use one user per service "
                "(see deploy/rabbitmq-definitions.example.json). No default password is used.",
    "redis_url": "Redis",
    "db_idle_in_transaction_timeout_s": "Partitions (README \"Guarantees\"): no PostgreSQL session and no client "
                                        "connection outlives its peer's partition; a lock wait gives up and is "
                                        "retried",
    "s3_endpoint": "Object storage",
    "embedding_provider": "Embeddings",
    "stale_waiting_s": "Enqueue policy (the API and the DLQ replay apply the same rules)",
    "log_level": "Logging",
    "dispatch_workers": "Fair dispatch (API and worker): at most K tasks of one user are in the broker or "
                        "running; the rest wait in PostgreSQL and are released round-robin across users as "
                        "slots free up",
    "ks_host": "knowledge_service (HTTP API)",
    "ks_max_url_bytes": "The edge (knowledge_service/edge.py): request limits decided as the bytes arrive",
    "search_max_top_k": "Search (README \"Search\"; figures in bench/RESULTS.md)",
    "events_poll_interval_s": "Server-Sent Events (/events routes, the admin page)",
    "prefetch": "task_service (worker)",
    "embedding_cache_max_rows": "Embedding cache (text SHA-256 -> vector)",
    "worker_metrics_port": "Prometheus /metrics of the worker (one port per worker process)",
    "orphan_sweep_interval_s": "Orphaned objects",
    "parse_sandbox": "Parsing sandbox (task_service/pipeline/sandbox.py): documents are parsed in a long-lived "
                     "child process with these limits; hitting one ends the task FAILED with error_code "
                     "parse_limit (permanent) and the child is replaced, the worker goes on",
    "zip_max_uncompressed_mb": "Structural limits checked by the parser (task_service/pipeline/limits.py); the "
                               "ZIP ones hold for every ZIP-based format (DOCX, PPTX, XLSX, ODF, EPUB), read from "
                               "the central directory before the document is parsed; the older DOCX_MAX_* names "
                               "are still read (ZIP_MAX_* wins when both are set)",
    "table_max_cells": "Tables (XLSX, ODS, CSV/TSV read as rows)",
    "ocr_languages": "OCR: images and scanned PDF pages (Tesseract with Debian's language data)",
}

TRAILER = """\
# --- RabbitMQ management API (scripts and tests only)
RABBITMQ_MANAGEMENT_URL=http://127.0.0.1:15672

# --- Docker Compose only (compose.yaml refuses to start while any is empty; `make env` fills them)
POSTGRES_PASSWORD=
RABBITMQ_DEFAULT_USER=
RABBITMQ_DEFAULT_PASS=
REDIS_PASSWORD=
MINIO_ROOT_USER=
MINIO_ROOT_PASSWORD=
"""


def value(default: Any) -> str:
    """A default as an env file writes it: ``true``/``false``, ``60`` for ``60.0``, a secret's
    own text (a default is never a real secret), ``""`` for an empty string."""
    if isinstance(default, SecretStr):
        return default.get_secret_value()
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)


def _comment(text: str, *, heading: bool = False) -> list[str]:
    prefix = "# --- " if heading else "# "
    return textwrap.wrap(text, WIDTH, initial_indent=prefix, subsequent_indent="# ",
                         break_on_hyphens=False, break_long_words=False)


def field_lines(name: str, info: FieldInfo) -> list[str]:
    """``# description`` (wrapped at 100 columns) and ``NAME=default`` (``# NAME=`` when None).

    Raises ValueError for a field without a description or a default (every setting states both).
    """
    if not info.description:
        raise ValueError(f"setting {name} has no description")
    if info.is_required():
        raise ValueError(f"setting {name} has no default")
    assignment = f"{name.upper()}={'' if info.default is None else value(info.default)}"
    return [*_comment(info.description), assignment if info.default is not None else f"# {assignment}"]


def _fields() -> dict[str, FieldInfo]:
    """Every setting once: the common ones, then the API's, then the worker's."""
    return {**CommonSettings.model_fields, **KnowledgeSettings.model_fields, **WorkerSettings.model_fields}


def render() -> str:
    """The whole ``.env.example`` text."""
    lines = [HEADER.rstrip("\n")]
    for name, info in _fields().items():
        if name in SECTIONS:
            lines += ["", *_comment(SECTIONS[name], heading=True)]
        lines += field_lines(name, info)
    return "\n".join(lines) + "\n\n" + TRAILER


def main(argv: list[str] | None = None) -> int:
    """Write ``.env.example`` (exit 0), or with ``--check`` compare it (exit 1 with a diff)."""
    parser = argparse.ArgumentParser(prog="python -m shared.env_example", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if .env.example is not current")
    args = parser.parse_args(argv)
    text = render()
    if not args.check:
        PATH.write_text(text, encoding="utf-8")
        return 0
    current = PATH.read_text(encoding="utf-8") if PATH.exists() else ""
    if current == text:
        return 0
    sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                               ".env.example", "generated"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
