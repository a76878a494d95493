"""DOCX candidates for ``bench/parsers.py``: bytes → extracted text, on ``tests.fidelity.docx_corpus``.

- ``ours``: ``task_service.pipeline.readers.office.docx.extract_docx`` (our lxml walker; text before normalization);
- ``unstructured``: ``partition_docx`` as used until now (``markup.partition_markup``);
- ``mammoth``: ``mammoth.extract_raw_text``;
- ``docx2python``: ``docx2python(...).text`` (body, headers, footers, footnotes, endnotes, comments);
- ``python-docx-walker``: the best python-docx's API gives: body and cell content recursively
  (``iter_inner_content``), headers and footers of every section (default, first, even);
- ``kreuzberg``: ``kreuzberg.extract_bytes_sync`` (Rust core), headers and footers included.

The libraries are imported inside each function: a missing one is reported, not fatal.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

from tests.fidelity import Sample, docx_corpus

DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def ours(data: bytes) -> str:
    from task_service.pipeline.readers.office.docx import extract_docx

    return extract_docx(data).text


def unstructured(data: bytes) -> str:
    from bench.parser_candidates.unstructured_offline import partition_markup

    return partition_markup("docx", data=data)


def mammoth(data: bytes) -> str:
    import mammoth as lib

    return str(lib.extract_raw_text(io.BytesIO(data)).value)


def docx2python(data: bytes) -> str:
    from docx2python import docx2python as read

    with read(io.BytesIO(data)) as document:
        return str(document.text)


def python_docx_walker(data: bytes) -> str:
    import docx

    document = docx.Document(io.BytesIO(data))
    texts = list(_inner(document))
    for section in document.sections:
        for part in (section.header, section.first_page_header, section.even_page_header,
                     section.footer, section.first_page_footer, section.even_page_footer):
            if not part.is_linked_to_previous:
                texts.extend(_inner(part))
    return "\n\n".join(texts)


def _inner(container: Any) -> Iterator[str]:
    from docx.table import Table

    for item in container.iter_inner_content():
        if isinstance(item, Table):
            for row in item.rows:
                yield " | ".join(" ".join(_inner(cell)) for cell in row.cells)
        else:
            yield item.text


def kreuzberg(data: bytes) -> str:
    from kreuzberg import ContentFilterConfig, ExtractionConfig, extract_bytes_sync

    config = ExtractionConfig(content_filter=ContentFilterConfig(include_headers=True, include_footers=True))
    return str(extract_bytes_sync(data, mime_type=DOCX_MIME, config=config).content)


CANDIDATES: dict[str, Callable[[bytes], str]] = {
    "ours": ours,
    "unstructured": unstructured,
    "mammoth": mammoth,
    "docx2python": docx2python,
    "python-docx-walker": python_docx_walker,
    "kreuzberg": kreuzberg,
}


def samples() -> list[Sample]:
    return docx_corpus.samples()


def big_sample(smoke: bool) -> Sample:
    return docx_corpus.big_sample(smoke)
