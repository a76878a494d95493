"""Markdown candidates for ``bench/parsers.py``: bytes → extracted text, on ``tests.fidelity.md_corpus``.

Every candidate gets the same decoded text (``decode_text``, then ``sanitize``):

- ``ours``: ``task_service.pipeline.readers.web.markdown.extract_markdown`` (pyromark → HTML → our HTML walker);
- ``unstructured``: ``partition_md`` as used until now (``markup.partition_markup``);
- ``markdown-it-py+ours``, ``mistune+ours``, ``cmarkgfm+ours``: that library renders HTML
  (tables, strikethrough, raw HTML on; footnotes where built in), then our HTML walker, with the
  same front-matter and ``data:`` URI handling as ``ours``: only the renderer differs.

The libraries are imported inside each function: a missing one is reported, not fatal.
``RUNS`` gives fewer timed runs to unstructured (≈25 s per MB).
"""

from __future__ import annotations

from collections.abc import Callable

from tests.fidelity import Sample, md_corpus

RUNS = {"unstructured": 1}


def _decoded(data: bytes) -> str:
    from shared.domain.normalize import sanitize
    from task_service.pipeline.decode import decode_text

    return sanitize(decode_text(data))


def _via_html(render: Callable[[str], str], data: bytes) -> str:
    from task_service.pipeline.readers.web.html import DATA_URI, extract_html
    from task_service.pipeline.readers.web.markdown import split_front_matter

    front, body = split_front_matter(_decoded(data))
    text = extract_html(render(DATA_URI.sub("", body)), link_targets=True).text
    return f"{front}\n\n{text}" if front else text


def ours(data: bytes) -> str:
    from task_service.pipeline.readers.web.markdown import extract_markdown

    return extract_markdown(_decoded(data)).text


def unstructured(data: bytes) -> str:
    from bench.parser_candidates.unstructured_offline import partition_markup

    return partition_markup("md", text=_decoded(data))


def markdown_it(data: bytes) -> str:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    return _via_html(md.render, data)


def mistune(data: bytes) -> str:
    import mistune as lib

    md = lib.create_markdown(escape=False, plugins=["table", "strikethrough", "footnotes", "task_lists", "def_list"])
    return _via_html(lambda text: str(md(text)), data)


def cmarkgfm(data: bytes) -> str:
    import cmarkgfm as lib
    from cmarkgfm.cmark import Options

    options = Options.CMARK_OPT_UNSAFE | Options.CMARK_OPT_FOOTNOTES
    return _via_html(lambda text: str(lib.github_flavored_markdown_to_html(text, options=options)), data)


CANDIDATES: dict[str, Callable[[bytes], str]] = {
    "ours": ours,
    "unstructured": unstructured,
    "markdown-it-py+ours": markdown_it,
    "mistune+ours": mistune,
    "cmarkgfm+ours": cmarkgfm,
}


def samples() -> list[Sample]:
    return md_corpus.samples()


def big_sample(smoke: bool) -> Sample:
    return md_corpus.big_sample(smoke)
