"""Every format of the registry, end to end: upload → worker → chunks → search.

* The handed inputs (``../shared/cases/formats``): accepted, INDEXED, every marker in a chunk as a
  word of its own and found in the top 5 of a default (hybrid) search for the sentence around it.
* One generated file of every other new kind (its fidelity corpus' first sample): INDEXED with
  every marker word it must hold, a couple of them found by search.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.e2e.conftest import WorkerFactory
from tests.fidelity import Sample
from tests.support import ROOT, Api

CASES = ROOT.parent / "shared" / "cases" / "formats"
HANDED: dict[str, tuple[str, ...]] = {
    "speaker-notes-and-groups.pptx": ("Corvalline", "Duskmarrow", "Wistlecombe", "Ambergrove"),
    "two-sheets.xlsx": ("Hollowmere", "Pennywhistle"),
    "half-scanned.pdf": ("Gorsefield", "Rookhaven"),
}
#: Searched for in each generated kind (the rest are only checked to be in the chunks).
SEARCHED_PER_KIND = 2


def _sentence_around(content: str, marker: str, words: int = 8) -> str:
    """Up to ``words`` words either side of ``marker`` in ``content`` (the chunk that holds it)."""
    at = content.index(marker)
    before = content[:at].split()[-words:]
    after = content[at + len(marker):].split()[:words]
    return " ".join([*before, marker, *after])


def _holder(chunks: list[dict[str, object]], marker: str) -> str | None:
    pattern = re.compile(rf"(?<![^\W_]){re.escape(marker)}(?![^\W_])")
    return next((str(c["content"]) for c in chunks if pattern.search(str(c["content"]))), None)


def _assert_found(api: Api, kb: int, chunks: list[dict[str, object]], markers: tuple[str, ...],
                  searched: int | None = None) -> None:
    for i, marker in enumerate(markers):
        holder = _holder(chunks, marker)
        assert holder is not None, f"{marker} is not in any chunk as a word of its own"
        if searched is not None and i >= searched:
            continue
        query = _sentence_around(holder, marker)
        hits = api.search(kb, query, top_k=5)
        assert any(marker in h["content"] for h in hits), (marker, query, [h["content"][:80] for h in hits])


@pytest.mark.parametrize("name", sorted(HANDED))
def test_handed_format_cases(api: Api, workers: WorkerFactory, name: str) -> None:
    if not CASES.is_dir():
        pytest.skip(f"{CASES} is not there (the team's shared/ folder sits beside the repository)")
    workers()
    kb = api.create_kb(f"formats-{name}")
    body = api.upload(kb, CASES / name)
    doc = api.wait_terminal(body["document_id"])
    assert doc["status"] == "INDEXED", (name, doc["error_code"], doc["error_message"])
    _assert_found(api, kb, api.chunks(body["document_id"]), HANDED[name])


def _first(samples: Callable[[], list[Sample]]) -> Callable[[], Sample]:
    return lambda: samples()[0]


def _generated() -> dict[str, Callable[[], Sample]]:
    from tests.fidelity import docs_corpus, mail_corpus, odp_corpus, pptx_corpus

    out: dict[str, Callable[[], Sample]] = {
        "pptx": _first(pptx_corpus.samples),
        "odp": _first(odp_corpus.samples),
        "eml": _first(mail_corpus.eml_samples),
        "msg": _first(mail_corpus.msg_samples),
    }
    for kind in docs_corpus.KINDS:
        out[kind] = _first(lambda kind=kind: docs_corpus.samples(kind))  # type: ignore[misc]
    return out


GENERATED = _generated()


@pytest.mark.parametrize("kind", sorted(GENERATED))
def test_every_new_kind_is_indexed_and_found(api: Api, workers: WorkerFactory, kind: str) -> None:
    sample = GENERATED[kind]()
    workers()
    kb = api.create_kb(f"kind-{kind}")
    body = api.upload(kb, name=sample.filename, data=sample.data)
    doc = api.wait_terminal(body["document_id"])
    assert doc["status"] == "INDEXED", (sample.name, doc["error_code"], doc["error_message"])
    chunks = api.chunks(body["document_id"])
    text = "\n".join(str(c["content"]) for c in chunks)
    for marker in sample.must_not:
        assert marker not in text, f"{marker} must not be indexed"
    _assert_found(api, kb, chunks, sample.must, searched=SEARCHED_PER_KIND)
