"""HTML candidates for ``bench/parsers.py``: bytes → extracted text, on ``tests.fidelity.html_corpus``.

Every candidate gets the same decoded text (``decode_text`` with the ``<meta charset>`` sniffed,
then ``sanitize``), so only the HTML → text step is compared:

- ``ours``: ``task_service.pipeline.readers.web.html.extract_html`` (lexbor tree + our walker; text before
  normalization);
- ``unstructured``: ``partition_html`` as used until now (``markup.partition_markup``);
- ``html-text``: ``html_text.extract_text`` (lxml);
- ``selectolax``: lexbor's own text of ``<body>``, ``.text(separator="\\n")``;
- ``trafilatura``: ``trafilatura.extract`` (main-content extraction, tables included, recall
  favoured);
- ``inscriptis``: ``inscriptis.get_text`` (layout-aware, lxml);
- ``html2text``: ``html2text.HTML2Text`` (HTML → Markdown-ish text, no line wrapping);
- ``resiliparse``: ``extract_plain_text`` on its lexbor tree, ``main_content=False``.

The libraries are imported inside each function: a missing one is reported, not fatal.
``RUNS`` gives fewer timed runs to unstructured (≈25 s per MB).
"""

from __future__ import annotations

from collections.abc import Callable

from tests.fidelity import Sample, html_corpus

RUNS = {"unstructured": 1}


def _decoded(data: bytes) -> str:
    from shared.domain.normalize import sanitize
    from task_service.pipeline.decode import decode_text, sniff_html_charset

    return sanitize(decode_text(data, declared=sniff_html_charset(data)))


def ours(data: bytes) -> str:
    from task_service.pipeline.readers.web.html import extract_html

    return extract_html(_decoded(data)).text


def unstructured(data: bytes) -> str:
    from bench.parser_candidates.unstructured_offline import partition_markup

    return partition_markup("html", text=_decoded(data))


def html_text(data: bytes) -> str:
    import html_text as lib

    return str(lib.extract_text(_decoded(data)))


def selectolax(data: bytes) -> str:
    from selectolax.lexbor import LexborHTMLParser

    body = LexborHTMLParser(_decoded(data)).body
    return "" if body is None else str(body.text(separator="\n"))


def trafilatura(data: bytes) -> str:
    import trafilatura as lib

    return lib.extract(_decoded(data), include_tables=True, include_comments=False, favor_recall=True) or ""


def inscriptis(data: bytes) -> str:
    import inscriptis as lib

    return str(lib.get_text(_decoded(data)))


def html2text(data: bytes) -> str:
    import html2text as lib

    converter = lib.HTML2Text()
    converter.body_width = 0
    return str(converter.handle(_decoded(data)))


def resiliparse(data: bytes) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    return str(extract_plain_text(HTMLTree.parse(_decoded(data)), main_content=False, alt_texts=True))


CANDIDATES: dict[str, Callable[[bytes], str]] = {
    "ours": ours,
    "unstructured": unstructured,
    "html-text": html_text,
    "selectolax": selectolax,
    "trafilatura": trafilatura,
    "inscriptis": inscriptis,
    "html2text": html2text,
    "resiliparse": resiliparse,
}


def samples() -> list[Sample]:
    return html_corpus.samples()


def big_sample(smoke: bool) -> Sample:
    return html_corpus.big_sample(smoke)
