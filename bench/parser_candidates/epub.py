"""EPUB candidates for ``bench/parsers.py`` on ``tests.fidelity.docs_corpus`` (kind ``epub``).

- ``ours``: ``task_service.pipeline.readers.web.epub.read`` (spine order, each document through our HTML walker);
- ``ebooklib``: EbookLib reads the package, its spine documents in order, each through our HTML walker
  (so only the package handling differs); no chapter titles from the navigation.
"""

from __future__ import annotations

from collections.abc import Callable

from bench.parser_candidates._docs import ours as _ours
from task_service.pipeline.readers.web import epub as reader
from tests.fidelity import Sample, docs_corpus


def ebooklib(data: bytes) -> str:
    import io
    import warnings

    from ebooklib import epub as lib

    from task_service.pipeline.decode import decode_text
    from task_service.pipeline.readers.web.html import extract_html

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        book = lib.read_epub(io.BytesIO(data), {"ignore_ncx": True})
    texts = []
    for idref, _ in book.spine:
        item = book.get_item_with_id(idref)
        if item is not None:
            texts.append(extract_html(decode_text(item.get_content())).text)
    return "\n\n".join(texts)


CANDIDATES: dict[str, Callable[[bytes], str]] = {"ours": _ours(reader.read), "ebooklib": ebooklib}


def samples() -> list[Sample]:
    return docs_corpus.samples("epub")


def big_sample(smoke: bool) -> Sample:
    return docs_corpus.big_sample("epub", smoke)
