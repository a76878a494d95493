"""RTF candidates for ``bench/parsers.py`` on ``tests.fidelity.docs_corpus`` (kind ``rtf``).

- ``ours``: ``task_service.pipeline.readers.plain.rtf.read`` (our tokenizer);
- ``striprtf``: ``striprtf.striprtf.rtf_to_text`` (regex based), bytes decoded as Latin-1 (RTF is 7-bit).
"""

from __future__ import annotations

from collections.abc import Callable

from bench.parser_candidates._docs import ours as _ours
from task_service.pipeline.readers.plain import rtf as reader
from tests.fidelity import Sample, docs_corpus


def striprtf(data: bytes) -> str:
    from striprtf.striprtf import rtf_to_text

    return str(rtf_to_text(data.decode("latin-1"), errors="replace"))  # type: ignore[no-untyped-call]


CANDIDATES: dict[str, Callable[[bytes], str]] = {"ours": _ours(reader.read), "striprtf": striprtf}


def samples() -> list[Sample]:
    return docs_corpus.samples("rtf")


def big_sample(smoke: bool) -> Sample:
    return docs_corpus.big_sample("rtf", smoke)
