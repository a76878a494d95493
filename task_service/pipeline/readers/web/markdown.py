"""Markdown → paragraph-level blocks with heading paths (pure): pyromark → HTML → ``html.py``.

pyromark (Python bindings of the Rust crate pulldown-cmark, CommonMark + GFM tables,
strikethrough, task lists, footnotes, definition lists, GitHub alerts) renders the document to
HTML; ``extract_html`` walks that HTML, so headings, sections, tables (one row per block,
cells joined by " | "), lists, code blocks and raw HTML inside the Markdown behave exactly as
in an HTML upload. Link targets are kept after the link text ("the portal
(https://host/path)"); image alt text is kept, image sources are not.

Why pyromark (measured on this machine, a generated 3 MB document with a big table, the
Markdown → HTML step alone, CPU time): pyromark 0.10 ≈57 MB/s, cmarkgfm ≈7 MB/s, mistune 3.4
≈0.5 MB/s, markdown-it-py 4.3 ≈0.4 MB/s; the whole reader is then bounded by our HTML walk
(≈2.4 MB/s end to end in ``bench/RESULTS.md``, section parsers, against 0.03 MB/s for
unstructured). markdown-it-py also drops everything after its ``maxNesting`` (20 in its
CommonMark preset, 100 by default) without a word; mistune and pulldown-cmark keep a 600-level
nested list (pulldown-cmark: 5,000 levels in 0.2 s).

Before rendering: YAML (``---``) or TOML (``+++``) front matter is kept as a text block of its
own (rendered as Markdown it would become a heading); ``data:`` URIs are removed from the
source (a 10 MB base64 image would otherwise cost the renderer seconds and is never text).
Footnote references become ``[1]`` so they do not glue to the preceding word.
"""

from __future__ import annotations

import re

from shared.domain.errors import DependencyMissingError
from shared.domain.normalize import sanitize
from task_service.pipeline.decode import decode
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.web.html import extract_html, with_warnings
from task_service.pipeline.readers.web.tags import DATA_URI

# The fence, then a first line that is a YAML ``key:`` or TOML ``key =`` (so that a document
# opening with a thematic break ``---`` is not taken for front matter), up to the closing fence.
_FRONT_MATTER = re.compile(
    r"\A(---|\+\+\+)[ \t]*\n(\s*[\w\"'.-]+[ \t]*[:=].*?)\n(?:\1|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL
)
_FOOTNOTE_REFERENCE = re.compile(r'<sup class="footnote-reference"><a href="[^"]*">([^<]*)</a></sup>')
_FOOTNOTE_LABEL = re.compile(r'<sup class="footnote-definition-label">([^<]*)</sup>')


def extract_markdown(text: str) -> ParsedDocument:
    """Return the blocks of a Markdown document (decoded text), in reading order, with warnings.

    Blocks are not yet normalized (``parse.py`` does that). Raises ``ParseLimitError`` when the
    rendered HTML nests deeper than ``html.MAX_DEPTH``; ``DependencyMissingError`` when
    pyromark is not installed.
    """
    front, body = split_front_matter(text)
    body, data_uris = DATA_URI.subn("", body) if "data:" in body else (body, 0)
    parsed = extract_html(_render(body), link_targets=True)
    blocks = parsed.blocks
    if front.strip():
        blocks = (Block(front), *blocks)
    warnings = parsed.warnings
    if data_uris:
        warnings = (*warnings, f"{data_uris} embedded data: URI(s) removed from the text")
    return ParsedDocument(blocks, warnings)


def split_front_matter(text: str) -> tuple[str, str]:
    """Split leading YAML (``---`` … ``---``/``...``) or TOML (``+++`` … ``+++``) front matter
    off ``text``: ``(front matter without its fences or "", the rest)``."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return "", text
    return match.group(2), text[match.end() :]


def _render(markdown: str) -> str:
    try:
        import pyromark
    except ImportError as exc:  # pragma: no cover - declared dependency
        raise DependencyMissingError(f"pyromark is not installed: install 'pyromark>=0.10,<1' ({exc})") from exc
    options = pyromark.Options
    html = pyromark.html(
        markdown,
        options=options.ENABLE_TABLES
        | options.ENABLE_STRIKETHROUGH
        | options.ENABLE_TASKLISTS
        | options.ENABLE_FOOTNOTES
        | options.ENABLE_DEFINITION_LIST
        | options.ENABLE_GFM,
    )
    if "footnote-" in html:
        html = _FOOTNOTE_REFERENCE.sub(r"[\1]", html)
        html = _FOOTNOTE_LABEL.sub(r"[\1] ", html)
    return html


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """The Markdown reader: decoded, then :func:`extract_markdown`.

    Raises ``UndecodableTextError``, ``ParseLimitError`` (nesting)."""
    decoded = decode(data)
    return with_warnings(extract_markdown(sanitize(decoded.text)), decoded.warnings)
