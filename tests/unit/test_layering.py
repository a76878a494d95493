"""The layering rules (ARCHITECTURE.md), checked on the source by folder (no import needed):

* ``shared/domain/**`` imports no I/O library, and of ``shared`` only ``shared.domain``;
* ``shared/ports.py`` and ``shared/usecases/**`` import of ``shared`` only the domain, the ports,
  the use cases and the two cross-cutting helpers ``shared.log`` / ``shared.faults`` (themselves
  free of I/O libraries and importing only the domain); never an adapter;
* ``knowledge_service`` and ``task_service`` never import each other; ``shared`` never imports a
  service;
* the module import graph of ``shared``, ``knowledge_service`` and ``task_service`` has no
  cycle, neither at module level (``TYPE_CHECKING`` blocks left out) nor with every import
  (inside functions too);
* one road to the database: of the services, only the composition roots import the PostgreSQL
  adapter (the exemptions listed), and no module of theirs holds SQL text.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IO_LIBRARIES = {"asyncpg", "aio_pika", "aiormq", "redis", "minio", "httpx", "fastapi", "starlette", "uvicorn",
                "pgvector", "boto3", "socket", "urllib"}
SERVICES = ("knowledge_service", "task_service")
PACKAGES = ("shared", *SERVICES)
#: pure helpers every layer may use (structured logging context, test-only fault points)
CROSS_CUTTING = {"shared.log", "shared.faults"}
#: what ports and use cases may import of ``shared``
INNER = ("shared.domain", "shared.ports", "shared.usecases", *sorted(CROSS_CUTTING))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module named by a (possibly relative) ``from`` import."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _targets(node: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Modules an import statement names: ``from a import b`` names ``a.b`` when that is a module."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = _absolute(node, module, is_package)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            yield sub if _exists(sub) else base


def _exists(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in the file."""
    module, is_package = module_name(path), path.name == "__init__.py"
    return {t for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            for t in _targets(node, module, is_package)}


def _is_type_checking(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for node in body:
        if isinstance(node, ast.If) and not _is_type_checking(node):
            yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _module_level(block)
        else:
            yield node


def module_level_imports(path: Path) -> set[str]:
    """The modules ``path`` imports when it is imported (module level, outside TYPE_CHECKING)."""
    module, is_package = module_name(path), path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {t for node in _module_level(tree.body) for t in _targets(node, module, is_package)}


def files(folder: str) -> list[Path]:
    path = ROOT / folder
    return [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))


def _under(module: str, prefixes: tuple[str, ...] | set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _violations(folder: str, allowed: tuple[str, ...]) -> dict[str, list[str]]:
    bad = {str(p.relative_to(ROOT)): sorted(m for m in imports(p)
                                            if m.split(".")[0] in IO_LIBRARIES
                                            or (_under(m, PACKAGES) and not _under(m, allowed)))
           for p in files(folder)}
    return {k: v for k, v in bad.items() if v}


def test_domain_imports_no_io_library_and_only_the_domain() -> None:
    assert files("shared/domain"), "shared/domain/ is empty"
    assert _violations("shared/domain", ("shared.domain",)) == {}


@pytest.mark.parametrize("folder", ["shared/ports.py", "shared/usecases", "shared/log.py", "shared/faults.py"])
def test_ports_and_usecases_import_only_inner_layers(folder: str) -> None:
    allowed = INNER if folder in ("shared/ports.py", "shared/usecases") else ("shared.domain",)
    assert _violations(folder, allowed) == {}


@pytest.mark.parametrize("folder", ["shared/domain", "shared/ports.py", "shared/usecases"])
def test_adapters_never_imported_by_inner_layers(folder: str) -> None:
    bad = {str(p.relative_to(ROOT)): sorted(m for m in imports(p) if _under(m, ("shared.adapters",)))
           for p in files(folder)}
    assert {k: v for k, v in bad.items() if v} == {}


@pytest.mark.parametrize(("package", "forbidden"), [("knowledge_service", "task_service"),
                                                    ("task_service", "knowledge_service")])
def test_services_never_import_each_other(package: str, forbidden: str) -> None:
    bad = {str(p.relative_to(ROOT)): sorted(m for m in imports(p) if m.split(".")[0] == forbidden)
           for p in files(package)}
    assert {k: v for k, v in bad.items() if v} == {}


def test_shared_never_imports_a_service() -> None:
    bad = {str(p.relative_to(ROOT)): sorted(m for m in imports(p) if m.split(".")[0] in SERVICES)
           for p in files("shared")}
    assert {k: v for k, v in bad.items() if v} == {}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` as a path of modules (first == last), or [] (iterative DFS)."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                path = [n for n, _ in stack]
                return [*path[path.index(child):], child]
            elif not state.get(child):
                state[child] = 1
                stack.append((child, iter(sorted(graph.get(child, ())))))
    return []


def _graph(which: Callable[[Path], set[str]]) -> dict[str, set[str]]:
    return {module_name(p): {m for m in which(p) if _under(m, PACKAGES)} - {module_name(p)}
            for pkg in PACKAGES for p in files(pkg)}


def test_import_graph_is_acyclic() -> None:
    """Module-level imports (what runs when a module is imported) form no cycle."""
    graph = _graph(module_level_imports)
    assert len(graph) > 50
    assert _cycle(graph) == []


def test_import_graph_with_imports_inside_functions_is_acyclic() -> None:
    """Every import, those inside functions and ``TYPE_CHECKING`` blocks included: a deferred
    import does not hide a circle (issue 27: ``eml`` ↔ ``mail`` ↔ ``msg`` was tied that way)."""
    graph = _graph(imports)
    assert len(graph) > 50
    assert _cycle(graph) == []


def test_imports_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    source = tmp_path / "late.py"
    source.write_text("def f() -> None:\n    from task_service.pipeline import parse\n", encoding="utf-8")
    tree = ast.parse(source.read_text(encoding="utf-8"))
    found = {t for node in ast.walk(tree) for t in _targets(node, "late", False)}
    assert found == {"task_service.pipeline.parse"}


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


# ------------------------------------------------------------------ one road to the database (issue 27, item 3)
POSTGRES_ADAPTER = ("shared.adapters.postgres",)
#: The composition roots: the only modules of the services that import the PostgreSQL adapter
#: (they build the pool and hand the ports' adapters to everything else).
POSTGRES_ROOTS = {
    "knowledge_service/app.py",  # the API
    "knowledge_service/deps.py",  # the API's resources (PgReads, typed)
    "task_service/__main__.py",  # the worker
    "task_service/jobs/oneshot.py",  # `rag ops JOB --once`
    "task_service/dlq.py",  # `rag dlq`
}
#: Not yet behind a port (listed, not hidden): the jobs that hold one connection across several
#: statements (the relay claims, publishes and marks rows in one transaction; the scanner and the
#: orphan sweep go row by row) still call the repository on ``pool.connection``. The
#: single-statement jobs go through the ``MaintenanceStore`` port.
POSTGRES_EXEMPT = {
    "task_service/cleanup.py",
    "task_service/jobs/relay.py",
    "task_service/jobs/scanner.py",
}


def _postgres_importers() -> set[str]:
    return {str(p.relative_to(ROOT)) for pkg in SERVICES for p in files(pkg)
            if any(_under(m, POSTGRES_ADAPTER) for m in imports(p))}


def test_only_composition_roots_import_the_postgres_adapter() -> None:
    assert _postgres_importers() - POSTGRES_ROOTS - POSTGRES_EXEMPT == set()


def test_the_exemptions_are_still_needed() -> None:
    """An exempted module that no longer imports the adapter leaves the list."""
    assert POSTGRES_EXEMPT - _postgres_importers() == set()
    assert POSTGRES_ROOTS <= _postgres_importers()


#: SQL in a string literal (docstrings left out): a statement's verbs as PostgreSQL reads them.
SQL_TEXT = re.compile(r"\b(SELECT\s+[\w*(]|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX)"
                      r"|ALTER\s+TABLE|SET\s+LOCAL|pg_advisory\w*)")
#: Modules of the services allowed to hold SQL text for now: none.
SQL_EXEMPT: set[str] = set()


def _sql_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [f"{n.lineno}: {n.value[:60]!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
            and SQL_TEXT.search(n.value)]


def test_no_sql_text_in_the_services() -> None:
    bad = {str(p.relative_to(ROOT)): _sql_literals(p) for pkg in SERVICES for p in files(pkg)
           if str(p.relative_to(ROOT)) not in SQL_EXEMPT}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_sql_finder_finds_sql() -> None:
    assert SQL_TEXT.search("SELECT count(*) FROM t") and SQL_TEXT.search("DELETE FROM t WHERE")
    assert not SQL_TEXT.search("select the best chunk, then update the list")
