"""OCR preprocessing and page segmentation on scanned tables, phone photos and CJK pages (issue 29).

``python -m bench.ocr_pages [--smoke]`` writes section ``ocr_pages`` of ``bench/RESULTS.md``.

Pages (``tests/support/ocrgen.py``, rendered from known text):

- *scanned table*: a heading and a 5 × 4 table whose rows are painted in saturated fills (dark
  header under white type, red / green / blue / amber under black type), A4 at 200 dpi, colour
  scan degradation (tilt 0.6°, blur, grain, JPEG 70);
- *photo*: the same table under an English line, as a ~100 dpi phone photo (turned 2°, lit ≈30 %
  darker on one side, paper tint, blur, JPEG 60);
- *text scan*: the English page of ``bench/ocr.py`` (greyscale scan, 200 dpi), to see a variant
  costs nothing on plain text.

Per variant: CER (Levenshtein / length of the expected text, whitespace normalized: the table as
one line per row, cells left to right), marker recall (the 20 cell words found), rows in order
(``ocrgen.rows_in_order``: rows whose cells come out left to right with no other row's cell
between: reading order kept), pages/s. Then the cost of Korean and Japanese in ``OCR_LANGUAGES``
(pages/s and CER per page language; CJK without whitespace) beside per-page script detection
(Tesseract OSD, then the script's languages).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image

from bench.report import write_section
from task_service.pipeline import ocr
from task_service.pipeline.limits import DEFAULT_LIMITS
from tests.support import ocrgen

TESSDATA = DEFAULT_LIMITS.ocr_tessdata_dir.rstrip("/") + "/"
MARKERS = tuple(cell for row in ocrgen.TABLE for cell in row)


@dataclass(frozen=True)
class Variant:
    """One way to hand a page to Tesseract: colour or greyscale, thresholding, resolution told or
    guessed, upscaling, deskew, background flattening, page segmentation mode."""

    name: str
    colour: bool = False  # RGB to Tesseract (else Pillow's greyscale, ITU-R 601-2 luma)
    threshold: int = 0  # Tesseract thresholding_method: 0 Otsu (global), 1 Leptonica adaptive Otsu, 2 Sauvola
    told: bool = False  # SetSourceResolution(ocr.estimated_dpi) (else Tesseract guesses)
    upscale: bool = False  # 2× (Lanczos) when the long side is under 1600 px
    deskew: bool = False  # projection-profile deskew before Tesseract, when the angle is ≥ 1° (``deskew``)
    flatten: bool = False  # divide by the estimated background (``flatten`` below): fills and shade → white
    psm: int = 3  # 3 AUTO, 6 SINGLE_BLOCK, 11 SPARSE_TEXT


VARIANTS = (
    Variant("greyscale, Otsu, PSM 3 (before)"),
    Variant("colour, Otsu, PSM 3", colour=True),
    Variant("colour, Otsu, PSM 6", colour=True, psm=6),
    Variant("colour, Otsu, PSM 11", colour=True, psm=11),
    Variant("greyscale, Otsu, 2× upscale", upscale=True),
    Variant("greyscale, adaptive Otsu", threshold=1),
    Variant("greyscale, Sauvola", threshold=2),
    Variant("colour, Sauvola", colour=True, threshold=2),
    Variant("greyscale, Sauvola, dpi told", threshold=2, told=True),
    Variant("colour, Sauvola, dpi told", colour=True, threshold=2, told=True),
    Variant("greyscale, Sauvola, dpi told, PSM 6", threshold=2, told=True, psm=6),
    Variant("greyscale, Sauvola, dpi told, 2× upscale", threshold=2, told=True, upscale=True),
    Variant("greyscale, Sauvola, dpi told, deskew ≥ 1°", threshold=2, told=True, deskew=True),
    Variant("greyscale, Sauvola, dpi told, flattened background", threshold=2, told=True, flatten=True),
    Variant("adopted: ocr.prepare + ocr.recognize"),
)


class Engines:
    """One loaded tesserocr engine per (languages, psm)."""

    def __init__(self) -> None:
        self._apis: dict[tuple[str, int], Any] = {}

    def get(self, languages: str, psm: int) -> Any:
        import tesserocr

        if (languages, psm) not in self._apis:
            self._apis[(languages, psm)] = tesserocr.PyTessBaseAPI(path=TESSDATA, lang=languages,
                                                                   psm=psm)
        return self._apis[(languages, psm)]


def _run(engines: Engines, variant: Variant, image: Image.Image, languages: str) -> str:
    """The text of ``image`` under ``variant``: paragraphs (Tesseract's reading order) one per line."""
    if variant.name.startswith("adopted"):
        limits = DEFAULT_LIMITS if languages == DEFAULT_LIMITS.ocr_languages else _limits(languages)
        return "\n".join(ocr.recognize(ocr.prepare(image), limits).paragraphs)
    page = image.convert("RGB" if variant.colour else "L")
    if variant.flatten:
        page = flatten(page)
    if variant.deskew:
        page = deskew(page)
    factor = 2 if variant.upscale and max(page.size) < 1600 else 1
    if factor > 1:
        page = page.resize((page.width * factor, page.height * factor), Image.Resampling.LANCZOS)
    api = engines.get(languages, variant.psm)
    api.SetVariable("thresholding_method", str(variant.threshold))
    api.SetImage(page)
    if variant.told:
        api.SetSourceResolution(ocr.estimated_dpi(*image.size) * factor)
    api.Recognize()
    import tesserocr

    text = "\n".join(ocr._paragraphs(api.GetIterator(), tesserocr.RIL.PARA))
    api.Clear()
    return text


def flatten(image: Image.Image) -> Image.Image:
    """Greyscale ``image`` divided by its background: the brightest channel (coloured fills turn light,
    black type stays dark), over a max filter of ≈28 px (the paper or the cell fill around the type)."""
    import numpy as np
    from PIL import ImageChops, ImageFilter

    r, g, b = image.convert("RGB").split()
    value = ImageChops.lighter(ImageChops.lighter(r, g), b)
    small = value.resize((max(1, value.width // 4), max(1, value.height // 4)), Image.Resampling.BOX)
    background = small.filter(ImageFilter.MaxFilter(7)).filter(ImageFilter.BoxBlur(3)).resize(value.size)
    ratio = np.asarray(value, dtype=np.float32) / np.maximum(np.asarray(background, dtype=np.float32), 1)
    return Image.fromarray(np.clip(ratio * 255, 0, 255).astype(np.uint8))


def deskew(image: Image.Image, max_degrees: float = 5.0, step: float = 0.25) -> Image.Image:
    """``image`` turned by the angle (within ±``max_degrees``) whose horizontal projection profile of
    dark pixels has the largest variance (text lines level: Postl's method, as in Leptonica's
    ``pixFindSkew``), measured on a copy at most 800 px wide."""
    import numpy as np
    from PIL import Image as PILImage

    grey = image.convert("L")
    scale = min(1.0, 800 / max(grey.width, 1))
    small = grey.resize((max(1, round(grey.width * scale)), max(1, round(grey.height * scale))))
    dark = PILImage.fromarray(((np.asarray(small) < 128) * 255).astype(np.uint8))
    best, best_score = 0.0, -1.0
    for k in range(round(-max_degrees / step), round(max_degrees / step) + 1):
        angle = k * step
        profile = np.asarray(dark.rotate(angle, resample=PILImage.Resampling.NEAREST)).sum(axis=1, dtype=np.float64)
        score = float(np.var(profile))
        if score > best_score:
            best, best_score = angle, score
    if abs(best) < 1.0:  # Tesseract levels small skews itself; resampling costs more than it gains
        return image
    fill = (255, 255, 255) if image.mode == "RGB" else 255
    return image.rotate(best, resample=PILImage.Resampling.BICUBIC, fillcolor=fill)


def _limits(languages: str) -> Any:
    from dataclasses import replace

    return replace(DEFAULT_LIMITS, ocr_languages=languages)


Page = tuple[Image.Image, str, str]  # (image, expected text, language for the CER)


def _pages(smoke: bool) -> dict[str, list[Page]]:
    seeds = range(1 if smoke else 2)
    table_truth = ocrgen.table_truth()
    return {
        "scanned table (200 dpi, colour cells)": [
            (ocrgen.degrade_colour(ocrgen.table_page(200), s), "Weekly service report\n" + table_truth, "eng")
            for s in seeds],
        "photo (~100 dpi)": [
            (ocrgen.photo_page(100, s), ocrgen.TEXTS["eng"][0] + "\n" + table_truth, "eng") for s in seeds],
        "text scan (200 dpi, eng)": [
            (ocrgen.degrade(ocrgen.language_page("eng", 200), s), "\n".join(ocrgen.TEXTS["eng"]), "eng")
            for s in seeds],
    }


def _score(variant: Variant, pages: list[Page], engines: Engines, tables: bool) -> str:
    _run(engines, variant, pages[0][0], DEFAULT_LIMITS.ocr_languages)  # warm the engine
    started = time.perf_counter()
    texts = [_run(engines, variant, image, DEFAULT_LIMITS.ocr_languages) for image, _, _ in pages]
    rate = len(pages) / (time.perf_counter() - started)
    error = sum(ocrgen.cer(truth, text, lang) for (_, truth, lang), text in zip(pages, texts, strict=True)) / len(pages)
    if not tables:
        return f"{error:.3f} | | | {rate:.2f}"
    found = sum(sum(1 for m in MARKERS if m in text) for text in texts) / len(texts)
    in_order = sum(ocrgen.rows_in_order(ocrgen.TABLE, text) for text in texts) / len(texts)
    return f"{error:.3f} | {found:.0f}/{len(MARKERS)} | {in_order:.0f}/{len(ocrgen.TABLE)} | {rate:.2f}"


def _variants(smoke: bool) -> list[str]:
    engines = Engines()
    lines = ["| page | variant | CER | markers | rows in order | pages/s |", "|---|---|---:|---:|---:|---:|"]
    for kind, pages in _pages(smoke).items():
        for variant in VARIANTS[:: 4 if smoke else 1]:
            lines.append(f"| {kind} | {variant.name} | {_score(variant, pages, engines, 'text' not in kind)} |")
    return lines


LANG_PAGES = ("eng", "chi_sim", "kor", "jpn")


def _languages(smoke: bool) -> list[str]:
    """CER and pages/s per page language: the languages before, the default set read once, the default
    set with the re-read by script (``ocr.script_language``, adopted), and OSD script detection."""
    every = "eng+deu+chi_sim+kor+jpn"
    pages = {lang: [ocrgen.degrade(ocrgen.language_page(lang, 200), s) for s in range(1 if smoke else 3)]
             for lang in LANG_PAGES}
    engines = Engines()
    once = Variant("once", threshold=2, told=True)
    adopted = Variant("adopted")
    osd = _osd_engine()
    runs: dict[str, Callable[[Image.Image], str]] = {
        "eng+deu+chi_sim (before), adopted path": lambda im: _run(engines, adopted, im, "eng+deu+chi_sim"),
        f"{every}, one pass": lambda im: _run(engines, once, im, every),
        f"{every}, re-read in the page's script alone (adopted)": lambda im: _run(engines, adopted, im, every),
        "OSD script detection per page, then eng+deu or the script's language":
            lambda im: _run(engines, adopted, im, _osd_languages(osd, im)),
    }
    lines = ["| OCR_LANGUAGES | " + " | ".join(f"{lang} page: CER, pages/s" for lang in LANG_PAGES) + " |",
             "|---|" + "---|" * len(LANG_PAGES)]
    for label, run in runs.items():
        lines.append(f"| {label} | " + " | ".join(_lang_cell(run, pages[lang], lang) for lang in LANG_PAGES) + " |")
    return lines


def _lang_cell(run: Callable[[Image.Image], str], pages: list[Image.Image], lang: str) -> str:
    run(pages[0])
    started = time.perf_counter()
    texts = [run(page) for page in pages]
    rate = len(pages) / (time.perf_counter() - started)
    truth = "\n".join(ocrgen.TEXTS[lang])
    return f"{sum(ocrgen.cer(truth, t, lang) for t in texts) / len(texts):.3f}, {rate:.2f}"


_SCRIPT_LANGS = {"Han": "chi_sim", "Hangul": "kor", "Japanese": "jpn", "Katakana": "jpn", "Hiragana": "jpn"}


def _osd_engine() -> Any:
    import tesserocr

    return tesserocr.PyTessBaseAPI(path=TESSDATA, lang="osd", psm=tesserocr.PSM.OSD_ONLY)


def _osd_languages(api: Any, image: Image.Image) -> str:
    api.SetImage(image.convert("L"))
    detected = api.DetectOrientationScript() or {}
    api.Clear()
    return _SCRIPT_LANGS.get(str(detected.get("script_name", "")), "eng+deu")


def main(argv: list[str]) -> None:
    smoke = "--smoke" in argv
    parts = [
        "## OCR preprocessing and page segmentation (issue 29, `python -m bench.ocr_pages`)",
        "", "Tesseract 5 (tesserocr), OCR_LANGUAGES=" + DEFAULT_LIMITS.ocr_languages + "; pages from "
        "`tests/support/ocrgen.py` (see the module docstring); markers = the 20 cell words; rows in order = "
        "rows whose cells come out left to right with no other row's cell between; 2 pages per kind; "
        "\"dpi told\" = `SetSourceResolution(ocr.estimated_dpi)`.",
        "", *_variants(smoke),
        "", "Cost of languages (200 dpi greyscale scans, 3 pages per language):", "", *_languages(smoke),
    ]
    print("\n".join(parts))
    if not smoke:
        write_section("ocr_pages", "\n".join(parts))


if __name__ == "__main__":
    main(sys.argv[1:])
