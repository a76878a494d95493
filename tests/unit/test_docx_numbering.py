"""List labels (``task_service.pipeline.readers.office.numbering``): templates, formats, restarts, overrides,
shared counters, numbering from paragraph styles, hostile values; and the labels in ``extract_docx``."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

import pytest
from lxml import etree

from task_service.pipeline.readers.office.docx import extract_docx
from task_service.pipeline.readers.office.labels import MAX_LABEL, format_number
from task_service.pipeline.readers.office.numbering import ListNumbering

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def lvl(ilvl: int, fmt: str = "decimal", text: str = "%1.", extra: str = "") -> str:
    return f'<w:lvl w:ilvl="{ilvl}">{extra}<w:numFmt w:val="{fmt}"/><w:lvlText w:val="{text}"/></w:lvl>'


def numbering(abstracts: dict[int, str], nums: dict[int, tuple[int, str]]) -> etree._Element:
    """``abstracts``: id → its w:lvl XML; ``nums``: numId → (abstractNumId, w:lvlOverride XML)."""
    xml = "".join(f'<w:abstractNum w:abstractNumId="{a}">{levels}</w:abstractNum>' for a, levels in abstracts.items())
    xml += "".join(f'<w:num w:numId="{n}"><w:abstractNumId w:val="{a}"/>{over}</w:num>'
                   for n, (a, over) in nums.items())
    return etree.fromstring(f"<w:numbering {W}>{xml}</w:numbering>")


def styles(xml: str) -> etree._Element:
    return etree.fromstring(f"<w:styles {W}>{xml}</w:styles>")


def ppr(num_id: int | None = None, ilvl: int | None = None, style: str | None = None) -> etree._Element:
    inner = "" if style is None else f'<w:pStyle w:val="{style}"/>'
    if num_id is not None or ilvl is not None:
        inner += "<w:numPr>"
        inner += "" if ilvl is None else f'<w:ilvl w:val="{ilvl}"/>'
        inner += "" if num_id is None else f'<w:numId w:val="{num_id}"/>'
        inner += "</w:numPr>"
    return etree.fromstring(f"<w:pPr {W}>{inner}</w:pPr>")


def labels(numbers: ListNumbering, paragraphs: Sequence[tuple[int | None, int | None]]) -> list[str]:
    return [numbers.label(ppr(num_id, ilvl)) for num_id, ilvl in paragraphs]


CLAUSES = numbering(
    {1: lvl(0, text="%1.", extra='<w:start w:val="4"/>') + lvl(1, text="Clause %1.%2")
        + lvl(2, "lowerLetter", "%3)") + lvl(3, "lowerRoman", "(%4)")},
    {1: (1, "")},
)


def test_multilevel_templates_formats_and_restart_of_deeper_levels() -> None:
    paragraphs = [(1, 0), (1, 1), (1, 1), (1, 2), (1, 2), (1, 3), (1, 3), (1, 0), (1, 1), (1, 2)]
    assert labels(ListNumbering(CLAUSES, None), paragraphs) == [
        "4.", "Clause 4.1", "Clause 4.2", "a)", "b)", "(i)", "(ii)", "5.", "Clause 5.1", "a)",
    ]


def test_a_level_used_before_its_parent_shows_the_parent_start() -> None:
    assert labels(ListNumbering(CLAUSES, None), [(1, 1), (1, 1)]) == ["Clause 4.1", "Clause 4.2"]


def test_paragraph_without_numbering_or_with_numid_zero_or_unknown_has_no_label() -> None:
    numbers = ListNumbering(CLAUSES, None)
    assert labels(numbers, [(None, None), (0, 0), (99, 0), (1, 7), (1, 0)]) == ["", "", "", "", "4."]


def test_level_restart_zero_never_restarts_and_restart_after_a_deeper_level() -> None:
    root = numbering(
        {1: lvl(0) + lvl(1, text="Step %2", extra='<w:lvlRestart w:val="0"/>')
            + lvl(2, text="%3", extra='<w:lvlRestart w:val="1"/>')},
        {1: (1, "")},
    )
    got = labels(ListNumbering(root, None), [(1, 0), (1, 1), (1, 2), (1, 1), (1, 2), (1, 0), (1, 1), (1, 2)])
    # level 3 restarts only after level 1 (w:lvlRestart 1), not after level 2
    assert got == ["1.", "Step 1", "1", "Step 2", "2", "2.", "Step 3", "1"]


def test_legal_numbering_shows_every_level_in_arabic_numerals() -> None:
    root = numbering({1: lvl(0, "upperRoman", "Article %1") + lvl(1, text="%1.%2", extra="<w:isLgl/>")},
                     {1: (1, "")})
    assert labels(ListNumbering(root, None), [(1, 0), (1, 1), (1, 0), (1, 1)]) == ["Article I", "1.1", "Article II",
                                                                                   "2.1"]


def test_nums_share_the_counters_of_their_abstract_unless_overridden() -> None:
    restart = '<w:lvlOverride w:ilvl="0"><w:startOverride w:val="1"/></w:lvlOverride>'
    whole = f'<w:lvlOverride w:ilvl="0"><w:startOverride w:val="3"/>{lvl(0, "upperRoman", "%1:")}</w:lvlOverride>'
    root = numbering({1: lvl(0, text="%1)")}, {1: (1, ""), 2: (1, ""), 3: (1, restart), 4: (1, whole)})
    got = labels(ListNumbering(root, None), [(1, 0), (2, 0), (3, 0), (3, 0), (1, 0), (4, 0), (4, 0)])
    assert got == ["1)", "2)", "1)", "2)", "3)", "III:", "IV:"]


def test_bullets_are_one_glyph_and_none_is_no_label() -> None:
    root = numbering({1: lvl(0, "bullet", "\uf0b7") + lvl(1, "bullet", "o") + lvl(2, "none", "")}, {1: (1, "")})
    assert labels(ListNumbering(root, None), [(1, 0), (1, 1), (1, 2)]) == ["•", "•", ""]


STYLES = styles(
    '<w:style w:type="paragraph" w:default="1" w:styleId="Normal"/>'
    '<w:style w:type="paragraph" w:styleId="Clause"><w:pPr><w:numPr><w:numId w:val="1"/></w:numPr></w:pPr></w:style>'
    '<w:style w:type="paragraph" w:styleId="SubClause"><w:basedOn w:val="Clause"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="Deep"><w:basedOn w:val="Clause"/>'
    '<w:pPr><w:numPr><w:ilvl w:val="2"/></w:numPr></w:pPr></w:style>'
)
STYLED = numbering({1: lvl(0, text="%1.") + lvl(1, text="%1.%2", extra='<w:pStyle w:val="SubClause"/>')
                    + lvl(2, "lowerLetter", "(%3)")}, {1: (1, "")})


def test_numbering_comes_from_the_paragraph_style_and_its_based_on_chain() -> None:
    numbers = ListNumbering(STYLED, STYLES)
    got = [numbers.label(ppr(style=s)) for s in ("Clause", "SubClause", "Deep", "Normal", "Clause")]
    # SubClause: level from the abstract's w:pStyle; Deep: its own w:ilvl; Normal: not numbered
    assert got == ["1.", "1.1", "(a)", "", "2."]


def test_direct_numbering_overrides_the_style_and_numid_zero_removes_it() -> None:
    numbers = ListNumbering(STYLED, STYLES)
    assert numbers.label(ppr(style="Clause", ilvl=1)) == "1.1"  # style's list, direct level
    assert numbers.label(ppr(0, style="Clause")) == ""


def test_a_list_style_link_is_followed_to_the_defining_abstract() -> None:
    root = numbering({1: lvl(0, text="Part %1"), 2: '<w:numStyleLink w:val="Parts"/>'}, {1: (1, ""), 2: (2, "")})
    style = styles('<w:style w:type="numbering" w:styleId="Parts"><w:pPr><w:numPr><w:numId w:val="1"/></w:numPr>'
                   "</w:pPr></w:style>")
    assert labels(ListNumbering(root, style), [(2, 0), (1, 0)]) == ["Part 1", "Part 2"]


@pytest.mark.parametrize(("value", "fmt", "expected"), [
    (4, "decimal", "4"), (7, "decimalZero", "07"), (12, "decimalZero", "12"), (14, "upperRoman", "XIV"),
    (1994, "lowerRoman", "mcmxciv"), (4000, "lowerRoman", "4000"), (1, "lowerLetter", "a"), (28, "upperLetter", "BB"),
    (781, "lowerLetter", "781"), (0, "lowerLetter", "0"), (2, "ordinal", "2nd"), (13, "ordinal", "13th"),
    (3, "decimalEnclosedParen", "(3)"), (5, "numberInDash", "- 5 -"), (9, "cardinalText", "9"),
    (3, "none", ""), (6, "ideographTraditional", "6"),
])
def test_number_formats(value: int, fmt: str, expected: str) -> None:
    assert format_number(value, fmt) == expected


def test_hostile_values_stay_bounded() -> None:
    long_text = "%1" * 5_000
    root = numbering({1: lvl(0, "lowerLetter", long_text, extra=f'<w:start w:val="{"9" * 5000}"/>')
                      + lvl(1, text="%2", extra='<w:start w:val="x"/>')}, {1: (1, "")})
    first, second = labels(ListNumbering(root, None), [(1, 0), (1, 1)])
    assert len(first) <= MAX_LABEL and second == "1"


# ---------------------------------------------------------------- through the DOCX reader


def _docx(body: str, numbering_xml: str, styles_xml: str = "") -> bytes:
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
    rels = ('<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="n" Type="{rel}numbering" Target="numbering.xml"/>'
            f'<Relationship Id="s" Type="{rel}styles" Target="styles.xml"/></Relationships>')
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("word/document.xml", f"<w:document {W}><w:body>{body}</w:body></w:document>")
        archive.writestr("word/_rels/document.xml.rels", rels)
        archive.writestr("word/numbering.xml", numbering_xml)
        archive.writestr("word/styles.xml", f"<w:styles {W}>{styles_xml}</w:styles>")
    return buffer.getvalue()


def _p(text: str, ppr_xml: str) -> str:
    return f"<w:p><w:pPr>{ppr_xml}</w:pPr><w:r><w:t>{text}</w:t></w:r></w:p>"


NUMBERING_XML = (f'<w:numbering {W}><w:abstractNum w:abstractNumId="1">{lvl(0, text="%1")}'
                 f'{lvl(1, text="%1.%2")}</w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="1"/></w:num>'
                 "</w:numbering>")


def test_numbered_headings_carry_their_label_into_the_section_path() -> None:
    styles_xml = ('<w:style w:type="paragraph" w:styleId="H1"><w:name w:val="heading 1"/><w:pPr><w:numPr>'
                  '<w:numId w:val="1"/></w:numPr></w:pPr></w:style><w:style w:type="paragraph" w:styleId="H2">'
                  '<w:name w:val="heading 2"/><w:pPr><w:numPr><w:ilvl w:val="1"/><w:numId w:val="1"/></w:numPr>'
                  "</w:pPr></w:style>")
    body = (_p("Scope", '<w:pStyle w:val="H1"/>') + _p("Payment", '<w:pStyle w:val="H1"/>')
            + _p("Invoices", '<w:pStyle w:val="H2"/>') + _p("The supplier shall invoice monthly.", ""))
    blocks = extract_docx(_docx(body, NUMBERING_XML, styles_xml)).blocks
    assert [b.text for b in blocks] == ["1 Scope", "2 Payment", "2.1 Invoices", "The supplier shall invoice monthly."]
    assert blocks[-1].section == "2 Payment > 2.1 Invoices"


def test_labels_in_table_cells_and_empty_items_still_count() -> None:
    item = '<w:numPr><w:ilvl w:val="0"/><w:numId w:val="1"/></w:numPr>'
    cell = f"<w:tc>{_p('in a cell', item)}</w:tc>"
    body = _p("first", item) + f"<w:tbl><w:tr>{cell}</w:tr></w:tbl>" + _p("", item) + _p("fourth", item)
    assert [b.text for b in extract_docx(_docx(body, NUMBERING_XML)).blocks] == ["1 first", "2 in a cell", "4 fourth"]
