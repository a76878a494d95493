"""What ``bench/`` may take from ``tests/``, and the other way round (static, from the AST).

- ``bench/`` imports from ``tests`` only the shared test-support package (``tests.support``:
  processes, ports, polling, generated inputs) and the fidelity corpora (``tests.fidelity``);
- those two import nothing else of ``tests`` and nothing of ``bench``, so what bench uses never
  drags in a test tier;
- no test imports ``bench``: the dependency points one way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import ROOT

SHARED = ("tests.support", "tests.fidelity")


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports (``from a import b`` gives ``a`` and ``a.b``:
    ``b`` may be a submodule)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _offending(path: Path, forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    """Imports of ``path`` inside ``forbidden`` and not inside ``allowed``. A ``from tests import
    X`` counts as ``tests.X`` only (``tests`` itself is just the namespace)."""
    names = imported_modules(path) - {"tests"}
    return sorted(n for n in names if _within(n, forbidden) and not _within(n, allowed))


def _files(*parts: str) -> list[Path]:
    return sorted(ROOT.joinpath(*parts).rglob("*.py"))


@pytest.mark.parametrize("path", _files("bench"), ids=lambda p: str(p.relative_to(ROOT)))
def test_bench_imports_only_the_shared_test_support(path: Path) -> None:
    assert _offending(path, ("tests",), SHARED) == [], f"{path}: bench may import only {SHARED} from tests"


@pytest.mark.parametrize("path", _files("tests", "support") + _files("tests", "fidelity"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_shared_test_support_imports_no_test_tier_and_no_bench(path: Path) -> None:
    assert _offending(path, ("tests", "bench"), SHARED) == []


@pytest.mark.parametrize("path", _files("tests"), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_test_imports_bench(path: Path) -> None:
    assert _offending(path, ("bench",)) == []


def test_the_checks_see_imports() -> None:
    """The checker itself: a bench-style file importing a test tier is caught."""
    assert _within("tests.fidelity.docx_corpus", SHARED) and not _within("tests.supportive", SHARED)
    assert _offending(ROOT / "bench" / "stack.py", ("tests",)) != []  # it does import tests.support
