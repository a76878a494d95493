"""HTML and Markdown readers (``html.py``, ``markdown.py``) through ``parse_document``: the fidelity
corpus, the handed extraction case, limits (nesting, huge text nodes, ``data:`` URIs) and the
shared corpus files (no word unstructured found may be lost)."""

from __future__ import annotations

import json
import re

import pytest

from shared.domain.errors import ParseLimitError
from task_service.pipeline.parse import parse_document, parse_text
from task_service.pipeline.readers.web.html import MAX_DEPTH, extract_html, max_tree_work
from task_service.pipeline.readers.web.markdown import extract_markdown, split_front_matter
from task_service.pipeline.readers.web.tree import RECONSTRUCT_WORK, tree_cost
from tests.fidelity import Sample, html_corpus, md_corpus
from tests.support import ROOT

CASES = ROOT.parent / "shared" / "cases" / "extraction"
CORPUS = ROOT.parent / "shared" / "corpus"
FROZEN = ROOT / "tests" / "fidelity" / "unstructured_words.json"
MB = 1_000_000


def _samples() -> list[Sample]:
    return html_corpus.samples() + md_corpus.samples()


def _word(marker: str, text: str) -> bool:
    """``marker`` occurs as a word of its own (not glued to a neighbouring word)."""
    return re.search(rf"(?<!\w){re.escape(marker)}(?!\w)", text) is not None


# ---------------------------------------------------------------- fidelity corpus


@pytest.mark.parametrize("sample", _samples(), ids=lambda s: f"{s.filename}")
def test_every_marker_and_nothing_forbidden(sample: Sample) -> None:
    document = parse_document(sample.data, sample.filename)
    text = document.text
    assert [m for m in sample.must if not _word(m, text)] == []
    assert [m for m in sample.must_not if m in text] == []


@pytest.mark.parametrize("sample", [s for s in _samples() if s.sections], ids=lambda s: s.filename)
def test_sections_are_heading_paths(sample: Sample) -> None:
    blocks = parse_document(sample.data, sample.filename).blocks
    for marker, section in sample.sections.items():
        assert [b.section for b in blocks if marker in b.text] == [section]
    # A heading block carries the path that ends with itself.
    assert [b.section for b in blocks if b.text in ("Linux", "### Linux")] == ["Guide > Install > Linux"]


def test_html_inline_elements_join_and_blocks_separate() -> None:
    text = parse_text(html_corpus.samples()[0].data, "blocks.html")
    for literal in html_corpus.LITERAL:
        assert literal in text
    assert html_corpus.BR_LINES in text  # <br> ends a line
    assert html_corpus.PRE_LINES in text  # <pre> keeps line breaks and indentation
    assert "Summary SUMMARYTAGMARK\n\nDetails body DETAILSTAGMARK" in text


def test_html_table_rows_are_blocks_with_cells_joined() -> None:
    tables = next(s for s in html_corpus.samples() if s.name == "tables")
    texts = [b.text for b in parse_document(tables.data, tables.filename).blocks]
    assert "CELLAMARK | CELLBMARK" in texts and "FONTCELLMARK | 12.5" in texts
    # A layout table (a cell holding a heading and paragraphs) gives its blocks one by one.
    assert "Layout LAYOUTHEADMARK" in texts and "INNERAMARK | INNERBMARK" in texts


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("<td><p>ONE</p></td><td><font><span>TWO</span></font></td><td></td>", ["ONE | TWO"]),
        ("<td></td><td>TWO</td><td>THREE</td>", [" | TWO | THREE"]),
        ("<td>A<br>B</td><td>C</td>", ["A\nB", "C"]),  # a multi-line cell: its blocks, in order
        ("<td><p>P1</p><p>P2</p></td><td>C</td>", ["P1", "P2", "C"]),
    ],
)
def test_html_table_cells(row: str, expected: list[str]) -> None:
    blocks = extract_html(f"<p>before</p><table><tr>{row}</tr></table><p>after</p>").blocks
    assert [b.text for b in blocks] == ["before", *expected, "after"]


def test_blocks_inside_a_heading_stay_in_the_heading() -> None:
    html = "<h1><div>Big</div><p>Title</p></h1><p>Body</p><h2><a href='#x'>Sub</a></h2><p>More</p>"
    blocks = extract_html(html).blocks
    assert [(b.text, b.section) for b in blocks] == [
        ("Big Title", "Big Title"),
        ("Body", "Big Title"),
        ("Sub", "Big Title > Sub"),
        ("More", "Big Title > Sub"),
    ]


def test_content_outside_main_is_kept_and_nav_is_reported() -> None:
    html = (
        b"<header>HEADERMARK</header><nav><a href='/'>NAVMARK</a></nav><main><p>MAINMARK</p></main>"
        b"<aside><p>ASIDEMARK</p></aside><footer><p>FOOTERMARK</p></footer>"
    )
    document = parse_document(html, "page.html")
    assert all(_word(m, document.text) for m in ("HEADERMARK", "MAINMARK", "ASIDEMARK", "FOOTERMARK"))
    assert "NAVMARK" not in document.text
    assert any("navigation" in w for w in document.warnings)


def test_markdown_link_targets_and_image_alt() -> None:
    text = parse_text(b"Go to [the portal](https://host/path) now. ![A diagram](d.png)", "a.md")
    assert text == "Go to the portal (https://host/path) now. A diagram"


def test_markdown_front_matter_is_kept_as_text() -> None:
    assert split_front_matter("---\ntitle: T\n---\n# H\n") == ("title: T", "# H\n")
    assert split_front_matter("# No front matter\n---\n") == ("", "# No front matter\n---\n")
    # A document that opens with a thematic break is not front matter.
    assert split_front_matter("---\n\nSome *text*\n\n---\n")[0] == ""
    blocks = parse_document(b"+++\ntitle = 'TOMLMARK'\n+++\nBody\n", "t.md").blocks
    assert [b.text for b in blocks] == ["title = 'TOMLMARK'", "Body"]


# ---------------------------------------------------------------- the handed case


def _handed_markers() -> list[str]:
    readme = (CASES / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if "`html-containers.html`" in line)
    return re.findall(r"[A-Z]+MARK", row)


@pytest.mark.skipif(not CASES.is_dir(), reason=f"cases not found at {CASES}")
def test_handed_html_containers_case() -> None:
    markers = _handed_markers()
    assert len(markers) == 23 and "DELMARK" in markers and "ALTMARK" in markers
    text = parse_text((CASES / "html-containers.html").read_bytes(), "html-containers.html")
    assert [m for m in markers if not _word(m, text)] == []


# ---------------------------------------------------------------- limits


@pytest.mark.parametrize("depth", [300, 1_000, 5_000])
def test_deep_html_nesting_keeps_everything(depth: int) -> None:
    html = "<div>" * depth + "<p>DEEPMARK</p>" + "</div>" * depth + "<p>AFTERMARK</p>"
    text = parse_text(html.encode(), "deep.html")
    assert text == "DEEPMARK\n\nAFTERMARK"


@pytest.mark.parametrize("html", ["<div>" * 20_000 + "x", "<ul><li>" * 12_000 + "x", "<blockquote>" * 50_000])
def test_deeper_html_nesting_is_a_parse_limit(html: str) -> None:
    with pytest.raises(ParseLimitError, match="nested about"):
        parse_text(html.encode(), "deep.html")


def test_tree_depth_ignores_elements_that_do_not_nest() -> None:
    # Unclosed <p>, <li>, <td>, void elements and links do not nest in HTML5.
    assert tree_cost("<p>a<li>b<td>c<br><img><a>d<hr>" * 5_000).depth <= 5
    assert tree_cost("<div><span>x</span><DIV>" * 3).depth == 6 + 2  # + html, body
    assert tree_cost("<div>" * (MAX_DEPTH + 5), max_depth=MAX_DEPTH).depth == MAX_DEPTH + 1


# Issue 18: end tags the tree builder ignores no longer hide depth (each held a worker for a minute or more).
HOSTILE = {
    "ul-li-stray-end": "<ul><li></x>" * 100_000,  # 1.2 MB, 126.8 s before
    "div-stray-end": "<div></x>" * 150_000,  # 64.4 s before
    "end-behind-special": "<x><h1></x>" * 50_000,  # </x> is ignored: the <h1> above it is special
    "end-in-comment": "<div><!--</div>-->" * 30_000,
    "end-in-script": "<div><script></div></script>" * 30_000,
    "end-in-attribute": '<div title="</div>">' * 30_000,
    "formatting-reopened": "".join(f"<p><b id={i}>x</p>y" for i in range(30_000)),
    "mathml-children": "</select><a><math><caption>" * 30_000,
    "shallow-but-rechecked": "<x>" * 9_000 + "<p></p>" * 200_000,  # depth < MAX_DEPTH, 1.8e9 steps
}


@pytest.mark.parametrize("html", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_nesting_is_refused_within_a_bounded_replay(html: str) -> None:
    cost = tree_cost(html, max_depth=MAX_DEPTH, max_work=max_tree_work(len(html)))
    assert not cost.complete  # the replay stopped: refused before lexbor spends the work
    assert cost.work <= max_tree_work(len(html)) + MAX_DEPTH + 2
    with pytest.raises(ParseLimitError):
        extract_html(html)


@pytest.mark.parametrize("html", [
    "<table>" + "<tr><td><font size=2>Revenue</font></td><td><b>1,234</b></td></tr>" * 3_000 + "</table>",
    "<div><p>x</p><ul><li>a<li>b</ul></div>" * 3_000,
    "<p><b>x</p><p><b>y</p>" * 3_000,  # Noah's Ark: at most three equal formatting elements re-opened
    "<svg>" + "<g/><rect/>" * 3_000 + "<text>SVGMARK</text></svg>",
    "<x><h1>x</h1></x>" * 3_000,
])
def test_shallow_html_is_cheap_for_the_tree_builder(html: str) -> None:
    cost = tree_cost(html)
    assert cost.complete and cost.depth <= 10
    assert cost.work - RECONSTRUCT_WORK * cost.reopened <= 12 * html.count("<")  # scope walks
    assert cost.reopened <= 3 * html.count("<")  # Noah's Ark: at most three equal ones per run
    assert extract_html(html * 2).blocks  # past the replay's fast path


def test_huge_text_node_and_attribute_keep_what_follows() -> None:
    body = "lorem " * (12 * MB // 6)
    html = f"<p>BEFOREMARK</p><p title='{'x' * 12 * MB}'>ATTRMARK</p><p>{body}TEXTENDMARK</p><p>AFTERMARK</p>"
    blocks = parse_document(html.encode(), "huge.html").blocks
    assert [b.text[-11:] for b in blocks] == ["BEFOREMARK"[-11:], "ATTRMARK", "TEXTENDMARK", "AFTERMARK"]
    assert len(blocks[2].text) > 12 * MB


def test_markdown_600_level_list_is_indexed() -> None:
    source = "".join(f"{'  ' * i}- level {i} L{i}MARK\n" for i in range(600)) + "\nAfter AFTERMARK\n"
    text = parse_text(source.encode(), "deep.md")
    assert all(f"L{i}MARK" in text for i in range(600)) and text.endswith("After AFTERMARK")


def test_markdown_quotes_too_deep_are_a_parse_limit() -> None:
    with pytest.raises(ParseLimitError):
        extract_markdown(">" * 50_000 + " deep\n")


def test_markdown_10mb_data_uri_image_never_becomes_text() -> None:
    source = "Before BEFOREMARK ![ALTMARK](data:image/png;base64," + "iVBORw0K" * (10 * MB // 8) + ") AFTERMARK\n"
    document = parse_document(source.encode(), "img.md")
    assert document.text == "Before BEFOREMARK ALTMARK AFTERMARK"
    assert any("data: URI" in w for w in document.warnings)


def test_html_data_uri_in_text_is_removed_with_a_warning() -> None:
    uri = "data:image/png;base64," + "QUJD" * 1000
    html = f"<p>Pasted {uri} TAILMARK</p><img src='data:image/png;base64,AAAA' alt='ALT'>"
    document = extract_html(html)
    assert [b.text for b in document.blocks] == ["Pasted  TAILMARK", "ALT"]
    assert document.warnings == ("1 embedded data: URI(s) removed from the text",)


# ---------------------------------------------------------------- shared corpus vs the old path


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")
@pytest.mark.parametrize("name", ["fake-html.html", "fake-html-cp1252.html", "codeblock.md", "eng_spa_mult.md"])
def test_no_word_unstructured_found_is_lost(name: str) -> None:
    """``unstructured_words.json``: the words unstructured 0.27 extracted from these files (frozen)."""
    expected = set(json.loads(FROZEN.read_text(encoding="utf-8"))[name])
    found = set(re.findall(r"\w+", parse_text((CORPUS / name).read_bytes(), name)))
    assert expected and expected - found == set()


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")
def test_corpus_html_has_sections_and_table_rows() -> None:
    blocks = parse_document((CORPUS / "fake-html.html").read_bytes(), "fake-html.html").blocks
    assert ("Row 1, Cell 1 | Row 1, Cell 2", "My First Heading > My Second Heading > A Third Heading") in [
        (b.text, b.section) for b in blocks
    ]
