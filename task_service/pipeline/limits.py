"""Size limits checked while parsing: ZIP bomb pre-checks (every ZIP-based format of the
registry: DOCX, PPTX, XLSX, ODF, EPUB), PDF page and text limits.

These are the *structural* limits, checked by the parser itself (in the sandbox child or in
process); the *resource* limits (memory, CPU, wall clock) are enforced by ``sandbox.py``.
Every violation raises ``ParseLimitError`` (``parse_limit``, permanent) naming the limit and
the setting that raises it.

ZIP pre-check (before a reader opens the package), from the central directory only, so it
costs microseconds and inflates nothing (settings ``ZIP_MAX_*``; the older ``DOCX_MAX_*`` names
are still read):

- number of entries ≤ ``zip_max_entries`` (default 10 000);
- sum of the declared uncompressed sizes ≤ ``zip_max_uncompressed_bytes`` (default 200 MiB);
- per entry and for the whole archive, uncompressed / compressed ≤ ``zip_max_ratio`` (default 100),
  checked only above ``RATIO_GRACE_BYTES`` (100 KiB) of uncompressed data, as Apache POI's
  ``ZipSecureFile`` does (``MIN_INFLATE_RATIO`` 0.01, grace size 100 KB): tiny XML parts of
  real documents compress 30:1 (``simple.docx``'s 340 KB ``styles.xml``: 28.8:1) and a small
  part cannot be a bomb anyway;
- a package found inside another one (an e-mail attachment, an embedded workbook) is opened at
  most ``zip_max_depth`` levels deep (default 3): its reader passes ``depth``.

Why the declared sizes can be trusted: Python's ``zipfile.ZipExtFile`` (used by python-docx,
hence by unstructured) never returns more than the entry's declared ``file_size`` (it truncates
the inflated data to ``_left = zipinfo.file_size``), so an entry that lies about its size
yields at most the declared bytes (then a CRC error), never a bomb. One ``read()`` of it may
still inflate far more before cutting (up to 1 GiB per call), so every part is read with
``readers/_shared/xmlzip.read_entry``: at most the declared size + 1 byte inflated. Overlapping entries (the
"non-recursive" zip bomb) are caught by the sum of declared sizes.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared.domain.errors import ParseLimitError

if TYPE_CHECKING:
    from shared.settings import WorkerSettings

MIB = 1024 * 1024
RATIO_GRACE_BYTES = 100 * 1024


@dataclass(frozen=True)
class ParseLimits:
    """Structural limits; picklable (sent to the sandbox child once, at its start)."""

    zip_max_uncompressed_bytes: int = 200 * MIB
    zip_max_entries: int = 10_000
    zip_max_ratio: float = 100.0
    zip_max_depth: int = 3
    pdf_max_pages: int = 2_000
    pdf_max_text_chars: int = 50_000_000
    # Text any reader may emit for one document (PARSE_MAX_TEXT_CHARS), charged as blocks are made
    # (``document.text_budget``): no more than CHUNK_MAX_PER_DOCUMENT × CHUNK_MAX_CHARS (40 M) can be
    # indexed anyway, and 50 M characters chunk in ≈3.6 s (bench/RESULTS.md, chunking).
    text_max_chars: int = 50_000_000
    # JSON / JSONL / XML readers (readers/plain/jsondoc.py, readers/plain/xml.py): STRUCTURED_MAX_DEPTH,
    # STRUCTURED_MAX_VALUES (nesting levels; leaf values or text nodes per document)
    structured_max_depth: int = 200
    structured_max_values: int = 2_000_000
    # e-mail (.eml/.msg, readers/mail/): MAIL_MAX_DEPTH, MAIL_MAX_NESTING, MAIL_MAX_HEADER_CHARS
    mail_max_depth: int = 3
    mail_max_nesting: int = 50
    mail_max_header_chars: int = 100_000
    # OCR (issue 22; ocr.py, readers/image/reader.py, readers/pdf/reader.py): settings OCR_LANGUAGES,
    # OCR_TESSDATA_DIR, OCR_DPI, OCR_MAX_PAGES, IMAGE_MAX_PIXELS. 100 pages at ≈0.5-1 s each fit
    # PARSE_CPU_LIMIT_S (bench/ocr.py).
    ocr_languages: str = "eng+deu+chi_sim+kor+jpn"
    ocr_tessdata_dir: str = "/usr/share/tesseract-ocr/5/tessdata"
    ocr_dpi: int = 200
    ocr_max_pages: int = 100
    image_max_pixels: int = 50_000_000  # A4 at 600 dpi is 35 Mpx; 20,000 × 20,000 px (400 Mpx) is refused
    # Pixels OCRed per document (OCR_MAX_PIXELS), summed over the pages or frames to OCR before the
    # first is rendered: 100 A4 pages at 200 dpi are 387 Mpx; 100 pages of 50 Mpx would run to the
    # CPU limit (Tesseract ≈0.15-0.25 s per Mpx here), so they are refused at once.
    ocr_max_pixels: int = 400_000_000
    # Tables (XLSX/XLSM, ODS, CSV/TSV; readers/_shared/tables.py). Bounds time and memory of a sheet read
    # as rows: cells of the used range per document (TABLE_MAX_CELLS), columns of a sheet
    # (TABLE_MAX_COLUMNS; Excel's own limit is 16,384) and characters of one row / CSV line
    # (TABLE_MAX_ROW_CHARS).
    table_max_cells: int = 5_000_000
    table_max_columns: int = 16_384
    table_max_row_chars: int = 1_000_000

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> ParseLimits:
        return cls(
            zip_max_uncompressed_bytes=s.zip_max_uncompressed_mb * MIB,
            zip_max_entries=s.zip_max_entries,
            zip_max_ratio=s.zip_max_inflate_ratio,
            zip_max_depth=s.zip_max_depth,
            pdf_max_pages=s.pdf_max_pages,
            pdf_max_text_chars=s.pdf_max_text_chars,
            text_max_chars=s.parse_max_text_chars,
            structured_max_depth=s.structured_max_depth,
            structured_max_values=s.structured_max_values,
            mail_max_depth=s.mail_max_depth,
            mail_max_nesting=s.mail_max_nesting,
            mail_max_header_chars=s.mail_max_header_chars,
            ocr_languages=s.ocr_languages,
            ocr_tessdata_dir=s.ocr_tessdata_dir,
            ocr_dpi=s.ocr_dpi,
            ocr_max_pages=s.ocr_max_pages,
            image_max_pixels=s.image_max_pixels,
            ocr_max_pixels=s.ocr_max_pixels,
            table_max_cells=s.table_max_cells,
            table_max_columns=s.table_max_columns,
            table_max_row_chars=s.table_max_row_chars,
        )


DEFAULT_LIMITS = ParseLimits()


def check_zip_limits(data: bytes, limits: ParseLimits = DEFAULT_LIMITS, *, kind: str = "DOCX", depth: int = 0) -> None:
    """Raise ``ParseLimitError`` when the ZIP package in ``data`` exceeds ``limits``; ``kind``
    names it in the message; ``depth``: how many packages it is nested in (0: the document).

    Bytes that are not a ZIP archive pass: the reader reports them as corrupt, as before.
    """
    if depth > limits.zip_max_depth:
        raise ParseLimitError(
            f"{kind} (ZIP) nested {depth} packages deep; the limit is {limits.zip_max_depth} (ZIP_MAX_DEPTH)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError, NotImplementedError):
        return  # e.g. NotImplementedError("zip file version 25.0") from a damaged central directory
    if len(entries) > limits.zip_max_entries:
        raise ParseLimitError(
            f"{kind} (ZIP) has {len(entries):,} entries; the limit is {limits.zip_max_entries:,} "
            "(ZIP_MAX_ENTRIES)"
        )
    total = compressed = 0
    for entry in entries:
        _check_ratio(entry.file_size, entry.compress_size, limits, f"{kind} entry {entry.filename!r}")
        total += entry.file_size
        compressed += entry.compress_size
        if total > limits.zip_max_uncompressed_bytes:
            raise ParseLimitError(
                f"{kind} (ZIP) inflates to more than {_mib(limits.zip_max_uncompressed_bytes)} "
                f"(at least {_mib(total)} declared); the limit is ZIP_MAX_UNCOMPRESSED_MB"
            )
    _check_ratio(total, compressed, limits, f"{kind} archive as a whole")


def _check_ratio(size: int, compressed: int, limits: ParseLimits, what: str) -> None:
    if size <= RATIO_GRACE_BYTES:
        return
    ratio = size / max(compressed, 1)
    if ratio > limits.zip_max_ratio:
        raise ParseLimitError(
            f"{what} inflates {ratio:,.0f}:1 ({_mib(compressed)} → {_mib(size)}); the limit is "
            f"{limits.zip_max_ratio:g}:1 (ZIP_MAX_INFLATE_RATIO), a likely ZIP bomb"
        )


def _mib(n: int) -> str:
    return f"{n / MIB:,.1f} MiB"


def check_ocr_pixels(pixels: float, pages: int, kind: str, limits: ParseLimits) -> None:
    """Raise ``ParseLimitError`` when OCR of ``pages`` pages (or frames) of ``pixels`` pixels in all
    would pass ``limits.ocr_max_pixels`` (``OCR_MAX_PIXELS``); called before any is rendered."""
    if pixels > limits.ocr_max_pixels:
        raise ParseLimitError(
            f"{kind} has {pages:,} page(s) to OCR of {pixels / 1e6:,.0f} Mpx in all; the limit is "
            f"{limits.ocr_max_pixels / 1e6:,.0f} Mpx per document (OCR_MAX_PIXELS)"
        )
