"""The container image installs the system packages the host setup installs, from one list
(``deploy/system-packages.txt``), and that list holds the language data of the default OCR languages."""

from __future__ import annotations

import re

from shared.settings import WorkerSettings
from task_service.pipeline.limits import DEFAULT_LIMITS
from tests.support import ROOT

LIST = ROOT / "deploy" / "system-packages.txt"


def _packages() -> list[str]:
    return [name for line in LIST.read_text().splitlines() if (name := line.split("#", 1)[0].strip())]


def _dockerfile_installs() -> list[str]:
    """The packages the Dockerfile's ``apt-get install`` lines name: the list file's, when it installs from it."""
    text = (ROOT / "Dockerfile").read_text()
    names: list[str] = []
    for command in re.findall(r"RUN (.*?)(?<!\\)\n", text, re.S):
        if "apt-get install" not in command:
            continue
        if "COPY deploy/system-packages.txt /tmp/system-packages.txt" in text and "/tmp/system-packages.txt" in command:
            names += _packages()
        tail = command.split("apt-get install", 1)[1].split("&&", 1)[0]
        names += [w for w in tail.replace("\\\n", " ").split() if not w.startswith("-")]
    return names


def _makefile_installs() -> list[str]:
    """The packages ``make ocr`` installs: the list file's when ``SYSTEM_PACKAGES`` is read from it."""
    text = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^ocr:\n((?:\t.*\n)+)", text, re.M)
    assert recipe is not None, "the Makefile has no ocr target"
    reads_list = re.search(r"^SYSTEM_PACKAGES := \$\(shell sed -e 's/\\#\.\*//' deploy/system-packages\.txt\)$",
                           text, re.M)
    return _packages() if reads_list and "$(SYSTEM_PACKAGES)" in recipe.group(1) else []


def test_the_image_and_the_host_setup_install_the_same_packages() -> None:
    listed = _packages()
    assert listed and len(listed) == len(set(listed))
    assert sorted(set(_makefile_installs())) == sorted(listed)
    assert sorted(set(_dockerfile_installs())) == sorted(listed)


def test_every_default_ocr_language_has_its_package() -> None:
    languages = {WorkerSettings.model_fields["ocr_languages"].default, DEFAULT_LIMITS.ocr_languages}
    assert len(languages) == 1
    for language in languages.pop().split("+"):
        assert f"tesseract-ocr-{language.replace('_', '-')}" in _packages(), language
