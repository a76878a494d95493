"""PDF text layer: line-end hyphens, page provenance and the no-text-layer warning (no network)."""

from __future__ import annotations

import zlib

from task_service.pipeline.hyphens import resolve_line_hyphens
from task_service.pipeline.parse import parse_document
from tests.unit.test_sandbox import pdf

WORDS = {"long", "term", "introduction", "well", "known", "synthesis"}.__contains__


def _lines_pdf(*lines: bytes, pages: int = 1) -> bytes:
    ops = b" 0 -14 Td ".join(b"(" + line + b") Tj" for line in lines)
    return pdf(zlib.compress(b"BT /F1 12 Tf 72 720 Td " + ops + b" ET"), pages=pages)


def test_compound_keeps_its_hyphen_and_broken_word_joins() -> None:
    data = _lines_pdf(b"We plan for the long-", b"term future and intro-", b"duction of well-", b"known x.")
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
    parsed = parse_document(_lines_pdf(b"Same text on every page", pages=3), "p.pdf")
    assert [b.page for b in parsed.blocks] == [1, 2, 3]
    assert parsed.warnings == ()
    blank = pdf(zlib.compress(b"BT ET"), pages=2)
    both = parse_document(_lines_pdf(b"Only text"), "t.pdf")
    assert both.blocks[0].page == 1
    from shared.errors import NoTextError

    try:
        parse_document(blank, "blank.pdf")
    except NoTextError:
        pass
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("a PDF with no text layer at all must end no_text")
