"""The handed cases (``shared/cases/{formats,extraction}``, each with a README of what must hold)
are tests: every file there has its expectations in an e2e test, and the folders are found (a
missing folder fails here instead of letting the e2e tests pass without them). Reads files only."""

from __future__ import annotations

import pytest

from tests.support import CASES


@pytest.mark.parametrize(("folder", "module"), [
    ("extraction", "tests.e2e.test_extraction_cases"),
    ("formats", "tests.e2e.test_formats"),
])
def test_every_handed_case_has_its_expectations_in_a_test(folder: str, module: str) -> None:
    import importlib

    cases = CASES / folder
    assert cases.is_dir(), f"{cases} is missing: the handed cases would not be tested"
    on_disk = {p.name for p in cases.iterdir() if p.is_file() and p.name != "README.md"}
    mod = importlib.import_module(module)
    expected = set(getattr(mod, "EXPECTED", None) or mod.HANDED)
    assert on_disk == expected, f"{folder}: on disk but not tested {sorted(on_disk - expected)}, " \
                                f"tested but gone {sorted(expected - on_disk)}"
