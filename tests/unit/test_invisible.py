"""Invisible format characters (issue 17): removed from document text and queries alike, kept where
a script or an emoji sequence needs them."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge_service.schemas import SearchRequest
from shared.domain.normalize import normalize_text, strip_invisible
from task_service.pipeline.parse import parse_text


@pytest.mark.parametrize(
    ("raw", "visible"),
    [
        ("in\u00advisible", "invisible"),  # soft hyphen
        ("mark\u200ber", "marker"),  # zero width space
        ("mark\u200cer", "marker"),  # ZWNJ between Latin letters
        ("mark\u200der", "marker"),  # ZWJ between Latin letters
        ("word\u2060joiner", "wordjoiner"),
        ("bom\ufeffinside", "bominside"),
        ("\u200fright\u200e to \u202aleft\u202c \u2066isolate\u2069", "right to left isolate"),
        ("a\u2061b\u2062c\u2063d\u2064e", "abcde"),  # invisible math operators
        ("x\U000e0067y\U000e0001z", "xyz"),  # tags outside an emoji tag sequence
        ("mark\u200b\u200d\u00ader", "marker"),
    ],
)
def test_invisible_characters_are_removed(raw: str, visible: str) -> None:
    assert normalize_text(raw) == visible


@pytest.mark.parametrize(
    "kept",
    [
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # family: a ZWJ emoji sequence
        "\u2764\ufe0f\u200d\U0001f525",  # heart on fire: VS16 before the joiner
        "\U0001f44b\U0001f3fd\u200d\u2642\ufe0f",  # skin tone before the joiner
        "\u0915\u094d\u200d\u0937",  # Devanagari half form (ZWJ after virama)
        "\u0915\u094d\u200c\u0937",  # Devanagari explicit virama (ZWNJ)
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian "mi-khaham": ZWNJ between Arabic letters
        "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # flag of Scotland
        "\u0600\u0661\u0662",  # Arabic number sign (visible, shapes the digits)
    ],
)
def test_joiners_the_script_needs_are_kept(kept: str) -> None:
    assert normalize_text(kept) == unicodedata.normalize("NFC", kept)


def test_a_joiner_at_an_edge_or_between_scripts_is_removed() -> None:
    assert strip_invisible("\u200dstart end\u200d") == "start end"
    assert strip_invisible("\u0645\u200cabc") == "\u0645abc"  # Arabic then Latin: no joining to prevent


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (b"<p>in&shy;visible mark&#8203;er word&#x2060;joiner</p>", "page.html"),
        ("in\u00advisible mark\u200ber word\u2060joiner".encode(), "notes.md"),
        ("in\u00advisible mark\u200ber word\u2060joiner".encode(), "notes.txt"),
    ],
)
def test_documents_are_indexed_with_the_visible_words(data: bytes, name: str) -> None:
    assert parse_text(data, name) == "invisible marker wordjoiner"


def test_queries_are_cleaned_the_same_way() -> None:
    assert SearchRequest(query="in\u00advisible mark\u200ber").query == "invisible marker"


def test_a_query_of_invisible_characters_only_is_refused() -> None:
    with pytest.raises(ValueError, match="no searchable text"):
        SearchRequest(query="\u200b\u00ad\u2060")


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(categories=["L", "Cf", "Mn", "So"]), max_size=60))
def test_no_removable_format_character_survives(text: str) -> None:
    """Only ZWJ, ZWNJ, tag characters (kept by context) and the visible/script-shaping Cf
    characters may remain; every other Cf character is removed."""
    kept_cf = {0x200C, 0x200D, *range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x180E,
               0x110BD, 0x110CD, *range(0x13430, 0x13440), *range(0x1BCA0, 0x1BCA4), *range(0xE0020, 0xE0080)}
    out = strip_invisible(text)
    assert [ch for ch in out if unicodedata.category(ch) == "Cf" and ord(ch) not in kept_cf] == []
    assert strip_invisible(out) == out  # idempotent
