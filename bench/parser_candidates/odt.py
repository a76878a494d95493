"""ODT candidates for ``bench/parsers.py`` on ``tests.fidelity.docs_corpus`` (kind ``odt``).

- ``ours``: ``task_service.pipeline.readers.odf.odt.read`` (lxml walker over content.xml + styles.xml);
- ``odfpy``: odfpy's ``load`` and ``teletype.extractText`` of every ``text:h``/``text:p`` in the
  document, as its documentation suggests.
"""

from __future__ import annotations

from collections.abc import Callable

from bench.parser_candidates._docs import ours as _ours
from task_service.pipeline.readers.odf import odt as reader
from tests.fidelity import Sample, docs_corpus


def odfpy(data: bytes) -> str:
    import io

    from odf import teletype, text
    from odf.opendocument import load

    document = load(io.BytesIO(data))
    paragraphs = document.getElementsByType(text.P) + document.getElementsByType(text.H)
    return "\n\n".join(teletype.extractText(p) for p in paragraphs)


RUNS = {"odfpy": 2}
CANDIDATES: dict[str, Callable[[bytes], str]] = {"ours": _ours(reader.read), "odfpy": odfpy}


def samples() -> list[Sample]:
    return [s for s in docs_corpus.samples("odt") if s.filename.endswith(".odt")]


def big_sample(smoke: bool) -> Sample:
    return docs_corpus.big_sample("odt", smoke)
