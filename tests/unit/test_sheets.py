"""Table readers (XLSX/XLSM, ODS, CSV/TSV) and tables as rows: fidelity corpus, headers, bounds, errors."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable

import pytest

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from shared.domain.ole import OLE_MAGIC
from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import DEFAULT_LIMITS, ParseLimits
from task_service.pipeline.readers._shared import tables
from task_service.pipeline.readers.odf import ods
from task_service.pipeline.readers.office import xlsx
from task_service.pipeline.readers.plain import csv
from tests.fidelity import Sample, sheet_corpus
from tests.support import CASES

READERS: dict[str, Callable[[bytes, ParseLimits], ParsedDocument]] = {
    "xlsx": xlsx.read, "xlsm": xlsx.read, "ods": ods.read, "csv": csv.read, "tsv": csv.read,
}
# tests.support.CASES: ../shared/cases next to the checkout, or /work/shared/cases from a worktree
HANDED = CASES / "formats" / "two-sheets.xlsx"
SMALL = ParseLimits(table_max_cells=1_000, table_max_columns=50, table_max_row_chars=2_000)


def _read(sample: Sample, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    return READERS[sample.filename.rsplit(".", 1)[1]](sample.data, limits)


@pytest.mark.parametrize("sample", sheet_corpus.samples(), ids=lambda s: s.name)
def test_every_marker_comes_out_and_no_formula(sample: Sample) -> None:
    document = _read(sample)
    text = document.text
    assert [m for m in sample.must if m not in text] == []
    assert [m for m in sample.must_not if m in text] == []
    for marker, section in sample.sections.items():
        assert [b.section for b in document.blocks if marker in b.text] == [section]
    assert all(block.page is None for block in document.blocks)


@pytest.mark.parametrize("sample", sheet_corpus.xlsx_samples()[:1] + sheet_corpus.ods_samples(), ids=lambda s: s.name)
def test_values_as_the_sheet_shows_them_and_merged_cells_once(sample: Sample) -> None:
    text = _read(sample).text + " "
    assert [s for s in sheet_corpus.SHOWN[sample.name] if s not in text] == []
    assert [s for s in sheet_corpus.NOT_SHOWN if s in text] == []
    assert [m for m in sheet_corpus.EXACTLY_ONCE if text.count(m) > 1] == []


def test_rows_carry_detected_headers() -> None:
    blocks = xlsx.read(sheet_corpus.xlsx_bytes(), DEFAULT_LIMITS).blocks
    texts = [b.text for b in blocks]
    assert "Name: SECONDSHEETMARK contact | Extension: 4418" in texts
    row = next(t for t in texts if "TEXTCELLMARK" in t)
    assert row.startswith("HEADERMARK Item: TEXTCELLMARK gasket | Unit price: 0.42 | Updated: 2026-03-14")
    assert "MERGEDMARK note across the table" in texts  # a merged note is plain text, not "Column A: …"
    assert "Column J: FARCELLMARK" in texts


def test_no_header_when_the_first_row_looks_like_data() -> None:
    document = csv.read(b"12,Paris,3.5\n14,Oslo,4.5\n", DEFAULT_LIMITS)
    assert [b.text for b in document.blocks] == [
        "Column 1: 12 | Column 2: Paris | Column 3: 3.5", "Column 1: 14 | Column 2: Oslo | Column 3: 4.5"]


@pytest.mark.parametrize(("data", "first"), [
    (b"Name,Note\nAlice,Likes cranes.\nBob,Prefers trams.\n", "Name: Alice | Note: Likes cranes."),
    (b"city,country\nParis,France\nBerlin,Germany\n", "city: Paris | country: France"),
])
def test_a_table_of_text_columns_has_its_first_row_as_header(data: bytes, first: str) -> None:
    assert csv.read(data, DEFAULT_LIMITS).blocks[0].text == first


def test_a_first_row_repeated_in_its_columns_is_data() -> None:
    document = csv.read(b"open,yes\nopen,no\nclosed,yes\n", DEFAULT_LIMITS)
    assert document.blocks[0].text == "Column 1: open | Column 2: yes"


def test_title_rows_above_the_header_are_plain_text() -> None:
    grid = [{0: tables.Cell("Quarterly prices")}, {0: tables.Cell("Item"), 1: tables.Cell("Price")},
            {0: tables.Cell("Bolt"), 1: tables.Cell("3", "number")}]
    assert [b.text for b in tables.table_blocks(grid, "S", tables.letter_name)] == [
        "Quarterly prices", "Item: Bolt | Price: 3"]


def test_quoted_newline_stays_in_its_cell() -> None:
    sample = next(s for s in sheet_corpus.csv_samples() if s.name == "newline.csv")
    assert next(b for b in _read(sample).blocks if "QUOTEDLINEONEMARK" in b.text).text.endswith("QUOTEDLINETWOMARK")


@pytest.mark.parametrize(("data", "delimiter"), [
    (b"a;b;c\n1;2,5;3\n", ";"), (b"a\tb\n1\t2\n", "\t"), (b'a,b\n"x;y;z",2\n', ","), (b"a|b\n1|2\n", "|"),
    (b"one column\nno delimiter\n", ","),
])
def test_delimiter_detection(data: bytes, delimiter: str) -> None:
    assert csv.sniff_delimiter(data.decode()) == delimiter


def test_handed_workbook() -> None:
    if not HANDED.exists():
        pytest.skip(f"{HANDED} not present")
    blocks = xlsx.read(HANDED.read_bytes(), DEFAULT_LIMITS).blocks
    by_text = {b.text: b.section for b in blocks}
    assert by_text["Item: Hollowmere gasket unit price | Unit price: 0.42 | Updated: 2026-03-14"] == "Prices"
    assert by_text["Name: Pennywhistle contact phone extension | Extension: 4417"] == "Contacts"


# ---------------------------------------------------------------------- bounds and bad input


def test_csv_of_one_50_mb_line_is_a_parse_limit() -> None:
    with pytest.raises(ParseLimitError, match="TABLE_MAX_ROW_CHARS"):
        csv.read(b"x" * 50_000_000, DEFAULT_LIMITS)


def test_csv_with_a_million_columns_is_a_parse_limit() -> None:
    with pytest.raises(ParseLimitError, match="TABLE_MAX_COLUMNS"):
        csv.read(b"a," * 400_000 + b"\n", DEFAULT_LIMITS)  # 800,000 characters: under TABLE_MAX_ROW_CHARS
    with pytest.raises(ParseLimitError, match="TABLE_MAX_ROW_CHARS"):
        csv.read(b"a," * 1_000_000 + b"\n", DEFAULT_LIMITS)


def test_csv_open_quote_holding_the_file_is_a_parse_limit() -> None:
    with pytest.raises(ParseLimitError, match="TABLE_MAX_ROW_CHARS"):
        csv.read(b'a,"' + b"line\n" * 1_000, SMALL)


def test_csv_cells_are_counted() -> None:
    with pytest.raises(ParseLimitError, match="TABLE_MAX_CELLS"):
        csv.read(b"a,b\n" * 600, SMALL)


def test_sparse_xlsx_is_refused_before_calamine_allocates_it() -> None:
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.active["A1"] = "a"  # type: ignore[index]
    workbook.active["XFD1048576"] = "z"  # type: ignore[index]
    buffer = io.BytesIO()
    workbook.save(buffer)
    with pytest.raises(ParseLimitError, match="TABLE_MAX_CELLS"):
        xlsx.read(buffer.getvalue(), DEFAULT_LIMITS)


def test_ods_repeated_rows_with_content_are_counted() -> None:
    row = '<table:table-row table:number-rows-repeated="100000000"><table:table-cell office:value-type="string">' \
          "<text:p>x</text:p></table:table-cell></table:table-row>"
    with pytest.raises(ParseLimitError, match="TABLE_MAX_CELLS"):
        ods.read(sheet_corpus.ods_bytes(sheet_corpus.ods_content(row)), DEFAULT_LIMITS)


def test_ods_repeated_empty_rows_cost_nothing() -> None:
    sample = sheet_corpus.ods_samples()[0]  # ends with 1,048,570 empty rows of 1,024 cells
    assert "ODSTEXTMARK" in ods.read(sample.data, SMALL).text


@pytest.mark.parametrize("reader", [xlsx.read, ods.read])
@pytest.mark.parametrize("data", [b"", b"not a zip", b"PK\x03\x04broken", OLE_MAGIC + bytes(9)])
def test_corrupt_packages(reader: Callable[[bytes, ParseLimits], ParsedDocument], data: bytes) -> None:
    with pytest.raises(CorruptDocumentError):
        reader(data, DEFAULT_LIMITS)


def test_xlsx_with_broken_sheet_xml_is_corrupt() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(sheet_corpus.xlsx_bytes())) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            body = src.read(item.filename)
            dst.writestr(item, body[: len(body) // 2] if item.filename == "xl/worksheets/sheet1.xml" else body)
    with pytest.raises(CorruptDocumentError):
        xlsx.read(out.getvalue(), DEFAULT_LIMITS)


def test_ods_without_content_is_corrupt() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
    with pytest.raises(CorruptDocumentError):
        ods.read(out.getvalue(), DEFAULT_LIMITS)


def test_column_letters() -> None:
    assert [tables.column_letter(i) for i in (0, 25, 26, 701, 702, 16_383)] == ["A", "Z", "AA", "ZZ", "AAA", "XFD"]


def test_a_row_that_fits_in_a_chunk_is_never_split() -> None:
    from task_service.pipeline.chunk import Chunker, load_minilm_tokenizer

    chunker = Chunker(load_minilm_tokenizer())
    words = "gasket price washer bolt flange valve seal ring pump".split()
    grid = [{c: tables.Cell(f"H{c}") for c in range(150)}]
    grid += [{c: tables.Cell(f"{words[(r * c) % 9]} {r}") for c in range((3, 10, 40, 70, 120)[r % 5])}
             for r in range(100)]
    blocks = tables.table_blocks(grid, "Sheet", tables.letter_name)
    chunks = chunker.chunk(ParsedDocument(tuple(blocks)))
    fitting = [b.text for b in blocks if chunker.count_tokens(b.text) <= chunker.max_tokens
               and len(b.text) <= chunker.max_chars]
    assert len(fitting) >= 40  # rows of 3, 10 and 40 cells; longer ones must be split
    assert [t for t in fitting if not any(t in chunk.content for chunk in chunks)] == []
