"""``.env.example`` is generated from the settings (``python -m shared.env_example``): the file on
disk is the current rendering, it names every setting once with its default, and the lines
``scripts/gen-env.sh`` rewrites with generated secrets are there."""

from __future__ import annotations

import re

import pytest
from pydantic import Field
from pydantic_settings import BaseSettings

from shared import env_example
from shared.settings import KnowledgeSettings, WorkerSettings
from tests.support import ROOT

ASSIGNMENT = re.compile(r"^(?:# )?([A-Z][A-Z0-9_]*)=(.*)$", re.M)


def _assignments() -> dict[str, str]:
    found = ASSIGNMENT.findall((ROOT / ".env.example").read_text(encoding="utf-8"))
    names = [name for name, _ in found]
    assert len(names) == len(set(names)), "a variable is listed twice"
    return dict(found)


def test_the_file_is_current() -> None:
    """Fails after a setting is added or its description changed: run ``python -m shared.env_example``."""
    assert (ROOT / ".env.example").read_text(encoding="utf-8") == env_example.render()
    assert env_example.main(["--check"]) == 0


def test_every_setting_is_named_with_its_default() -> None:
    listed = _assignments()
    fields = {**KnowledgeSettings.model_fields, **WorkerSettings.model_fields}
    assert len(fields) >= 116
    for name, info in fields.items():
        assert name.upper() in listed, name
        expected = "" if info.default is None else env_example.value(info.default)
        assert listed[name.upper()] == expected, name


def test_the_defaults_read_back_as_the_defaults() -> None:
    """The file's values, validated as settings, are the declared defaults (no value written in a
    form the settings read otherwise)."""
    text = (ROOT / ".env.example").read_text(encoding="utf-8")
    values = {name.lower(): v for name, v in re.findall(r"^([A-Z][A-Z0-9_]*)=(.*)$", text, re.M)
              if name.lower() in WorkerSettings.model_fields}  # the commented-out (None) ones left out
    from_file = WorkerSettings(_env_file=None, **values).model_dump()  # type: ignore[call-arg]
    declared = WorkerSettings.model_construct().model_dump()
    assert len(values) > 90
    assert {k: from_file[k] for k in values} == {k: declared[k] for k in values}


def test_gen_env_finds_the_lines_it_fills_in() -> None:
    listed = _assignments()
    script = (ROOT / "scripts" / "gen-env.sh").read_text(encoding="utf-8")
    for name in re.findall(r"s\|\^([A-Z_0-9]+)=", script):
        assert name in listed, name


@pytest.mark.parametrize("value, text", [(True, "true"), (False, "false"), (60.0, "60"), (0.5, "0.5"),
                                         (50_000_000, "50000000"), ("", "")])
def test_values_are_written_as_an_env_file_reads_them(value: object, text: str) -> None:
    assert env_example.value(value) == text


def test_a_setting_without_a_description_is_refused() -> None:
    class Bare(BaseSettings):
        x: int = 1
        y: int = Field(2, description="two")

    with pytest.raises(ValueError, match="x has no description"):
        env_example.field_lines("x", Bare.model_fields["x"])
    assert env_example.field_lines("y", Bare.model_fields["y"]) == ["# two", "Y=2"]
