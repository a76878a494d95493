"""Bytes → str for text-like documents (txt, html, md) without mojibake, with what was guessed.

Order: byte-order mark (UTF-8/16/32) → UTF-16/32 without a BOM, recognised by its NUL pattern
(``shared.domain.text_sniff.wide_encoding``) → NUL bytes that are not UTF-16/32 are stray: removed and
reported → strict UTF-8 → the charset an HTML document declares → "mostly UTF-8" (a few stray
bytes in otherwise UTF-8 text are read one by one as windows-1252, the usual source of such a
byte: a "é" typed or pasted in a legacy editor, U+FFFD for the five bytes windows-1252 leaves
undefined; the whole document is not re-read in a legacy code page for them) →
``charset-normalizer`` detection, with a preference for windows-1252 among Latin code pages.
:func:`decode` returns the text, the codec and warnings for the document API ("3 NUL bytes
removed", "decoded as windows-1252 (detected)"); :func:`decode_text` only the text.

UTF-16 vs text with stray NULs: ASCII text in UTF-16 is also valid UTF-8 (NUL is a valid UTF-8
byte), UTF-8 text with one NUL at an odd offset shows a "UTF-16 LE" NUL pattern whose decode is
CJK-looking but plausible, and GBK text with one NUL reads as plausible UTF-16 Hangul. So when
the NULs are few (``stray_nul_limit``) and the bytes without them are text (plausible UTF-8, or
legacy bytes without control codes: ``strip_stray_nuls``), they are stripped; otherwise the
UTF-16/32 reading wins (UTF-16 CJK or Cyrillic bytes hold control codes: U+4E0C is 0C 4E). When
the stripped bytes decode in no encoding, a weak UTF-16 reading is the last resort (Chinese
UTF-16 whose only NUL is the low byte of U+4E00 "一").

Why the windows-1252 preference: measured with charset-normalizer 3.5.3, the corpus file
``fake-html-cp1252.html`` (German/French/Spanish/Swedish in cp1252) is detected as cp1250,
which turns "niño" into "nińo", and a French cp1252 sentence is detected as mac_latin2
("été" → "ťtť"). The detector ranks near-equal Latin code pages arbitrarily, so when cp1252
decodes the bytes with a chaos score no worse than the best guess + 0.05 we take cp1252, the
most common legacy Western encoding and the one WHATWG's Encoding Standard substitutes for
ISO-8859-1/ASCII labels. Non-Latin detections (GB18030, Big5, Shift_JIS, cp1251, ...) are kept
because cp1252 fails on those bytes or scores far worse.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

import charset_normalizer

from shared.domain.errors import UndecodableTextError
from shared.domain.text_sniff import (
    MAX_IMPLAUSIBLE_SHARE,
    WIDE_SAMPLE_BYTES,
    implausible_share,
    strip_stray_nuls,
    wide_encoding,
)

# UTF-32 LE (FF FE 00 00) must be tested before UTF-16 LE (FF FE).
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_CP1252_CHAOS_TOLERANCE = 0.05
# "Mostly UTF-8": at least this many valid non-ASCII UTF-8 characters per invalid byte. Legacy
# single-byte text almost never forms valid multi-byte UTF-8 sequences, so it does not qualify;
# legacy multi-byte text does by chance, measured on UDHR sentences (valid per invalid byte):
# cp1251/koi8-r/iso-8859-5/cp1253/cp1252 0, Thai cp874 0.13, EUC-KR 0.15, GBK 0.27,
# Shift_JIS 0.39, EUC-JP 0.58. 3 keeps a 5x margin above the highest and lets a short UTF-8 text
# with two stray cp1252 bytes stay UTF-8 (with 10 it went to detection, which found nothing).
_UTF8_VALID_PER_INVALID = 3
_FALLBACK_CODEC = "cp1252"
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
# WHATWG HTML "prescan a byte stream": the declaration must be in the first 1024 bytes.
_HTML_PRESCAN_BYTES = 1024
_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.I)
# WHATWG Encoding Standard label aliases that differ from Python's codec names.
_WHATWG_ALIASES = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "l1": "cp1252",
    "ascii": "cp1252",
    "us-ascii": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "shift_jis": "cp932",
    "shift-jis": "cp932",
    "sjis": "cp932",
}


def sniff_html_charset(data: bytes) -> str | None:
    """Return the Python codec name an HTML document declares in a ``<meta>`` tag, if any.

    Looks at the first 1024 bytes only (WHATWG prescan limit). UTF-16/32 declarations are
    ignored, as in WHATWG (bytes that could be scanned as ASCII are not UTF-16). Unknown
    labels give ``None``.
    """
    match = _META_CHARSET.search(data[:_HTML_PRESCAN_BYTES])
    if match is None:
        return None
    label = match.group(1).decode("ascii", "ignore").strip().lower()
    label = _WHATWG_ALIASES.get(label, label)
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    return None if name.startswith(("utf-16", "utf-32")) else name


@dataclass(frozen=True)
class Decoded:
    """Decoded document text; ``encoding`` is the Python codec name used (``"utf-8"``,
    ``"utf-16-le"``, ``"cp1252"``...); ``warnings`` are sentences for the document API."""

    text: str
    encoding: str
    warnings: tuple[str, ...] = ()


def decode_text(data: bytes, *, declared: str | None = None) -> str:
    """``decode(data, declared=declared).text``."""
    return decode(data, declared=declared).text


def decode(data: bytes, *, declared: str | None = None) -> Decoded:
    """Decode document bytes to ``str`` and say what was guessed or altered.

    ``declared`` is a codec name the container declared (e.g. from ``sniff_html_charset``); it
    is used only when the bytes are not UTF-8/16/32 and have no BOM, and only if it decodes them
    strictly. NUL bytes/characters are removed and counted in a warning. Lone surrogates in
    UTF-8/16/32 input are let through (``surrogatepass``) for the normalizer to remove. Raises
    ``UndecodableTextError`` when no encoding fits (binary data).
    """
    if not data:
        return Decoded("", "utf-8")
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _without_nul_chars(_decode_utf(data[len(bom) :], encoding), encoding, ())
    nuls = data.count(0)
    if not nuls:
        return _decode_narrow(data, declared)
    wide = wide_encoding(data)
    if wide is not None and strip_stray_nuls(data) is None:
        return _decode_wide(data, wide)
    return _decode_with_stray_nuls(data, nuls, declared)


def _decode_with_stray_nuls(data: bytes, nuls: int, declared: str | None) -> Decoded:
    """NULs without a clear UTF-16/32 pattern: the bytes without them; if those are not text
    (undecodable, or more than ``MAX_IMPLAUSIBLE_SHARE`` control characters: 16-bit integers), a
    weak UTF-16 reading of the whole (CJK text whose only NULs come from U+xx00 characters).

    The UTF-16 reading is only the fallback: GBK or Big5 bytes read as UTF-16 are plausible
    Hangul and Yi syllables, so a legacy reading that works wins.
    """
    try:
        narrow: Decoded | None = _decode_narrow(data.replace(b"\x00", b""), declared)
    except UndecodableTextError:
        narrow = None
    if narrow is None or (narrow.text and implausible_share(narrow.text[:WIDE_SAMPLE_BYTES]) > MAX_IMPLAUSIBLE_SHARE):
        weak = wide_encoding(data, lenient=True)
        if weak is None:
            raise UndecodableTextError(
                "text is neither UTF-8/16/32 nor a recognized encoding once NUL bytes are removed (binary data?)"
            )
        return _decode_wide(data, weak)
    return Decoded(narrow.text, narrow.encoding, (_nul_warning(nuls, "byte"), *narrow.warnings))


def _nul_warning(count: int, unit: str) -> str:
    return f"{count} NUL {unit}{'s' if count != 1 else ''} removed"


def _without_nul_chars(text: str, encoding: str, warnings: tuple[str, ...]) -> Decoded:
    nuls = text.count("\x00")
    if nuls:
        text = text.replace("\x00", "")
        warnings = (*warnings, _nul_warning(nuls, "character"))
    return Decoded(text, encoding, warnings)


def _decode_narrow(data: bytes, declared: str | None) -> Decoded:
    """Bytes without NULs or a BOM: UTF-8, declared charset, mostly UTF-8, detection."""
    try:
        return Decoded(data.decode("utf-8", errors="surrogatepass"), "utf-8")
    except UnicodeDecodeError:
        pass
    if declared is not None and not declared.startswith("utf"):
        try:
            return Decoded(data.decode(declared), declared)
        except (UnicodeDecodeError, LookupError):
            pass
    mostly = _mostly_utf8(data)
    return mostly if mostly is not None else _detect(data)


def _label(encoding: str) -> str:
    """Python codec name → the name people know: ``cp1252`` → ``windows-1252``, ``utf-16-le`` →
    ``UTF-16 LE``."""
    name = codecs.lookup(encoding).name
    if name.startswith("utf-"):
        return name.upper().replace("-LE", " LE").replace("-BE", " BE")
    if re.fullmatch(r"cp125\d", name):
        return "windows-" + name[2:]
    return name.replace("_", "-")
def _decode_utf(payload: bytes, encoding: str) -> str:
    unit = 4 if encoding.startswith("utf-32") else 2 if encoding.startswith("utf-16") else 1
    payload = payload[: len(payload) - len(payload) % unit]  # drop a truncated last code unit
    try:
        return payload.decode(encoding, errors="surrogatepass")
    except UnicodeDecodeError as exc:
        raise UndecodableTextError(
            f"text starts with a {encoding} byte-order mark but is not valid {encoding}: {exc}"
        ) from exc


def _decode_wide(data: bytes, encoding: str) -> Decoded:
    """BOM-less UTF-16/32 chosen on a sample: bytes later in the file that do not decode become
    U+FFFD (reported) instead of failing the document."""
    note = f"decoded as {_label(encoding)} without a byte-order mark (detected)"
    try:
        return _without_nul_chars(_decode_utf(data, encoding), encoding, (note,))
    except UndecodableTextError:
        unit = 4 if encoding.startswith("utf-32") else 2
        text = data[: len(data) - len(data) % unit].decode(encoding, errors="replace")
        bad = f"{text.count(chr(0xFFFD))} invalid {_label(encoding)} code units replaced with U+FFFD"
        return _without_nul_chars(text, encoding, (note, bad))


def _mostly_utf8(data: bytes) -> Decoded | None:
    """UTF-8 with a few invalid bytes (``_UTF8_VALID_PER_INVALID``): each invalid byte is read
    as windows-1252 (U+FFFD where that code page has no character); None if the bytes are not
    mostly UTF-8."""
    escaped = data.decode("utf-8", errors="surrogateescape")
    invalid = len(_ESCAPED_BYTE.findall(escaped))
    valid_non_ascii = sum(1 for ch in escaped if ch > "\x7f") - invalid
    if valid_non_ascii < _UTF8_VALID_PER_INVALID * invalid:
        return None
    text = _ESCAPED_BYTE.sub(_legacy_byte, escaped)
    unmapped = text.count("\ufffd") - escaped.count("\ufffd")
    plural, were = ("s", "were") if invalid != 1 else ("", "was")
    note = f"{invalid} byte{plural} {were} not valid UTF-8 and {were} read as {_label(_FALLBACK_CODEC)}"
    if unmapped:
        note += f" ({unmapped} undefined there replaced with U+FFFD)"
    return Decoded(text, "utf-8", (note,))


def _legacy_byte(match: re.Match[str]) -> str:
    """One surrogate-escaped byte (U+DC80..U+DCFF) read as windows-1252, or U+FFFD."""
    return bytes([ord(match.group()) - 0xDC00]).decode(_FALLBACK_CODEC, errors="replace")


def _detect(data: bytes) -> Decoded:
    """charset-normalizer's guess (windows-1252 preferred among near-equal Latin code pages).

    Raises ``UndecodableTextError`` when it has none, or when the decoded sample is not
    plausible text (more than ``MAX_IMPLAUSIBLE_SHARE`` control/unassigned characters).
    """
    best = charset_normalizer.from_bytes(data).best()
    if best is None:
        raise UndecodableTextError(
            "text is neither UTF-8 nor any encoding charset-normalizer recognizes (binary data?)"
        )
    if best.encoding != "cp1252":
        western = charset_normalizer.from_bytes(data, cp_isolation=["cp1252"]).best()
        if western is not None and western.chaos <= best.chaos + _CP1252_CHAOS_TOLERANCE:
            best = western
    text = str(best)
    if implausible_share(text[:WIDE_SAMPLE_BYTES]) > MAX_IMPLAUSIBLE_SHARE:
        raise UndecodableTextError(
            f"text decoded as {_label(best.encoding)} is mostly control or unassigned characters (binary data?)"
        )
    return Decoded(text, codecs.lookup(best.encoding).name, (f"decoded as {_label(best.encoding)} (detected)",))
