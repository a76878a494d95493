"""Lightweight markup and source text read as text with its structure: reStructuredText, Org,
AsciiDoc, LaTeX (headings → section paths, ``_outline.py``), source code (top-level symbols →
sections, ``code.py``) and configuration / log files (``config.py``).

Each reader decodes with ``decode.py`` (the text readers' rules: BOM, UTF-16/32, stray NULs, legacy
code pages), finds its headings with a few line patterns (no parser library: what these formats need
for search is their text and their outline), and returns one block per paragraph with the heading
path as ``section``.
"""
