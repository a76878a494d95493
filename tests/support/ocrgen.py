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
    "chi_sim": (
        "城市图书馆将于下个月重新开放，阅览室和儿童区都已经完成翻新。",
        "新馆每天上午九点开门，晚上八点关门，周一闭馆。读者可以在网上预约座位，也可以在前台办理借书证。",
        "为了保护古籍，特藏室只接受预约参观，每次最多十人，请提前三天联系工作人员。",
    ),
}

_PT_PER_INCH = 72
_A4_PT = (595, 842)


def page_image(paragraphs: tuple[str, ...], dpi: int = 300, *, cjk: bool = False) -> Image.Image:
    """An A4 greyscale page (``L`` mode) at ``dpi`` with ``paragraphs`` word-wrapped in 11 pt type."""
    scale = dpi / _PT_PER_INCH
    width, height = round(_A4_PT[0] * scale), round(_A4_PT[1] * scale)
    margin = round(71 * scale)
    font = ImageFont.truetype(str(CJK_FONT if cjk else LATIN_FONT), round(11 * scale))
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    y = margin
    line_height = round(16 * scale)
    for paragraph in paragraphs:
        for line in _wrap(paragraph, font, width - 2 * margin, cjk=cjk):
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


def language_page(lang: str, dpi: int = 300) -> Image.Image:
    """The page of ``TEXTS[lang]`` at ``dpi``."""
    return page_image(TEXTS[lang], dpi, cjk=lang.startswith("chi"))


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


def normalized(text: str, lang: str) -> str:
    """Whitespace-normalized text for the character error rate: runs of whitespace become one space
    (Chinese: removed, since Tesseract puts spaces between Han characters)."""
    if lang.startswith("chi"):
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
