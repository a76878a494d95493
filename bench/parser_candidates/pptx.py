"""PPTX candidates for ``bench/parsers.py``: bytes → extracted text, on ``tests.fidelity.pptx_corpus``.

- ``ours``: ``task_service.pipeline.readers.office.pptx.read`` (our lxml walker; text before normalization);
- ``python-pptx-walker``: the best python-pptx's API gives: every shape recursively (groups),
  text frames, tables, chart titles, pictures' alt text (``descr``/``title`` of ``cNvPr``), notes;
- ``markitdown``: ``MarkItDown().convert_stream`` (python-pptx underneath, Markdown out);
- ``unstructured``: ``partition_pptx`` (needs ``unstructured[pptx]``; reported when absent).

The libraries are imported inside each function: a missing one is reported, not fatal.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

from tests.fidelity import Sample, pptx_corpus


def ours(data: bytes) -> str:
    from task_service.pipeline.limits import DEFAULT_LIMITS
    from task_service.pipeline.readers.office.pptx import read

    return read(data, DEFAULT_LIMITS).text


def python_pptx_walker(data: bytes) -> str:
    from pptx import Presentation

    texts: list[str] = []
    for slide in Presentation(io.BytesIO(data)).slides:
        texts.extend(_shapes(slide.shapes))
        if slide.has_notes_slide:
            texts.append(slide.notes_slide.notes_text_frame.text)
    return "\n\n".join(texts)


def _shapes(shapes: Any) -> Iterator[str]:
    for shape in shapes:
        if shape.shape_type is not None and shape.shape_type == 6:  # MSO_SHAPE_TYPE.GROUP
            yield from _shapes(shape.shapes)
        if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            yield shape.text_frame.text
        if getattr(shape, "has_table", False) and shape.has_table:
            for row in shape.table.rows:
                yield " | ".join(cell.text for cell in row.cells)
        if getattr(shape, "has_chart", False) and shape.has_chart and shape.chart.has_title:
            yield shape.chart.chart_title.text_frame.text
        props = shape._element.find(".//{http://schemas.openxmlformats.org/presentationml/2006/main}cNvPr")
        if props is not None:
            yield props.get("descr") or props.get("title") or ""


def markitdown(data: bytes) -> str:
    from markitdown import MarkItDown, StreamInfo

    converter = MarkItDown(enable_plugins=False)
    result = converter.convert_stream(io.BytesIO(data), stream_info=StreamInfo(extension=".pptx"))
    return str(result.text_content)


def unstructured(data: bytes) -> str:
    from unstructured.partition.pptx import partition_pptx

    return "\n\n".join(str(element) for element in partition_pptx(file=io.BytesIO(data)))


CANDIDATES: dict[str, Callable[[bytes], str]] = {
    "ours": ours,
    "python-pptx-walker": python_pptx_walker,
    "markitdown": markitdown,
    "unstructured": unstructured,
}


def samples() -> list[Sample]:
    return pptx_corpus.samples()


def big_sample(smoke: bool) -> Sample:
    return pptx_corpus.big_sample(smoke)
