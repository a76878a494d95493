"""PDF reading order and form/annotation text on generated PDFs, read by pypdfium2 (issue 17; no network).

Each fault was replayed on main before the fix: a ``/Rotate 90`` page came out with its lines in
reverse order, rotated text matrices glued lines together, two columns drawn row by row
interleaved, filled form fields and FreeText/sticky-note text were not indexed at all.
"""

from __future__ import annotations

import pytest

from task_service.pipeline.parse import parse_document
from tests.support.pdfgen import (
    annotation_ref,
    appearance,
    column_page,
    intact,
    pdf_document,
    placed_text,
    rotated_lines,
    sentences,
    text_width,
)

LINES = ["The first line names Quillmoor.", "The second line follows it.", "The third line comes next.",
         "The fourth line ends the page."]


def _lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


@pytest.mark.parametrize("rotate", [90, 180, 270])
def test_a_rotated_page_with_upright_text_keeps_the_authors_line_order(rotate: int) -> None:
    stream = placed_text([(72, 720 - 14 * k, line) for k, line in enumerate(LINES)], 12)
    parsed = parse_document(pdf_document([stream], rotate=[rotate]), "r.pdf")
    assert _lines(parsed.text) == LINES  # main: the fourth line first on /Rotate 90


@pytest.mark.parametrize("rotate", [0, 90, 180, 270])
def test_text_turned_against_the_page_rotation_reads_in_order(rotate: int) -> None:
    stream, turns = rotated_lines(LINES, rotate)
    assert _lines(parse_document(pdf_document([stream], rotate=turns), "t.pdf").text) == LINES


@pytest.mark.parametrize("matrix", [(0, 1, -1, 0), (0, -1, 1, 0), (-1, 0, 0, -1)])
def test_a_rotated_text_matrix_keeps_its_lines_apart(matrix: tuple[float, float, float, float]) -> None:
    c, d = matrix[2], matrix[3]
    # lines stacked "down" the rotated text: the next line is one leading along (c, d) negated
    items = [(306 - 14 * k * c, 396 - 14 * k * d, line) for k, line in enumerate(LINES)]
    text = parse_document(pdf_document([placed_text(items, 12, matrix)]), "m.pdf").text
    assert _lines(text) == LINES  # main: "The second line follows it.The third line comes next...."


@pytest.mark.parametrize("columns", [2, 3])
@pytest.mark.parametrize("order", ["columns", "rows", "reverse"])
def test_columns_read_column_by_column_in_any_drawing_order(columns: int, order: str) -> None:
    stream, placed = column_page(sentences(200, seed=7), columns, order, seed=7)
    text = parse_document(pdf_document([stream]), "c.pdf").text
    assert len(placed) > 40
    assert intact(text, placed) >= 0.98  # main, drawn row by row: 31 % (2 columns), 5 % (3 columns)
    assert text.startswith("Quarterly minutes of the board") and text.endswith("Page 1")


def test_a_table_drawn_row_by_row_stays_rows() -> None:
    rows = [("Item", "Quantity", "Price"), ("Bolts", "12", "3.50"), ("Washers", "40", "1.20"), ("Nuts", "12", "2.10")]
    items = [(72 + 120 * c, 700 - 16 * r, cell) for r, row in enumerate(rows) for c, cell in enumerate(row)]
    text = parse_document(pdf_document([placed_text(items)]), "t.pdf").text
    assert _lines(text) == [" ".join(row) for row in rows]


def test_a_list_drawn_column_by_column_stays_column_by_column() -> None:
    left = ["2 Reliance at a glance", "4 Stakeholder value", "6 Key indicators"]
    right = ["42 Management discussion", "44 Financial review", "54 Business overview"]
    items = [(72, 700 - 16 * k, line) for k, line in enumerate(left)]
    items += [(320, 700 - 16 * k, line) for k, line in enumerate(right)]
    assert _lines(parse_document(pdf_document([placed_text(items)]), "toc.pdf").text) == left + right


def test_a_footnote_mark_is_its_own_word_and_an_ordinal_is_not() -> None:
    parts = [("Shen", 12, 0), ("1", 7, 5), (" and the 29", 12, 0), ("th", 7, 5), (" day", 12, 0)]
    ops, x = [], 72.0
    for text, size, rise in parts:
        ops.append(b"/F1 %d Tf 1 0 0 1 %.2f %d Tm (%s) Tj" % (size, x, 700 + rise, text.encode()))
        x += text_width(text, size)
    stream = b"BT " + b" ".join(ops) + b" ET"
    assert parse_document(pdf_document([stream]), "s.pdf").text == "Shen 1 and the 29th day"


def _form_pdf(flattened: bool) -> bytes:
    """Page 1: a label, a filled text field (with /TU), a checked and an unchecked box, a FreeText
    and a sticky note; page 2: the same text field's second widget (same name, once only)."""
    content = placed_text([(72, 700, "Customer name:"), (72, 660, "Terms accepted:")], 12)
    if flattened:
        content += b" " + placed_text([(182, 700, "Jane Quillfeather")], 10)
    pages, tail = 2, 3
    ap = [annotation_ref(pages, 7 + k) for k in range(tail)]
    field = (b"<< /Type /Annot /Subtype /Widget /FT /Tx /T (customer_name) /TU (Customer name)"
             b" /V (Jane Quillfeather) /Rect [180 692 400 714] /F 4 /AP << /N %d 0 R >> /P 3 0 R >>" % ap[0])
    checked = (b"<< /Type /Annot /Subtype /Widget /FT /Btn /T (Terms accepted) /V /Yes /AS /Yes"
               b" /Rect [180 652 194 666] /F 4 /AP << /N << /Yes %d 0 R /Off %d 0 R >> >> /P 3 0 R >>" % (ap[1], ap[1]))
    unchecked = (b"<< /Type /Annot /Subtype /Widget /FT /Btn /T (Newsletter Zorvane) /V /Off /AS /Off /Rect"
                 b" [200 652 214 666] /F 4 /AP << /N << /Yes %d 0 R /Off %d 0 R >> >> /P 3 0 R >>" % (ap[1], ap[1]))
    free = (b"<< /Type /Annot /Subtype /FreeText /Rect [72 500 400 530] /Contents (Reviewed by the Brambleton"
            b" office) /DA (/Helv 10 Tf 0 g) /AP << /N %d 0 R >> >>" % ap[2])
    note = b"<< /Type /Annot /Subtype /Text /Rect [420 700 440 720] /T (Alice) /Contents (Check the Varnholt clause) >>"
    again = (b"<< /Type /Annot /Subtype /Widget /FT /Tx /T (customer_name) /TU (Customer name)"
             b" /V (Jane Quillfeather) /Rect [180 692 400 714] /F 4 /AP << /N %d 0 R >> /P 5 0 R >>" % ap[0])
    fields = [annotation_ref(pages, k) for k in (0, 1, 2, 5)]
    acro = b"/AcroForm << /Fields [%s] /DA (/Helv 0 Tf 0 g) >>" % " ".join(f"{n} 0 R" for n in fields).encode()
    return pdf_document(
        [content, placed_text([(72, 700, "Second page")])],
        extra=[[field, checked, unchecked, free, note], [again]],
        catalog=acro,
        tail=[appearance("Jane Quillfeather", 220, 22), appearance("4", 14, 14), appearance("Reviewed", 328, 30)],
    )


def test_filled_fields_and_annotations_are_indexed_with_their_name_once_on_their_page() -> None:
    parsed = parse_document(_form_pdf(flattened=False), "form.pdf")
    page1 = "\n".join(b.text for b in parsed.blocks if b.page == 1)
    page2 = "\n".join(b.text for b in parsed.blocks if b.page == 2)
    assert "Customer name: Jane Quillfeather" in page1  # main: the value was not indexed at all
    assert "Terms accepted: Yes" in page1
    assert "Reviewed by the Brambleton office" in page1
    assert "Note (Alice): Check the Varnholt clause" in page1
    assert "Zorvane" not in parsed.text  # an unchecked box says nothing
    assert parsed.text.count("Quillfeather") == 1 and "Quillfeather" not in page2


def test_a_flattened_field_value_is_not_indexed_twice() -> None:
    text = parse_document(_form_pdf(flattened=True), "flat.pdf").text
    assert text.count("Quillfeather") == 1
    assert "Terms accepted: Yes" in text
