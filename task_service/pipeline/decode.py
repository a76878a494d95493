"""Bytes → str for text-like documents (txt, html, md) without mojibake.

Order: byte-order mark (UTF-8/16/32) → strict UTF-8 → the charset an HTML document declares →
"mostly UTF-8" (a few stray bytes in otherwise UTF-8 text become U+FFFD instead of failing the
whole document) → ``charset-normalizer`` detection, with a preference for windows-1252 among
Latin code pages.

Why the preference: measured with charset-normalizer 3.5.3, the corpus file
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

import charset_normalizer

from shared.errors import UndecodableTextError

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
# single-byte text almost never forms valid multi-byte UTF-8 sequences, so it does not qualify.
_UTF8_VALID_PER_INVALID = 10
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


def decode_text(data: bytes, *, declared: str | None = None) -> str:
    """Decode document bytes to ``str``.

    ``declared`` is a codec name the container declared (e.g. from ``sniff_html_charset``); it
    is used only when the bytes are not UTF-8 and have no BOM, and only if it decodes them
    strictly. Lone surrogates in UTF-8/16/32 input are let through (``surrogatepass``) for the
    normalizer to remove. Raises ``UndecodableTextError`` when no encoding fits (binary data).
    """
    if not data:
        return ""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _decode_utf(data[len(bom) :], encoding)
    try:
        return data.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        pass
    if declared is not None and not declared.startswith("utf"):
        try:
            return data.decode(declared)
        except (UnicodeDecodeError, LookupError):
            pass
    mostly = _mostly_utf8(data)
    return mostly if mostly is not None else _detect(data)


def _decode_utf(payload: bytes, encoding: str) -> str:
    unit = 4 if encoding.startswith("utf-32") else 2 if encoding.startswith("utf-16") else 1
    payload = payload[: len(payload) - len(payload) % unit]  # drop a truncated last code unit
    try:
        return payload.decode(encoding, errors="surrogatepass")
    except UnicodeDecodeError as exc:
        raise UndecodableTextError(
            f"text starts with a {encoding} byte-order mark but is not valid {encoding}: {exc}"
        ) from exc


def _mostly_utf8(data: bytes) -> str | None:
    escaped = data.decode("utf-8", errors="surrogateescape")
    invalid = len(_ESCAPED_BYTE.findall(escaped))
    valid_non_ascii = sum(1 for ch in escaped if ch > "\x7f") - invalid
    if valid_non_ascii < _UTF8_VALID_PER_INVALID * invalid:
        return None
    return _ESCAPED_BYTE.sub("\ufffd", escaped)


def _detect(data: bytes) -> str:
    best = charset_normalizer.from_bytes(data).best()
    if best is None:
        raise UndecodableTextError(
            "text is neither UTF-8 nor any encoding charset-normalizer recognizes (binary data?)"
        )
    if best.encoding != "cp1252":
        western = charset_normalizer.from_bytes(data, cp_isolation=["cp1252"]).best()
        if western is not None and western.chaos <= best.chaos + _CP1252_CHAOS_TOLERANCE:
            return str(western)
    return str(best)
