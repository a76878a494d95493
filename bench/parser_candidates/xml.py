"""XML candidates for ``bench/parsers.py`` on ``tests.fidelity.docs_corpus`` (kind ``xml``).

- ``ours``: ``task_service.pipeline.readers.plain.xml.read`` (hardened lxml, fields grouped, mixed content);
- ``lxml-itertext``: the same hardened parse, ``" ".join(root.itertext())`` (the floor: no attributes).
"""

from __future__ import annotations

from collections.abc import Callable

from bench.parser_candidates._docs import ours as _ours
from task_service.pipeline.readers.plain import xml as reader
from tests.fidelity import Sample, docs_corpus


def lxml_itertext(data: bytes) -> str:
    from task_service.pipeline.readers._shared.xmlzip import parse_xml

    return " ".join(parse_xml(data, "XML", "document", internal_entities=True).itertext())


CANDIDATES: dict[str, Callable[[bytes], str]] = {"ours": _ours(reader.read), "lxml-itertext": lxml_itertext}


def samples() -> list[Sample]:
    return docs_corpus.samples("xml")


def big_sample(smoke: bool) -> Sample:
    return docs_corpus.big_sample("xml", smoke)
