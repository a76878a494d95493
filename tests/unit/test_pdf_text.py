"""PDF text layer: line-end hyphens, page provenance and the no-text-layer warning (no network)."""

from __future__ import annotations

import pytest

from shared.domain.errors import NoTextError
from task_service.pipeline.parse import parse_document
from task_service.pipeline.readers.pdf.hyphens import resolve_line_hyphens
from tests.support.pdfgen import pdf_pages, text_page

WORDS = {"long", "term", "introduction", "well", "known", "synthesis"}.__contains__


def test_compound_keeps_its_hyphen_and_broken_word_joins() -> None:
    data = pdf_pages([text_page("We plan for the long-", "term future and intro-", "duction of well-", "known x.")])
    text = parse_document(data, "h.pdf").text
    assert "long-term" in text
    assert "introduction" in text
    assert "well-known" in text
    assert "longterm" not in text and "intro-duction" not in text


def test_document_evidence_beats_the_word_list() -> None:
    # "reindex" is no dictionary word, but the document spells it unhyphenated elsewhere.
    pages = ["we re\x02index nightly", "a reindex runs"]
    assert resolve_line_hyphens(pages, lambda w: w in {"re", "index"}) == ["we reindex nightly", "a reindex runs"]
    # ... and "state-of-the-art" hyphenated elsewhere keeps its hyphen although "ofthe" is unknown.
    assert resolve_line_hyphens(["state-of\x02the-art", "state-of-the-art"], WORDS) == [
        "state-of-the-art", "state-of-the-art",
    ]


def test_unknown_halves_join_and_stray_marker_becomes_hyphen() -> None:
    assert resolve_line_hyphens(["synthe\x02sis", "x \x02 y"], WORDS) == ["synthesis", "x - y"]


def test_blocks_carry_their_page_and_blank_pages_are_reported() -> None:
    parsed = parse_document(pdf_pages([text_page("one"), text_page(), text_page("three")]), "p.pdf")
    assert [(b.page, b.text) for b in parsed.blocks] == [(1, "one"), (3, "three")]
    assert parsed.warnings == ("1 of 3 pages had no text layer and no image to OCR",)
    assert parse_document(pdf_pages([text_page("a"), text_page("b")]), "t.pdf").warnings == ()
    with pytest.raises(NoTextError):
        parse_document(pdf_pages([text_page(), text_page()]), "blank.pdf")
