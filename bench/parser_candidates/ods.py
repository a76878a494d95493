"""ODS candidates for ``bench/parsers.py``: bytes → text, on ``tests.fidelity.sheet_corpus``.

- ``ours``: ``task_service.pipeline.readers.odf.ods.read`` (our streaming lxml walker over content.xml);
- ``calamine``: python-calamine's ODS reader, every sheet's values joined;
- ``odfpy``: odfpy's DOM, every ``table:table-cell``'s paragraphs (``teletype.extractText``).
"""

from __future__ import annotations

import io
from collections.abc import Callable

from bench.parser_candidates.xlsx import calamine_raw
from tests.fidelity import Sample, sheet_corpus


def ours(data: bytes) -> str:
    from task_service.pipeline.limits import DEFAULT_LIMITS
    from task_service.pipeline.readers.odf.ods import read

    return read(data, DEFAULT_LIMITS).text


def odfpy(data: bytes) -> str:
    from odf import opendocument, teletype
    from odf.table import Table, TableCell, TableRow

    document = opendocument.load(io.BytesIO(data))
    lines = []
    for table in document.spreadsheet.getElementsByType(Table):
        for row in table.getElementsByType(TableRow):
            cells = [teletype.extractText(cell) for cell in row.getElementsByType(TableCell)]
            lines.append(" | ".join(c for c in cells if c))
    return "\n".join(lines)


CANDIDATES: dict[str, Callable[[bytes], str]] = {"ours": ours, "calamine": calamine_raw, "odfpy": odfpy}


def samples() -> list[Sample]:
    return sheet_corpus.ods_samples()


def big_sample(smoke: bool) -> Sample:
    return sheet_corpus.big_ods(smoke)
