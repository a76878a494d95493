"""XLSX candidates for ``bench/parsers.py``: bytes → text, on ``tests.fidelity.sheet_corpus``.

- ``ours``: ``task_service.pipeline.readers.office.xlsx.read`` (python-calamine + our rows with headers);
- ``calamine-raw``: python-calamine alone, every sheet's values joined (no limits, no headers);
- ``openpyxl-readonly``: openpyxl ``load_workbook(read_only=True, data_only=True)``, values joined.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from tests.fidelity import Sample, sheet_corpus


def ours(data: bytes) -> str:
    from task_service.pipeline.limits import DEFAULT_LIMITS
    from task_service.pipeline.readers.office.xlsx import read

    return read(data, DEFAULT_LIMITS).text


def calamine_raw(data: bytes) -> str:
    import python_calamine

    workbook = python_calamine.CalamineWorkbook.from_filelike(io.BytesIO(data))
    lines = []
    for name in workbook.sheet_names:
        for row in workbook.get_sheet_by_name(name).iter_rows():
            lines.append(" | ".join(str(v) for v in row if v != ""))
    return "\n".join(lines)


def openpyxl_readonly(data: bytes) -> str:
    import openpyxl

    workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    lines = []
    for sheet in workbook.worksheets:
        for row in sheet.iter_rows(values_only=True):
            lines.append(" | ".join(str(v) for v in row if v is not None))
    workbook.close()
    return "\n".join(lines)


CANDIDATES: dict[str, Callable[[bytes], str]] = {
    "ours": ours,
    "calamine-raw": calamine_raw,
    "openpyxl-readonly": openpyxl_readonly,
}


def samples() -> list[Sample]:
    return sheet_corpus.xlsx_samples()


def big_sample(smoke: bool) -> Sample:
    return sheet_corpus.big_xlsx(smoke)
