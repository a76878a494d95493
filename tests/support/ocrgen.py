"""Pages of known text rendered to pixels, for the OCR tests and ``bench/ocr.py`` (needs Pillow and the
Debian fonts ``fonts-dejavu-core`` (Latin) and ``fonts-wqy-zenhei`` (Chinese)).

A page is drawn as a scanner would see an A4 sheet at ``dpi``: 11 pt type, 2.5 cm margins, black on
white, greyscale. ``scanned_pdf`` wraps such pages as image-only PDF pages (no text layer), the way a
scanner writes them (one DCT/Flate image XObject per page).
"""

from __future__ import annotations

import io
import re
import zlib
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from tests.support.pdfgen import assemble

LATIN_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")

#: Known text per language (Tesseract language code → paragraphs).
TEXTS: dict[str, tuple[str, ...]] = {
    "eng": (
        "The Rookhaven tunnel reopens in autumn after eighteen months of repairs to its drainage.",
        "Trains will run every twelve minutes between the harbour and the old quarry, with a late service "
        "on Fridays and Saturdays until half past one in the morning.",
        "Passengers with bicycles should use the rear carriage. Season tickets bought before March remain "
        "valid, and refunds for the closure can be claimed at any ticket office until the end of the year.",
    ),
    "deu": (
        "Die Brücke über die Weißach wird im Frühjahr für drei Wochen gesperrt.",
        "Während der Bauarbeiten fährt der Bus 42 eine Umleitung über Großhöflein und hält zusätzlich am "
        "Bahnhof. Fußgänger können den Steg neben der Mühle benutzen.",
        "Anwohner erhalten eine Durchfahrtsgenehmigung im Bürgerbüro; bitte bringen Sie Ihren Ausweis und "
        "den Fahrzeugschein mit.",
    ),
    "kor": (
        "시립 도서관은 다음 달에 다시 문을 엽니다. 열람실과 어린이 공간은 모두 새로 단장했습니다.",
        "도서관은 매일 오전 아홉 시에 문을 열고 저녁 여덟 시에 닫으며 월요일에는 쉽니다.",
        "고서를 보호하기 위해 특별 열람실은 예약한 방문객만 받습니다.",
    ),
    "jpn": (
        "市立図書館は来月から再び開館します。閲覧室と子ども向けの場所は新しくなりました。",
        "図書館は毎日午前九時に開き、午後八時に閉まります。月曜日は休館です。",
        "古い本を守るため、特別室は予約した方だけが利用できます。",
    ),
    "chi_sim": (
        "城市图书馆将于下个月重新开放，阅览室和儿童区都已经完成翻新。",
        "新馆每天上午九点开门，晚上八点关门，周一闭馆。读者可以在网上预约座位，也可以在前台办理借书证。",
        "为了保护古籍，特藏室只接受预约参观，每次最多十人，请提前三天联系工作人员。",
    ),
}

_PT_PER_INCH = 72
_A4_PT = (595, 842)


def page_image(paragraphs: tuple[str, ...], dpi: int = 300, *, cjk: bool = False,
               wrap_chars: bool | None = None) -> Image.Image:
    """An A4 greyscale page (``L`` mode) at ``dpi`` with ``paragraphs`` word-wrapped in 11 pt type
    (``cjk``: the CJK font; ``wrap_chars``: wrap between any two characters, default ``cjk``)."""
    scale = dpi / _PT_PER_INCH
    width, height = round(_A4_PT[0] * scale), round(_A4_PT[1] * scale)
    margin = round(71 * scale)
    font = ImageFont.truetype(str(CJK_FONT if cjk else LATIN_FONT), round(11 * scale))
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    y = margin
    line_height = round(16 * scale)
    for paragraph in paragraphs:
        for line in _wrap(paragraph, font, width - 2 * margin, cjk=cjk if wrap_chars is None else wrap_chars):
            draw.text((margin, y), line, font=font, fill=0)
            y += line_height
        y += line_height // 2
    return image


def _wrap(text: str, font: ImageFont.FreeTypeFont, width: int, *, cjk: bool) -> list[str]:
    units = list(text) if cjk else text.split(" ")
    joiner = "" if cjk else " "
    lines: list[str] = []
    line = ""
    for unit in units:
        candidate = f"{line}{joiner}{unit}" if line else unit
        if line and font.getlength(candidate) > width:
            lines.append(line)
            line = unit
        else:
            line = candidate
    if line:
        lines.append(line)
    return lines


#: Scripts written without spaces between words (wrapped per character; whitespace ignored by the CER).
_UNSPACED = ("chi", "jpn")


def language_page(lang: str, dpi: int = 300) -> Image.Image:
    """The page of ``TEXTS[lang]`` at ``dpi`` (the CJK font for Chinese, Japanese and Korean)."""
    cjk = lang.startswith(("chi", "jpn", "kor"))
    return page_image(TEXTS[lang], dpi, cjk=cjk, wrap_chars=lang.startswith(_UNSPACED))


def png_bytes(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def image_page_stream(image: Image.Image, name: bytes = b"Im1") -> tuple[bytes, bytes]:
    """(content stream, image XObject) drawing ``image`` over a whole A4 page."""
    gray = image.convert("L")
    packed = zlib.compress(gray.tobytes())
    xobject = (b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
               b"/BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n" % (*gray.size, len(packed))
               + packed + b"\nendstream")
    stream = b"q %d 0 0 %d 0 0 cm /%s Do Q" % (_A4_PT[0], _A4_PT[1], name)
    return stream, xobject


def scanned_pdf(pages: list[Image.Image | bytes | tuple[Image.Image, bytes]]) -> bytes:
    """A PDF whose page ``i`` is ``pages[i]``: an image (a scan, no text layer), a content stream of
    text operators with Helvetica as F1 (``tests.support.pdfgen.text_page``), or both (the text over the scan)."""
    n = len(pages)
    kids = " ".join(f"{3 + 3 * i} 0 R" for i in range(n))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode()]
    for i, page in enumerate(pages):
        first = 3 + 3 * i
        if isinstance(page, bytes):
            stream, xobject = page, b"<< /Length 0 >>\nstream\n\nendstream"
        elif isinstance(page, tuple):
            stream, xobject = image_page_stream(page[0])
            stream += b" " + page[1]
        else:
            stream, xobject = image_page_stream(page)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents %d 0 R /Resources << /XObject "
            b"<< /Im1 %d 0 R >> /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>"
            % (*_A4_PT, first + 1, first + 2))
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        objects.append(xobject)
    return assemble(objects)


#: Languages whose whitespace the CER ignores: Chinese and Japanese have none, and ``ocr.tidy`` removes
#: Tesseract's gaps between CJK characters, Hangul included (search reads those scripts as n-grams).
_CER_UNSPACED = ("chi", "jpn", "kor")


def normalized(text: str, lang: str) -> str:
    """Whitespace-normalized text for the character error rate: runs of whitespace become one space
    (Chinese, Japanese, Korean: removed, see ``_CER_UNSPACED``)."""
    if lang.startswith(_CER_UNSPACED):
        return re.sub(r"\s+", "", text)
    return " ".join(text.split())


def cer(expected: str, got: str, lang: str) -> float:
    """Character error rate: Levenshtein distance / length of the expected text, both normalized."""
    from rapidfuzz.distance import Levenshtein

    want, have = normalized(expected, lang), normalized(got, lang)
    return Levenshtein.distance(want, have) / max(len(want), 1)


def degrade(image: Image.Image, seed: int = 0) -> Image.Image:
    """``image`` as an office scanner returns it: tilted 0.6°, slightly blurred (scaled to the page's
    resolution), with grain, saved as JPEG at quality 70."""
    import random

    from PIL import ImageFilter

    rng = random.Random(seed)
    dpi_scale = image.width / 1240  # 1 at 150 dpi (A4 width 1240 px)
    tilted = image.rotate(0.6, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=255)
    blurred = tilted.filter(ImageFilter.GaussianBlur(0.7 * dpi_scale))
    noise = Image.effect_noise(blurred.size, 12).point(lambda v: v - 128)
    grainy = Image.blend(blurred, Image.eval(noise, lambda v: v), 0.08)
    out = io.BytesIO()
    grainy.save(out, "JPEG", quality=70 - rng.randrange(3))
    return Image.open(io.BytesIO(out.getvalue())).convert("L")


#: A table of known cells: a header row and four data rows, each cell a distinct word (a marker).
TABLE: tuple[tuple[str, ...], ...] = (
    ("Depot", "Route", "Driver", "Status"),
    ("Quillmoor", "Harbour", "Ostrava", "delayed"),
    ("Brantwick", "Quarry", "Maluski", "running"),
    ("Fennimore", "Castle", "Dobrev", "cancelled"),
    ("Wexholm", "Airport", "Kasprzak", "boarding"),
)
#: Cell fills per row as an office table paints them: a dark header under white type, then coloured
#: fills under black type (mid-grey once converted: red 0.299·R + 0.587·G + 0.114·B ≈ 123, blue ≈ 130).
TABLE_FILLS: tuple[tuple[tuple[int, int, int], tuple[int, int, int]], ...] = (
    ((25, 45, 120), (255, 255, 255)),
    ((225, 80, 80), (0, 0, 0)),
    ((70, 170, 90), (0, 0, 0)),
    ((90, 130, 235), (0, 0, 0)),
    ((240, 175, 50), (0, 0, 0)),
)


def table_page(dpi: int = 200, rows: tuple[tuple[str, ...], ...] = TABLE,
               fills: tuple[tuple[tuple[int, int, int], tuple[int, int, int]], ...] = TABLE_FILLS,
               heading: str = "Weekly service report") -> Image.Image:
    """An A4 RGB page at ``dpi``: a heading line, then ``rows`` as a ruled table of 11 pt cells, row
    ``i`` painted ``fills[i % len(fills)]`` = (cell fill, type colour)."""
    scale = dpi / _PT_PER_INCH
    width, height = round(_A4_PT[0] * scale), round(_A4_PT[1] * scale)
    margin = round(71 * scale)
    font = ImageFont.truetype(str(LATIN_FONT), round(11 * scale))
    image = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    draw.text((margin, margin), heading, font=font, fill=(0, 0, 0))
    cell_w = (width - 2 * margin) // max(len(r) for r in rows)
    cell_h = round(24 * scale)
    top = margin + round(30 * scale)
    for i, row in enumerate(rows):
        fill, ink = fills[i % len(fills)]
        for j, cell in enumerate(row):
            x, y = margin + j * cell_w, top + i * cell_h
            draw.rectangle((x, y, x + cell_w, y + cell_h), fill=fill, outline=(0, 0, 0), width=max(1, dpi // 100))
            draw.text((x + round(6 * scale), y + round(6 * scale)), cell, font=font, fill=ink)
    return image


def degrade_colour(image: Image.Image, seed: int = 0) -> Image.Image:
    """``image`` (RGB) as a colour office scanner returns it: tilted 0.6°, slightly blurred, with
    grain, saved as JPEG at quality 70 (``degrade`` keeping the colours)."""
    from PIL import ImageFilter

    dpi_scale = image.width / 1240
    tilted = image.rotate(0.6, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=(255, 255, 255))
    blurred = tilted.filter(ImageFilter.GaussianBlur(0.7 * dpi_scale))
    noise = Image.merge("RGB", [Image.effect_noise(blurred.size, 12)] * 3)
    grainy = Image.blend(blurred, noise, 0.06)
    out = io.BytesIO()
    grainy.save(out, "JPEG", quality=70 - seed % 3)
    return Image.open(io.BytesIO(out.getvalue())).convert("RGB")


def photo(image: Image.Image, dpi_from: int, dpi_to: int = 100, angle: float = 2.0, seed: int = 0) -> Image.Image:
    """``image`` (rendered at ``dpi_from``) as a phone photo of the paper page: resampled to ``dpi_to``,
    turned ``angle`` degrees, lit unevenly (one side ≈30 % darker), warm paper tint, blurred, JPEG 60."""
    from PIL import ImageFilter

    rgb = image.convert("RGB")
    small = rgb.resize((round(rgb.width * dpi_to / dpi_from), round(rgb.height * dpi_to / dpi_from)),
                       Image.Resampling.LANCZOS)
    turned = small.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=(90, 80, 70))
    ramp = Image.linear_gradient("L").rotate(90).resize(turned.size)  # 255 on the left → 0 on the right
    shade = Image.merge("RGB", [ramp.point(lambda v: 255 - (255 - v) * 3 // 10)] * 3)
    tint = Image.new("RGB", turned.size, (245, 235, 215))
    from PIL import ImageChops

    lit = ImageChops.multiply(ImageChops.multiply(turned, tint), shade).filter(ImageFilter.GaussianBlur(0.6))
    out = io.BytesIO()
    lit.save(out, "JPEG", quality=60 - seed % 3)
    return Image.open(io.BytesIO(out.getvalue())).convert("RGB")


def photo_page(dpi: int = 100, seed: int = 0) -> Image.Image:
    """A photographed page at ``dpi``: the English paragraphs above the table of ``TABLE`` (rendered at
    300 dpi, then ``photo``)."""
    page = table_page(300, heading=TEXTS["eng"][0])
    return photo(page, 300, dpi, seed=seed)


def table_truth(rows: tuple[tuple[str, ...], ...] = TABLE) -> str:
    """The table's text in reading order: one line per row, cells left to right."""
    return "\n".join(" ".join(row) for row in rows)


def rows_in_order(rows: tuple[tuple[str, ...], ...], got: str) -> int:
    """How many of ``rows`` come out in reading order in ``got``: every cell found (as a word), left to
    right, with no cell of another row between the row's first and last (one line per row or one
    paragraph per cell alike; a column read down before the next fails)."""
    def at(cell: str) -> int:
        found = re.search(rf"\b{re.escape(cell)}\b", got)
        return -1 if found is None else found.start()

    positions = [[at(cell) for cell in row] for row in rows]
    good = 0
    for i, row in enumerate(positions):
        if min(row) < 0 or row != sorted(row):
            continue
        others = [p for j, other in enumerate(positions) if j != i for p in other if p >= 0]
        good += not any(row[0] < p < row[-1] for p in others)
    return good


def text_picture(lines: tuple[str, ...], size: tuple[int, int] = (1000, 340), pt: int = 40) -> Image.Image:
    """A greyscale picture of ``lines`` (black type on white, ``pt`` px type), e.g. a pasted notice."""
    image = Image.new("L", size, 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(str(LATIN_FONT), pt)
    for i, line in enumerate(lines):
        draw.text((30, 30 + i * round(pt * 1.5)), line, font=font, fill=0)
    return image


def pdf_with_picture(image: Image.Image, box: tuple[int, int, int, int] = (100, 500, 340, 118)) -> bytes:
    """A one-page A4 PDF with no text layer whose only content is ``image`` drawn at ``box`` = (x, y,
    width, height) in points: by default 340 × 118 pt, 8 % of the page."""
    gray = image.convert("L")
    packed = zlib.compress(gray.tobytes())
    xobject = (b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
               b"/BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n" % (*gray.size, len(packed))
               + packed + b"\nendstream")
    x, y, w, h = box
    stream = b"q %d 0 0 %d %d %d cm /Im1 Do Q" % (w, h, x, y)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents 4 0 R /Resources << /XObject "
               b"<< /Im1 5 0 R >> >> >>" % _A4_PT,
               b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream", xobject]
    return assemble(objects)


def pptx_with_picture(image: Image.Image, title_slide: str | None = "Depot notices") -> bytes:
    """A PPTX deck: a title slide with ``title_slide`` (when given), then a blank slide whose only content
    is ``image`` as a picture (python-pptx)."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    if title_slide is not None:
        deck.slides.add_slide(deck.slide_layouts[0]).shapes.title.text = title_slide
    slide = deck.slides.add_slide(deck.slide_layouts[6])  # blank
    slide.shapes.add_picture(io.BytesIO(png_bytes(image)), Inches(1), Inches(1), width=Inches(8))
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx_with_picture(image: Image.Image, rows: tuple[tuple[str, ...], ...] = (("Depot", "Opens"),)) -> bytes:
    """An XLSX workbook: sheet "Depots" with ``rows`` and ``image`` placed at E2 (openpyxl)."""
    import openpyxl
    from openpyxl.drawing.image import Image as SheetImage

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.title = "Depots"
    for row in rows:
        sheet.append(list(row))
    picture = SheetImage(io.BytesIO(png_bytes(image)))
    sheet.add_image(picture, "E2")
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()
