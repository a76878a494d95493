"""The handed extraction cases (../shared/cases/extraction): every marker word is found by a search
of the sentence around it, in the top 5 of its KB; forbidden markers are never indexed. Plus the
provenance (page, section) and warnings a client sees on real uploads."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import WorkerFactory
from tests.support import CASES as SHARED_CASES
from tests.support import Api
from tests.support.pdfgen import pdf_pages, text_page

CASES = SHARED_CASES / "extraction"
HTML_MARKERS = (
    "BARETEXTMARK PARAMARK INSMARK DELMARK BRBEFOREMARK BRAFTERMARK DIVMARK SPANMARK SUMMARYMARK DETAILSMARK "
    "DTMARK DDMARK FIGCAPMARK ADDRESSMARK SECTIONMARK PREMARK QUOTEMARK CENTERMARK FONTMARK MARKTAGMARK "
    "UTAGMARK STAGMARK"
).split()
EXPECTED: dict[str, tuple[list[str], list[str]]] = {
    "content-controls.docx": (["CELLPLAINMARK", "NESTEDCELLMARK", "SDTBLOCKMARK", "SDTCELLMARK"], []),
    "revisions-and-fields.docx": (
        ["TRACKINSMARK", "FIELDSIMPLEMARK", "SMARTTAGMARK", "CUSTOMXMLMARK"], ["DELTEXTMARK"],
    ),
    "html-containers.html": (HTML_MARKERS, []),
    "utf16le-no-bom.txt": (["Quarterly report on indexing throughput"], []),
}


def _sentence_around(content: str, marker: str, words: int = 8) -> str:
    """Up to ``words`` words either side of ``marker`` in ``content`` (the chunk that holds it)."""
    at = content.index(marker)
    before = content[:at].split()[-words:]
    after = content[at + len(marker):].split()[:words]
    return " ".join([*before, marker, *after])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_handed_case_markers_are_found_by_search(api: Api, workers: WorkerFactory, name: str) -> None:
    if not CASES.is_dir():
        pytest.skip(f"{CASES} is not there (the team's shared/ folder sits beside the repository)")
    must, must_not = EXPECTED[name]
    workers()
    kb = api.create_kb(f"case-{name}")
    body = api.upload(kb, CASES / name)
    doc = api.wait_terminal(body["document_id"])
    assert doc["status"] == "INDEXED", (name, doc["error_message"])
    chunks = api.chunks(body["document_id"])
    text = "\n".join(c["content"] for c in chunks)
    for marker in must_not:
        assert marker not in text, f"{marker} (deleted text) was indexed"
    for marker in must:
        holder = next((c["content"] for c in chunks if re.search(rf"\b{re.escape(marker)}\b", c["content"])), None)
        assert holder is not None, f"{marker} is not in any chunk of {name} as a word of its own"
        query = _sentence_around(holder, marker)
        hits = api.search(kb, query, top_k=5)
        assert any(marker in h["content"] for h in hits), (marker, query, [h["content"][:80] for h in hits])


def test_chunks_say_where_they_came_from(api: Api, workers: WorkerFactory) -> None:
    workers()
    kb = api.create_kb("provenance")
    md = b"# Guide\n\nIntro words.\n\n## Install\n\n### Linux\n\nRun the installer on Linux hosts.\n"
    md_doc = api.upload(kb, name="guide.md", data=md)
    pages = [text_page("Ferry timetables for the long-", "term plan"), text_page("Harbour cranes on page two")]
    pdf_doc = api.upload(kb, name="ferry.pdf", data=pdf_pages(pages))
    for body in (md_doc, pdf_doc):
        assert api.wait_terminal(body["document_id"])["status"] == "INDEXED"
    md_chunks = api.chunks(md_doc["document_id"])
    linux = next(c for c in md_chunks if "installer" in c["content"])
    assert linux["section"] is not None and linux["section"].startswith("Guide"), md_chunks
    pdf_chunks = api.chunks(pdf_doc["document_id"])
    assert pdf_chunks[0]["page"] == 1
    assert "long-term" in " ".join(c["content"] for c in pdf_chunks)
    hits = api.search(kb, "installer on Linux hosts", top_k=3)
    assert hits[0]["document_id"] == md_doc["document_id"]


def test_pages_without_a_text_layer_are_reported(api: Api, workers: WorkerFactory) -> None:
    workers()
    kb = api.create_kb("warnings")
    data = pdf_pages([text_page("Harbour cranes at dawn"), text_page(), text_page()])
    doc = api.wait_terminal(api.upload(kb, name="scan.pdf", data=data)["document_id"])
    assert doc["status"] == "INDEXED"
    assert doc["warnings"] == ["2 of 3 pages had no text layer and no image to OCR"]
