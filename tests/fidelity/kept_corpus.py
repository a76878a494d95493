"""Fidelity corpus for the formats people keep (issue 29): legacy Office binaries, markup, source
code, configuration and logs, and phone photos (HEIC); one marker word per construct.

``samples(kind)`` for ``kind`` in ``KINDS`` (a registry kind); ``SECTIONS`` per sample: the section
expected for a few markers. Legacy files come from ``legacy_writer`` (no LibreOffice needed); the
HEIC photo is an OCR page (``tests/support/ocrgen.py``) encoded by pillow-heif.
"""

from __future__ import annotations

from tests.fidelity import Sample
from tests.fidelity.legacy_writer import make_doc, make_ppt, make_xls

KINDS = ("doc", "xls", "ppt", "rst", "org", "adoc", "tex", "yaml", "toml", "ini", "log", "python", "go",
         "javascript", "typescript", "java", "c", "cpp", "rust", "ruby", "shell", "sql")

_RST = """\
=================
Field handbook
=================

The Wrenfold RSTINTROMARK survey starts at dawn.

Install
-------

Unpack the kit near the Haverbrook RSTINSTALLMARK gate.

Linux
~~~~~

Run the Quillstone RSTLINUXMARK script.
"""

_ORG = """\
#+TITLE: Notes
* TODO Planning ORGTOPMARK
The Brackenfell ORGBODYMARK meeting moved.
** Budget
Larchwood ORGSUBMARK costs rose.
"""

_ADOC = """\
= Operator guide

The Mossgate ADOCINTROMARK depot.

== Shutdown

Close the Thornbury ADOCSECTIONMARK valve first.

----
== not a title ADOCLISTINGMARK
----
"""

_TEX = r"""\documentclass{article}
\usepackage{amsmath}
\begin{document}
\section{Results}\label{sec:results}
The \emph{Pellingham} TEXEMPHMARK trial ended early~\cite{key}. % a TEXCOMMENTMARK comment
\subsection{Errors}
Measured $x^2$ at Cobblewick TEXSUBMARK station.
\end{document}
"""

_CODE: dict[str, tuple[str, str, dict[str, str]]] = {
    "python": ("tool.py", '''"""Module PYDOCMARK."""
import os


@cache
def fetch_ledger(path):
    """Read the Ashcombe PYFUNCMARK ledger."""
    return open(path).read()


class Ledger:
    def total(self):
        return "PYCLASSMARK"
''', {"PYFUNCMARK": "def fetch_ledger", "PYCLASSMARK": "class Ledger"}),
    "go": ("server.go", '''package main

// Server answers GOTYPEMARK requests.
type Server struct {
\tport int
}

func (s *Server) Run() error {
\treturn nil // GOMETHODMARK
}
''', {"GOMETHODMARK": "func (s *Server) Run"}),
    "javascript": ("app.js", '''import x from "y";

export async function loadRoster(url) {
  return fetch(url); // JSFUNCMARK
}
''', {"JSFUNCMARK": "export async function loadRoster"}),
    "typescript": ("model.ts", '''export interface Roster {
  name: string; // TSIFACEMARK
}

export const handler = async (event: Event) => {
  return "TSARROWMARK";
};
''', {"TSARROWMARK": "export const handler = async (event: Event) =>"}),
    "java": ("Main.java", '''package demo;

public final class Main {
    public static void main(String[] args) {
        System.out.println("JAVAMARK");
    }
}
''', {"JAVAMARK": "public final class Main"}),
    "c": ("calc.c", '''#include <stdio.h>

static int add_weights(int a, int b)
{
    return a + b; /* CFUNCMARK */
}
''', {"CFUNCMARK": "static int add_weights(int a, int b)"}),
    "cpp": ("grid.cpp", '''#include <vector>

namespace grid {
int cells() { return 0; } // CPPMARK
}
''', {"CPPMARK": "namespace grid"}),
    "rust": ("lib.rs", '''use std::io;

pub fn parse_manifest(data: &[u8]) -> io::Result<()> {
    Ok(()) // RUSTMARK
}
''', {"RUSTMARK": "pub fn parse_manifest(data: &[u8]) -> io::Result<()>"}),
    "ruby": ("task.rb", '''require "json"

class Harvest
  def yield_tonnes
    "RUBYMARK"
  end
end
''', {"RUBYMARK": "class Harvest"}),
    "shell": ("deploy.sh", '''#!/bin/sh
set -e

deploy() {
  echo SHELLMARK
}
''', {"SHELLMARK": "deploy()"}),
    "sql": ("schema.sql", '''-- the ledger
CREATE TABLE IF NOT EXISTS ledger_entry (
    id BIGINT PRIMARY KEY, -- SQLMARK
    note TEXT
);
''', {"SQLMARK": "CREATE TABLE IF NOT EXISTS ledger_entry"}),
}

_CONFIG: dict[str, tuple[str, str, dict[str, str]]] = {
    "yaml": ("deploy.yaml", "name: demo\nserver:\n  note: the Fenwick YAMLHOSTMARK host\n  port: 8080\n",
             {"YAMLHOSTMARK": "server"}),
    "toml": ("pyproject.toml", '[project]\nname = "demo"\n\n[tool.lint]\nrule = "TOMLRULEMARK"\n',
             {"TOMLRULEMARK": "tool.lint"}),
    "ini": ("setup.cfg", "[metadata]\nname = demo\n\n[options]\npackages = INIPACKAGEMARK\n",
            {"INIPACKAGEMARK": "options"}),
    "log": ("worker.log", "2026-12-04 10:00:01 INFO started\n2026-12-04 10:00:02 ERROR LOGERRORMARK queue full\n",
            {}),
}


def _markers(text: str) -> tuple[str, ...]:
    return tuple(w.strip(".,;:()\"'*/") for w in text.split() if w.strip(".,;:()\"'*/").endswith("MARK"))


def samples(kind: str) -> list[Sample]:
    """The generated samples of ``kind`` (one each)."""
    if kind == "doc":
        data = make_doc(["Quarterly report", "The Saltmarsh DOCPARAMARK figures rose.", "Grüße 中文 DOCUNIMARK",
                         "Item\x07Brindlewood DOCCELLMARK\x07\x07",
                         "see \x13HYPERLINK \"https://x.example/DOCFIELDCODE\"\x14the Tolworth DOCLINKMARK page\x15"],
                        header="Header of the Otterburn DOCHEADERMARK office")
        return [Sample("doc", "report.doc", data, ("DOCPARAMARK", "DOCUNIMARK", "DOCCELLMARK", "DOCLINKMARK",
                                                  "DOCHEADERMARK"), ("DOCFIELDCODE",))]
    if kind == "xls":
        rows: list[list[object]] = [["Item", "Unit price"], ["Hollowmere XLSCELLMARK gasket", 0.42],
                                    ["Ünïcode 中文 XLSUNIMARK", 3]]
        return [Sample("xls", "prices.xls", make_xls({"Prices": rows, "Notes": [["Pennywhistle XLSNOTEMARK"]]}),
                       ("XLSCELLMARK", "XLSUNIMARK", "XLSNOTEMARK"))]
    if kind == "ppt":
        data = make_ppt([("Harbour plan PPTTITLEMARK", "The Corvalline PPTBODYMARK quay", "Duskmarrow PPTBOXMARK",
                          "Wistlecombe PPTNOTEMARK"), ("Budget", "Ambergrove ünï PPTUNIMARK", "box", "note")])
        return [Sample("ppt", "plan.ppt", data, ("PPTTITLEMARK", "PPTBODYMARK", "PPTBOXMARK", "PPTNOTEMARK",
                                                 "PPTUNIMARK"))]
    markup = {"rst": ("handbook.rst", _RST, {"RSTLINUXMARK": "Field handbook > Install > Linux"}),
              "org": ("notes.org", _ORG, {"ORGSUBMARK": "TODO Planning ORGTOPMARK > Budget"}),
              "adoc": ("guide.adoc", _ADOC, {"ADOCSECTIONMARK": "Operator guide > Shutdown"}),
              "tex": ("paper.tex", _TEX, {"TEXSUBMARK": "Results > Errors"})}
    name, text, sections = {**markup, **_CODE, **_CONFIG}[kind]
    must_not = ("TEXCOMMENTMARK",) if kind == "tex" else ()
    must = tuple(m for m in _markers(text) if m not in must_not)
    return [Sample(kind, name, text.encode(), must, must_not, sections=sections)]


def heic_sample() -> Sample:
    """A phone-photo-like HEIC of an OCR page (needs Tesseract's English data and pillow-heif)."""
    import io

    import pillow_heif

    from tests.support import ocrgen

    pillow_heif.register_heif_opener()
    page = ocrgen.page_image(("The Quillmoor depot closes at six.", "Rookhaven drainage works begin in May."), 200)
    out = io.BytesIO()
    page.convert("RGB").save(out, format="HEIF", quality=90)
    return Sample("heic", "IMG_0042.HEIC", out.getvalue(), ("Quillmoor", "Rookhaven"))
