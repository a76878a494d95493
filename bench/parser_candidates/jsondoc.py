"""JSON/JSONL candidates for ``bench/parsers.py`` on ``tests.fidelity.docs_corpus`` (kind ``json``).

- ``ours``: ``task_service.pipeline.readers.plain.jsondoc.read`` (stdlib json, key paths, grouped leaves).
"""

from __future__ import annotations

from collections.abc import Callable

from bench.parser_candidates._docs import ours as _ours
from task_service.pipeline.readers.plain import jsondoc as reader
from tests.fidelity import Sample, docs_corpus

CANDIDATES: dict[str, Callable[[bytes], str]] = {"ours": _ours(reader.read)}


def samples() -> list[Sample]:
    return docs_corpus.samples("json")


def big_sample(smoke: bool) -> Sample:
    return docs_corpus.big_sample("json", smoke)
