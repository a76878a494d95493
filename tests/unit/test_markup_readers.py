"""Markup, source code and configuration readers (``readers/markup``): headings → sections."""

from __future__ import annotations

import pytest

from task_service.pipeline.limits import DEFAULT_LIMITS
from task_service.pipeline.readers.markup import asciidoc, code, config, latex, log, org, rst

RST = b"""=====
Title
=====

Intro RSTINTRO.

Install
-------

Run pip RSTINSTALL.

Linux
~~~~~

apt RSTLINUX

----

Usage
-----

.. code-block:: python

   import x  # RSTCODE
"""


def sections(reader: object, data: bytes) -> list[tuple[str | None, str]]:
    return [(b.section, b.text) for b in reader.read(data, DEFAULT_LIMITS).blocks]  # type: ignore[attr-defined]


def test_rst_titles_levels_by_adornment_order_and_transition_dropped() -> None:
    got = sections(rst, RST)
    assert ("Title > Install > Linux", "apt RSTLINUX") in got
    assert ("Title > Usage", "   import x  # RSTCODE") in got
    assert ("Title", "Intro RSTINTRO.") in got
    assert all(text != "----" for _, text in got)


def test_rst_short_underline_is_text() -> None:
    assert sections(rst, b"A long title\n---\n\nbody\n") == [(None, "A long title"), (None, "body")]


def test_org_headlines() -> None:
    got = sections(org, b"#+TITLE: Notes\n* TODO Plan ORGTOP\nbody one\n** Sub :tag:\nbody two ORGBODY\n")
    assert got == [(None, "#+TITLE: Notes"), ("TODO Plan ORGTOP", "TODO Plan ORGTOP"),
                   ("TODO Plan ORGTOP", "body one"), ("TODO Plan ORGTOP > Sub :tag:", "Sub :tag:"),
                   ("TODO Plan ORGTOP > Sub :tag:", "body two ORGBODY")]


def test_asciidoc_titles_not_inside_listing_blocks() -> None:
    adoc = b"= Doc\n\nintro\n\n== Part A\n\ntext ADOCA\n\n----\n== not a title\n----\n\n=== Deeper\n\nX\n"
    got = sections(asciidoc, adoc)
    assert ("Doc > Part A", "== not a title") in got
    assert ("Doc > Part A > Deeper", "X") in got


def test_latex_sections_and_markup_removed() -> None:
    tex = rb"""\documentclass{article}
\usepackage{amsmath}
\begin{document}
\section{Intro to \emph{X}}\label{sec:intro}
We show \textbf{TEXBOLD} results~\cite{key}. 50\% done % a comment
\subsection*[short]{Long \textit{title}}
Body TEXBODY.
\end{document}
"""
    got = sections(latex, tex)
    assert ("Intro to X", "We show TEXBOLD results . 50% done") in got
    assert ("Intro to X > Long title", "Body TEXBODY.") in got
    assert not any("usepackage" in text or "document" in text or "comment" in text for _, text in got)


@pytest.mark.parametrize(("line", "head"), [
    ("def parse(data: bytes) -> None:", "def parse"),
    ("async def run():", "async def run"),
    ("class Reader(Base):", "class Reader"),
    ("func (s *Server) Run() error {", "func (s *Server) Run"),
    ("type Server struct {", "type Server struct"),
    ("pub fn read(data: &[u8]) -> Result<()> {", "pub fn read(data: &[u8]) -> Result<()>"),
    ("export async function load(url) {", "export async function load"),
    ("export const handler = async (event) => {", "export const handler = async (event) =>"),
    ("public final class Main {", "public final class Main"),
    ("static int add(int a, int b)", "static int add(int a, int b)"),
    ("CREATE TABLE IF NOT EXISTS document_info (", "CREATE TABLE IF NOT EXISTS document_info"),
    ("deploy() {", "deploy()"),
    ("    def nested(self):", None),
    ("if (x) {", None),
    ("return foo(bar);", None),
    ("notes are (``NotesContainer`` of each slide).", None),  # prose, not a C function head
])
def test_code_symbols(line: str, head: str | None) -> None:
    assert code.symbol(line) == head


def test_code_sections_carry_comments_and_decorators() -> None:
    src = b'"""Module doc."""\nimport os\n\n\n# helper CODECOMMENT\n@cache\ndef helper(x):\n    return x\n\n' \
          b'class Thing:\n    def method(self):\n        return "CODEMARK"\n'
    got = sections(code, src)
    assert got[0] == (None, '"""Module doc."""\nimport os')
    assert ("def helper", "# helper CODECOMMENT\n@cache\ndef helper(x):\n    return x") in got
    assert ("class Thing", 'class Thing:\n    def method(self):\n        return "CODEMARK"') in got


def test_code_no_definitions_inside_docstrings_or_block_comments() -> None:
    src = b'"""Module doc.\n\ndef not_a_function(x):\n"""\n/* a comment\nclass NotAClass:\n*/\ndef real():\n    pass\n'
    assert {section for section, _ in sections(code, src)} == {None, "def real"}


def test_config_sections_yaml_toml_ini() -> None:
    assert sections(config, b"name: demo\nserver:\n  port: 8080 # YAMLPORT\n---\nother: 1\n") == [
        ("name", "name: demo"), ("server", "server:\n  port: 8080 # YAMLPORT"), ("other", "other: 1")]
    assert sections(config, b"[server]\nport = 8080\n\n[[users]]\nname = 'x'\n") == [
        ("server", "[server]\nport = 8080"), ("users", "[[users]]\nname = 'x'")]


def test_log_lines_kept_without_sections() -> None:
    data = b"ERROR: first\n2026-12-04 10:00:01 INFO started\n\n2026-12-04 10:00:02 ERROR LOGMARK failed\n"
    assert sections(log, data) == [(None, "ERROR: first\n2026-12-04 10:00:01 INFO started"),
                                   (None, "2026-12-04 10:00:02 ERROR LOGMARK failed")]
