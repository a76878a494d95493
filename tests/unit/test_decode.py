"""Text decoding that never calls text "binary" (issue 8): UTF-16/32 without a BOM, stray NULs,
and the warnings the decoder reports; real binary still raises UndecodableTextError."""

from __future__ import annotations

import codecs
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from shared.domain import text_sniff
from shared.domain.errors import UndecodableTextError
from shared.domain.normalize import normalize_text
from shared.domain.text_sniff import implausible_share, stray_nul_limit, wide_encoding
from task_service.pipeline.decode import Decoded, decode, decode_text
from task_service.pipeline.parse import parse_document, parse_text
from tests.fidelity import Sample, text_corpus

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT.parent / "shared" / "cases" / "extraction"

ASCII = "Quarterly report on indexing throughput."
LATIN = "L'été était très chaud; la señora comió paella con ñoquis. Größe: 15,50 €."
CJK = "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。"
CYRILLIC = "Все люди рождаются свободными и равными в своем достоинстве и правах."
TEXTS = {"ascii": ASCII, "latin": LATIN, "cjk": CJK, "cyrillic": CYRILLIC}
WIDE = ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]


# ---------------------------------------------------------------- UTF-16/32 without a BOM


@pytest.mark.parametrize("codec", WIDE)
@pytest.mark.parametrize("name", sorted(TEXTS))
@pytest.mark.parametrize("lines", [1, 3, 400])
def test_bom_less_wide_text_decodes(codec: str, name: str, lines: int) -> None:
    original = (TEXTS[name] + "\r\n") * lines
    decoded = decode(original.encode(codec))
    assert decoded.text == original
    assert decoded.encoding == codec
    label = codec.upper().replace("-LE", " LE").replace("-BE", " BE")
    assert decoded.warnings == (f"decoded as {label} without a byte-order mark (detected)",)


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_cjk_without_any_ascii_and_a_single_u4e00_nul(codec: str) -> None:
    # 一 (U+4E00) is the only source of a NUL byte, and it sits where ASCII's NULs do not.
    original = "一切人生而自由，在尊严和权利上平等。"
    data = original.encode(codec)
    assert data.count(0) == 1
    assert decode(data).text == original


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_cjk_without_any_nul_is_left_to_detection_and_still_decodes(codec: str) -> None:
    original = "人人生而自由，在尊严和权利上律平等。他们赋有理性和良心。"
    data = original.encode(codec)
    assert 0 not in data
    assert decode(data).text == original


def test_wide_text_keeps_crlf_lines_until_normalization() -> None:
    data = "line one\r\nline two\r\n".encode("utf-16-le")
    assert decode_text(data) == "line one\r\nline two\r\n"
    assert normalize_text(decode_text(data)) == "line one\nline two"


def test_nul_characters_inside_wide_text_are_removed_and_reported() -> None:
    data = ("word " * 50 + "\x00tail").encode("utf-16-le")
    decoded = decode(data)
    assert decoded.text == "word " * 50 + "tail"
    assert decoded.warnings[-1] == "1 NUL character removed"


def test_bom_text_reports_nul_characters_too() -> None:
    decoded = decode(codecs.BOM_UTF16_LE + "a\x00b\x00c".encode("utf-16-le"))
    assert (decoded.text, decoded.encoding, decoded.warnings) == ("abc", "utf-16-le", ("2 NUL characters removed",))


def test_wide_text_invalid_past_the_sample_is_replaced_and_reported() -> None:
    good = ("text " * 20_000).encode("utf-32-le")  # > the 64 KiB sample
    decoded = decode(good + b"\x00\x00\x11\x00" + "end".encode("utf-32-le"))  # U+110000: not Unicode
    assert decoded.text.endswith("text \ufffdend")
    assert decoded.warnings[1] == "1 invalid UTF-32 LE code units replaced with U+FFFD"


needs_cases = pytest.mark.skipif(not CASES.is_dir(), reason=f"cases not found at {CASES}")


@needs_cases
def test_handed_case_utf16le_without_bom() -> None:
    data = (CASES / "utf16le-no-bom.txt").read_bytes()
    assert not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    decoded = decode(data)
    assert decoded.encoding == "utf-16-le"
    assert "Quarterly report on indexing throughput.\r\n" in decoded.text  # CRLF lines
    parsed = parse_document(data, "utf16le-no-bom.txt")
    assert "Quarterly report on indexing throughput" in parsed.text
    assert "\r" not in parsed.text and "\x00" not in parsed.text
    assert parsed.warnings == ("decoded as UTF-16 LE without a byte-order mark (detected)",)


# ---------------------------------------------------------------- stray NULs


def test_stray_nul_in_utf8_is_removed_and_reported() -> None:
    data = "Crème brûlée with one stray\x00 NUL byte.".encode()
    assert decode(data) == Decoded("Crème brûlée with one stray NUL byte.", "utf-8", ("1 NUL byte removed",))


@pytest.mark.parametrize("head", ["Hello world, this is text.", "Hello world, this is a text."])
@pytest.mark.parametrize("tail", [" More of it.", " More of it!!", " 一 and more, 二 and more text " * 30])
def test_stray_nul_in_utf8_at_either_offset_is_not_utf16(head: str, tail: str) -> None:
    # One NUL looks like UTF-16 (LE at an odd offset, BE at an even one), whose reading of ASCII
    # pairs is CJK ("效汬..."): a few NULs in plausible UTF-8 keep the UTF-8 reading.
    data = head.encode() + b"\x00" + tail.encode()
    assert decode(data).text == head + tail


def test_stray_nuls_in_cp1252_text() -> None:
    data = "Größe € café, L'été était très chaud.\x00 Fin du texte.\x00".encode("cp1252")
    decoded = decode(data)
    assert decoded.text == "Größe € café, L'été était très chaud. Fin du texte."
    assert decoded.warnings == ("2 NUL bytes removed", "decoded as windows-1252 (detected)")


def test_stray_nul_in_gbk_text() -> None:
    data = "人人生而自由，在尊严和权利上一律平等。\x00".encode("gbk")
    decoded = decode(data)
    assert decoded.text == "人人生而自由，在尊严和权利上一律平等。"
    assert decoded.warnings[0] == "1 NUL byte removed"


def test_a_run_of_nuls_in_a_utf8_log_is_removed() -> None:
    data = b"2024-01-01 started\n" * 20 + b"\x00" * 4096 + b"2024-01-02 restarted\n"
    decoded = decode(data)
    assert decoded.text == "2024-01-01 started\n" * 20 + "2024-01-02 restarted\n"
    assert decoded.warnings == ("4096 NUL bytes removed",)


def test_a_nul_per_line_is_stray_not_utf16() -> None:
    # 33 NULs past stray_nul_limit, as many at even offsets as at odd: before issue 29 this read as
    # UTF-16 BE mojibake ("剥汥慳攠...")
    data = b"".join(b"Release notes line %03d of the Varnholt build.\x00\n" % i for i in range(120))
    decoded = decode(data)
    assert decoded.text.startswith("Release notes line 000 of the Varnholt build.\n")
    assert decoded.warnings == ("120 NUL bytes removed",)


@pytest.mark.parametrize(("by_offset", "wide"), [
    ([0, 500, 0, 500], True),  # UTF-16 LE English: every odd byte
    ([500, 0, 500, 0], True),  # UTF-16 BE
    ([0, 500, 500, 500], True),  # UTF-32 LE
    ([100, 100, 100, 100], False),  # a run of NUL padding
    ([9, 8, 8, 8], False),  # one NUL per line
])
def test_the_utf16_32_pattern_is_where_nuls_fall(by_offset: list[int], wide: bool) -> None:
    assert text_sniff.wide_pattern(by_offset) is wide


def test_mostly_binary_or_mostly_nuls_is_not_stray() -> None:
    assert text_sniff.strip_stray_nuls(b"header\n" + b"\x00" * 2000) is None  # 99.6 % NULs
    assert text_sniff.strip_stray_nuls(bytes(range(256)) * 4) is None  # control codes: binary
    assert text_sniff.strip_stray_nuls(b"header\n" * 100 + b"\x00" * 400) == (b"header\n" * 100, 400)


def test_parse_reports_nul_warning_on_the_document() -> None:
    parsed = parse_document(b"first paragraph\x00 here\n\nsecond one", "notes.txt")
    assert parsed.text == "first paragraph here\n\nsecond one"
    assert parsed.warnings == ("1 NUL byte removed",)


# ---------------------------------------------------------------- other warnings


def test_mostly_utf8_reads_stray_bytes_as_cp1252_and_reports_them() -> None:
    data = ("Crème brûlée, naïve café — “quoted” " * 5).encode() + b"price 5\x80 and 6\x81 fin."
    decoded = decode(data)
    assert decoded.text.endswith("price 5€ and 6\ufffd fin.")  # 0x81 is undefined in windows-1252
    assert decoded.warnings == (
        "2 bytes were not valid UTF-8 and were read as windows-1252 (1 undefined there replaced with U+FFFD)",
    )


def test_one_stray_cp1252_accent_among_hundreds_of_utf8_accents_stays_utf8() -> None:
    """Issue 17: one "é" saved by a legacy editor in a UTF-8 file made the whole file mojibake."""
    good = ("Crème brûlée, café au lait, pâté, naïve façade. " * 40).encode()
    decoded = decode(good + "Le café était fermé.".encode("cp1252") + good)
    assert decoded.encoding == "utf-8"
    assert "Crème brûlée" in decoded.text and "Le café était fermé." in decoded.text
    assert decoded.warnings == ("3 bytes were not valid UTF-8 and were read as windows-1252",)


def test_a_short_utf8_text_with_two_stray_cp1252_bytes_stays_utf8() -> None:
    decoded = decode(("Crème brûlée. " * 5).encode() + "Un été.".encode("cp1252"))
    assert decoded.text.endswith("Crème brûlée. Un été.")
    assert decoded.warnings == ("2 bytes were not valid UTF-8 and were read as windows-1252",)


_LEGACY = {
    "gbk": "人人生而自由，在尊严和权利上一律平等。",
    "shift_jis": "すべての人間は、生まれながらにして自由である。",
    "euc_jp": "すべての人間は、生まれながらにして自由である。",
    "euc_kr": "모든 인간은 태어날 때부터 자유로우며 동등하다.",
    "cp874": "มนุษย์ทั้งหลายเกิดมามีอิสระและเสมอภาคกัน",
    "cp1251": "Все люди рождаются свободными.",
}


@pytest.mark.parametrize("codec", sorted(_LEGACY))
def test_legacy_multibyte_text_is_not_mostly_utf8(codec: str) -> None:
    text = _LEGACY[codec] * 20
    decoded = decode(text.encode(codec))
    assert decoded.text == text
    assert decoded.encoding != "utf-8"


@pytest.mark.parametrize(
    ("text", "codec", "label"),
    [
        ("L'été était très chaud cette année.", "cp1252", "windows-1252"),
        ("Война и мир — роман Льва Толстого.", "cp1251", "windows-1251"),
        ("人人生而自由，在尊严和权利上一律平等。", "gbk", "gb18030"),
    ],
)
def test_detected_legacy_encoding_is_reported(text: str, codec: str, label: str) -> None:
    decoded = decode(text.encode(codec))
    assert decoded.text == text
    assert decoded.warnings == (f"decoded as {label} (detected)",)


@pytest.mark.parametrize("data", [b"plain ascii", "naïve UTF-8 ✓".encode(), codecs.BOM_UTF8 + b"bom"])
def test_clean_utf8_has_no_warning(data: bytes) -> None:
    assert decode(data).warnings == ()


def test_declared_charset_has_no_warning() -> None:
    decoded = decode("Привет".encode("cp1251"), declared="cp1251")
    assert decoded == Decoded("Привет", "cp1251", ())


def test_empty() -> None:
    assert decode(b"") == Decoded("", "utf-8", ())
    assert decode(b"\x00\x00\x00").text == ""


def test_txt_parse_carries_the_detection_warning() -> None:
    parsed = parse_document("L'été était très chaud cette année.".encode("cp1252"), "fr.txt")
    assert parsed.warnings == ("decoded as windows-1252 (detected)",)


# ---------------------------------------------------------------- binary stays binary


def _elf() -> bytes:
    return b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 8 + bytes(range(256)) * 40


@pytest.mark.parametrize(
    "data",
    [
        random.Random(1).randbytes(3000),
        random.Random(2).randbytes(50_000),
        random.Random(3).randbytes(8000).replace(b"\x00", b"")[:-3] + b"\x00\x00\x00",  # few NULs
        random.Random(4).randbytes(8000).replace(b"\x00", b""),  # none
        _elf(),
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random.Random(5).randbytes(6000),
        b"".join(i.to_bytes(2, "little") for i in range(5000)),  # int16 array: a UTF-16 NUL pattern
        b"".join(i.to_bytes(4, "little") for i in range(3000)),  # int32 array: a UTF-32 NUL pattern
        b"".join((i % 128).to_bytes(2, "big") for i in range(3000)),  # without NULs: valid UTF-8 controls
    ],
    ids=["random-3k", "random-50k", "random-few-nuls", "random-no-nul", "elf", "png", "int16", "int32", "int16-small"],
)
def test_binary_is_undecodable(data: bytes) -> None:
    with pytest.raises(UndecodableTextError):
        decode(data)
    with pytest.raises(UndecodableTextError):
        parse_text(data, "blob.txt")


# ---------------------------------------------------------------- shared sniffing helpers


def test_wide_encoding_needs_a_nul_and_plausible_text() -> None:
    assert wide_encoding(b"") is None and wide_encoding(b"no nul here") is None
    assert wide_encoding("abc".encode("utf-16-le")) == "utf-16-le"
    assert wide_encoding("abc".encode("utf-32-be")) == "utf-32-be"
    assert wide_encoding(b"\x01\x00\x02\x00\x03\x00" * 10) is None  # controls
    # Valid UTF-32 BE, all in plane 1 (Linear B): 32-bit integers, not text.
    assert wide_encoding(b"".join((0x10000 + i).to_bytes(4, "big") for i in range(1, 60))) is None
    assert wide_encoding("abcdef".encode("utf-16-le")[:-1]) == "utf-16-le"  # a prefix cut mid-unit


def test_implausible_share() -> None:
    assert implausible_share("plain text\r\n\tand more") == 0.0
    assert implausible_share("ab\x1b\x0c") == 0.5  # ESC, FF: fine in small numbers only
    assert implausible_share("\x00\x00") == 1.0
    assert implausible_share("ab\x01\ue000") == 0.5  # a control and a private-use character
    assert implausible_share("a\x00") == 0.0
    assert implausible_share("a\x00", nul_is_bad=True) == 0.5


def test_stray_nul_limit() -> None:
    assert stray_nul_limit(0) == 16 and stray_nul_limit(8192) == 24 and stray_nul_limit(10**6) == 1016


# ---------------------------------------------------------------- property


_LETTERS = st.characters(categories=["Lu", "Ll", "Lo", "Lm"])
_WORDS = st.lists(st.text(_LETTERS, min_size=1, max_size=12), min_size=3, max_size=40)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(words=_WORDS, codec=st.sampled_from(["utf-16-le", "utf-16-be"]), crlf=st.booleans())
def test_any_mostly_letter_text_round_trips_through_bom_less_utf16(words: list[str], codec: str, crlf: bool) -> None:
    """Words of letters from anywhere in Unicode, separated by spaces, lines by CRLF or spaces.

    Excluded as not text-like: fewer than 8 distinct letters (hypothesis finds "㔠㔠 㔠㔠...",
    whose UTF-16 bytes ``20 35 20 35 20 00`` are just as much " 5 5" with a stray NUL).
    """
    sep = "\r\n" if crlf else " "
    text = sep.join(" ".join(words[i : i + 5]) for i in range(0, len(words), 5))
    assume(len({ch for ch in text if ch.isalpha()}) >= 8)
    if len(text) < 32:
        text = (text + " ") * (32 // len(text) + 1)
    assert normalize_text(decode_text(text.encode(codec))) == normalize_text(text)


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_form_feeds_are_not_text_enough_to_strip_nuls_for(codec: str) -> None:
    # Found by hypothesis: U+0C20 "ఠ" is 20 0C in UTF-16 LE; stripped of its NULs it read as
    # spaces and form feeds, which passed as text before FF counted as implausible.
    text = " ".join(["ఠ", "ఠ㔠", "ఠ㔠"] * 8)
    assert decode_text(text.encode(codec)) == text


_TEXT = st.text(st.characters(categories=["L", "N", "P", "Zs"]), min_size=1, max_size=300)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, where=st.floats(0, 1))
def test_one_stray_nul_anywhere_in_utf8_text_is_just_removed(text: str, where: float) -> None:
    data = text.encode()
    at = int(where * len(data))  # may split a multi-byte character: then the text is not UTF-8
    data = data[:at] + b"\x00" + data[at:]
    decoded = decode(data)
    assert decoded.text == text
    assert decoded.warnings == ("1 NUL byte removed",)


# ---------------------------------------------------------------- fidelity corpus


@pytest.mark.parametrize("sample", text_corpus.samples(), ids=lambda s: s.name)
def test_fidelity_text_sample(sample: Sample) -> None:
    text = parse_text(sample.data, sample.filename)
    missing = [marker for marker in sample.must if marker not in text]
    assert not missing


def test_fidelity_big_sample_smoke() -> None:
    big = text_corpus.big_sample(smoke=True)
    assert all(marker in parse_text(big.data, big.filename) for marker in big.must)


@settings(max_examples=400, deadline=None)
@given(data=st.one_of(st.binary(max_size=3000), st.binary(max_size=64).map(lambda b: b * 40)))
def test_any_bytes_decode_or_raise_undecodable_only(data: bytes) -> None:
    try:
        decoded = decode(data)
    except UndecodableTextError:
        return
    assert "\x00" not in decoded.text
    assert codecs.lookup(decoded.encoding)
