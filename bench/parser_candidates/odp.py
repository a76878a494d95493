"""ODP candidates for ``bench/parsers.py``: bytes → extracted text, on ``tests.fidelity.odp_corpus``.

- ``ours``: ``task_service.pipeline.readers.odf.odp.read`` (our lxml walker; text before normalization);
- ``odfpy``: every ``text:p``/``text:h`` of the document through ``odf.teletype.extractText``
  (odfpy has no slide model: no order, no titles, no notes separation, no alt text).

The libraries are imported inside each function: a missing one is reported, not fatal.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from tests.fidelity import Sample, odp_corpus


def ours(data: bytes) -> str:
    from task_service.pipeline.limits import DEFAULT_LIMITS
    from task_service.pipeline.readers.odf.odp import read

    return read(data, DEFAULT_LIMITS).text


def odfpy(data: bytes) -> str:
    from odf import teletype, text
    from odf.opendocument import load

    document = load(io.BytesIO(data))
    paragraphs = document.getElementsByType(text.P) + document.getElementsByType(text.H)
    return "\n\n".join(teletype.extractText(p) for p in paragraphs)


CANDIDATES: dict[str, Callable[[bytes], str]] = {"ours": ours, "odfpy": odfpy}


def samples() -> list[Sample]:
    return odp_corpus.samples()


def big_sample(smoke: bool) -> Sample:
    return odp_corpus.big_sample(smoke)
