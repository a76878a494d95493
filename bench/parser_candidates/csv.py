"""CSV/TSV candidates for ``bench/parsers.py``: bytes → text, on ``tests.fidelity.sheet_corpus``.

- ``ours``: ``task_service.pipeline.readers.plain.csv.read`` (decode.py + our delimiter rule + stdlib csv,
  rows with headers);
- ``stdlib-sniffer``: decode.py + ``csv.Sniffer().sniff`` on the first 8 KB + ``csv.reader``, rows joined.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable

from tests.fidelity import Sample, sheet_corpus


def ours(data: bytes) -> str:
    from task_service.pipeline.limits import DEFAULT_LIMITS
    from task_service.pipeline.readers.plain.csv import read

    return read(data, DEFAULT_LIMITS).text


def stdlib_sniffer(data: bytes) -> str:
    from task_service.pipeline.decode import decode_text

    text = decode_text(data)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    return "\n".join(" | ".join(row) for row in csv.reader(io.StringIO(text, newline=""), dialect))


CANDIDATES: dict[str, Callable[[bytes], str]] = {"ours": ours, "stdlib-sniffer": stdlib_sniffer}


def samples() -> list[Sample]:
    return sheet_corpus.csv_samples()


def big_sample(smoke: bool) -> Sample:
    return sheet_corpus.big_csv(smoke)
