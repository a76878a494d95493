"""The layering rules, checked on the source (no import needed):

* ``knowledge_service`` and ``task_service`` never import each other;
* the shared domain modules (states, decisions, errors, ports, use cases...) import no I/O
  library, and only other domain modules of ``shared``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IO_LIBRARIES = {"asyncpg", "aio_pika", "aiormq", "redis", "minio", "httpx", "fastapi", "starlette", "uvicorn",
                "pgvector", "boto3", "socket", "urllib"}
#: pure modules of shared/: states, decisions, wire schema, errors, ports and use cases
DOMAIN = {"states", "fencing", "scan_policy", "retry_policy", "messages", "errors", "records", "ports",
          "usecases", "ranking", "normalize", "text_sniff", "log", "faults"}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


@pytest.mark.parametrize(("package", "forbidden"), [("knowledge_service", "task_service"),
                                                    ("task_service", "knowledge_service")])
def test_services_never_import_each_other(package: str, forbidden: str) -> None:
    bad = {str(p.relative_to(ROOT)): sorted(m for m in imports(p) if m.split(".")[0] == forbidden)
           for p in (ROOT / package).rglob("*.py")}
    assert {k: v for k, v in bad.items() if v} == {}


def test_shared_never_imports_a_service() -> None:
    bad = {str(p.relative_to(ROOT)): sorted(m for m in imports(p) if m.split(".")[0] in
                                            ("knowledge_service", "task_service"))
           for p in (ROOT / "shared").rglob("*.py")}
    assert {k: v for k, v in bad.items() if v} == {}


@pytest.mark.parametrize("module", sorted(DOMAIN))
def test_domain_modules_import_no_io_library(module: str) -> None:
    found = imports(ROOT / "shared" / f"{module}.py")
    assert sorted(m for m in found if m.split(".")[0] in IO_LIBRARIES) == []
    shared = {m.split(".")[1] for m in found if m.startswith("shared.")}
    assert shared <= DOMAIN, f"shared.{module} imports adapters: {sorted(shared - DOMAIN)}"
