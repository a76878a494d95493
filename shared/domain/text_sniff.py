"""Text or binary, and which Unicode encoding form, from raw bytes (pure; stdlib only, no I/O).

Shared by the upload check (``knowledge_service.upload.sniff``: 415 or not, on the first 8 KiB) and the
worker's decoder (``task_service.pipeline.decode``) so both call the same bytes text.

**UTF-16/32 without a byte-order mark.** Text in UTF-16 has a NUL byte in every code unit below
U+0100 (ASCII letters, digits, spaces, line breaks): at odd offsets in little-endian, at even
offsets in big-endian; UTF-32 has NUL bytes in every unit's top byte. A candidate encoding is
kept when its NUL pattern dominates (more NULs where that form puts them than elsewhere), the
sample decodes *strictly* (no lone surrogates, no code point above U+10FFFF), and the decoded
characters are plausible text (:func:`implausible_share`: controls, unassigned code points,
private-use characters and surrogates make up at most :data:`MAX_IMPLAUSIBLE_SHARE`). Text with
little ASCII (Chinese, Cyrillic) has a weak NUL pattern (only its spaces and line breaks); the
strict decode and the plausibility check carry the decision there. Binary data with NUL bytes
fails them: its 16-bit units land on controls, unassigned and private-use code points.

**Stray NULs.** A text file with NUL bytes (a corrupted editor save, a truncated log padded with
zeros, an export with a NUL per line) is still text when the rest is text (:func:`looks_like_text`)
and the NULs are few (:func:`stray_nul_limit`), or, more, when they do not fall where UTF-16/32 puts
them (:func:`wide_pattern`: runs of NULs and scattered ones land on every offset alike) and are at
most :data:`MAX_STRAY_NUL_SHARE` of the bytes (:func:`stray_nuls_allowed`). Binary data stays binary:
its other bytes are control codes and invalid UTF-8, which :func:`looks_like_text` refuses.
"""

from __future__ import annotations

import codecs
import unicodedata

#: How much of a document the wide-encoding check decodes (bytes).
WIDE_SAMPLE_BYTES = 65536
#: Share of implausible characters (see :func:`implausible_share`) above which decoded bytes are
#: not text. Real text in any script has almost none (0 in every text file of the shared corpus);
#: bytes read as UTF-16 that are not: random 15 %, /bin/ls 14-25 %, a PNG 15 %, a little-endian
#: 16-bit integer ramp 6 % (measured, ``surrogatepass`` reading of the first 64 KiB).
MAX_IMPLAUSIBLE_SHARE = 0.02
#: Stray NUL allowance: this many, plus one per :data:`STRAY_NUL_BYTES_PER_NUL` bytes.
STRAY_NUL_BASE = 16
STRAY_NUL_BYTES_PER_NUL = 1000

# Code units: where the NULs of ASCII-range characters sit, per encoding form (offset modulo the
# unit size).
_WIDE_FORMS: tuple[tuple[str, int, tuple[int, ...]], ...] = (
    ("utf-32-le", 4, (1, 2, 3)),
    ("utf-32-be", 4, (0, 1, 2)),
    ("utf-16-le", 2, (1,)),
    ("utf-16-be", 2, (0,)),
)
# UTF-32: offset of the plane byte, zero for characters of the Basic Multilingual Plane. Text is
# almost all BMP; 32-bit integers that happen to be valid code points mostly are not.
_UTF32_PLANE_BYTE = {"utf-32-le": 2, "utf-32-be": 1}
_MIN_BMP_SHARE = 0.9
# Controls that text holds anywhere: TAB, LF, CR. Others (FF page breaks, ESC colour codes) are
# fine in small numbers, within MAX_IMPLAUSIBLE_SHARE.
_TEXT_CONTROLS = frozenset("\t\n\r")
_BAD_CATEGORIES = frozenset(("Cc", "Cn", "Co", "Cs"))
# Bytes that are control characters in every ASCII-compatible legacy encoding (C0 except the
# text controls above, and DEL). ``bytes.translate(None, _NOT_CONTROL)`` keeps only those.
_CONTROL_BYTES = frozenset(range(0x20)) - {0x09, 0x0A, 0x0D} | {0x7F}
_NOT_CONTROL = bytes(b for b in range(256) if b not in _CONTROL_BYTES)


#: More NULs than :func:`stray_nul_limit` are still stray up to this share of the bytes, when they do
#: not form a UTF-16/32 pattern (a log whose last 4 KiB are zeros after 3 KiB of text: 57 %).
MAX_STRAY_NUL_SHARE = 0.9
#: A UTF-16/32 NUL pattern: at every offset where the form puts NULs, this many times as many NULs
#: as at any other offset (UTF-16 LE English: every odd byte NUL, no even one; a run of NUL padding
#: or one NUL per line: about as many at each offset).
WIDE_PATTERN_RATIO = 4


def stray_nul_limit(size: int) -> int:
    """How many NUL bytes a ``size``-byte text file (not UTF-16/32) may hold whatever their pattern."""
    return STRAY_NUL_BASE + size // STRAY_NUL_BYTES_PER_NUL


def nuls_by_offset(data: bytes, start: int = 0) -> list[int]:
    """NUL bytes of ``data`` by (``start`` + offset) modulo 4: ``[n0, n1, n2, n3]``."""
    return [data[(k - start) % 4::4].count(0) for k in range(4)]


def wide_pattern(by_offset: list[int]) -> bool:
    """Whether NUL counts by offset modulo 4 (:func:`nuls_by_offset`) follow UTF-16 or UTF-32: NULs at
    the form's offsets, each :data:`WIDE_PATTERN_RATIO` times as many as at any other."""
    halves = [by_offset[0] + by_offset[2], by_offset[1] + by_offset[3]]
    for counts, zero_offsets in ((halves, (0,)), (halves, (1,)), (by_offset, (1, 2, 3)), (by_offset, (0, 1, 2))):
        inside = min(counts[i] for i in zero_offsets)
        outside = max((counts[i] for i in range(len(counts)) if i not in zero_offsets), default=0)
        if inside > 0 and inside >= WIDE_PATTERN_RATIO * outside:
            return True
    return False


def control_bytes(data: bytes) -> int:
    """Bytes of ``data`` that are control codes in every ASCII-compatible encoding, NUL excluded (C0
    but TAB/LF/CR, and DEL): text holds at most :data:`MAX_IMPLAUSIBLE_SHARE` of them, binary data
    ~10 % and more."""
    return len(data.translate(None, _NOT_CONTROL)) - data.count(0)


def stray_nuls_allowed(size: int, by_offset: list[int]) -> bool:
    """Whether the NULs of ``size`` bytes (counted by :func:`nuls_by_offset`) may be stray ones in text:
    few (:func:`stray_nul_limit`), or at most :data:`MAX_STRAY_NUL_SHARE` of the bytes and not in a
    UTF-16/32 pattern (:func:`wide_pattern`). Whether the rest is text is the caller's check."""
    nuls = sum(by_offset)
    if nuls <= stray_nul_limit(size):
        return True
    return nuls <= MAX_STRAY_NUL_SHARE * size and not wide_pattern(by_offset)


def implausible_share(text: str, *, nul_is_bad: bool = False) -> float:
    """Share (0..1) of ``text``'s characters that text does not hold: control characters other
    than TAB/LF/CR, unassigned code points, private-use characters, lone surrogates.

    NUL characters are not counted either way (they are stripped and reported separately)
    unless ``nul_is_bad``. Text made only of NULs, or empty, gives 1.0.
    """
    counted = bad = 0
    for ch in text:
        if ch == "\x00" and not nul_is_bad:
            continue
        counted += 1
        if ch not in _TEXT_CONTROLS and unicodedata.category(ch) in _BAD_CATEGORIES:
            bad += 1
    return bad / counted if counted else 1.0


def _strict_prefix(data: bytes, encoding: str) -> str | None:
    """Strictly decode ``data`` as a prefix (a character cut at the end is ignored); None if invalid."""
    try:
        return codecs.getincrementaldecoder(encoding)("strict").decode(data, final=False)
    except UnicodeDecodeError:
        return None


def _nul_counts(data: bytes, unit: int) -> list[int]:
    return [data[offset::unit].count(0) for offset in range(unit)]


def _pattern_dominates(counts: list[int], zero_offsets: tuple[int, ...]) -> bool:
    inside = sum(counts[i] for i in zero_offsets) / len(zero_offsets)
    others = [counts[i] for i in range(len(counts)) if i not in zero_offsets]
    return inside > 0 and all(inside > other for other in others)


def wide_encoding(data: bytes, *, lenient: bool = False) -> str | None:
    """The Unicode encoding form of BOM-less ``data`` if it is UTF-32/UTF-16 text, else None.

    ``data`` may be a prefix of the document (a character cut at its end is ignored). Returns
    ``"utf-32-le"``, ``"utf-32-be"``, ``"utf-16-le"`` or ``"utf-16-be"``. Needs at least one NUL
    byte: text without any (no ASCII character at all) is left to legacy detection. The NUL
    pattern is counted over all of ``data`` (UTF-32 also needs 90 % of its characters in the
    Basic Multilingual Plane); the strict decode and the plausibility check run on the first
    :data:`WIDE_SAMPLE_BYTES`. ``lenient``: UTF-16 is also tried when its NUL pattern
    does not dominate (Chinese whose only NUL comes from U+4E00 "一"); both byte orders, the
    better-supported first. A lenient answer is weak evidence: UTF-8 or legacy text with a stray
    NUL may decode as plausible CJK, GBK as plausible Hangul (callers use it only when the bytes
    without their NULs are not text); U+0000 characters count as implausible there (ASCII text
    padded with runs of NULs is not UTF-16).
    """
    if len(data) < 2 or b"\x00" not in data:
        return None
    counts = {2: _nul_counts(data, 2), 4: _nul_counts(data, 4)}
    sample = data[:WIDE_SAMPLE_BYTES]
    for encoding, unit, zero_offsets in _candidates(counts, lenient):
        weak_utf16 = lenient and unit == 2
        if len(data) < unit or not (weak_utf16 or _pattern_dominates(counts[unit], zero_offsets)):
            continue
        if unit == 4 and counts[4][_UTF32_PLANE_BYTE[encoding]] < _MIN_BMP_SHARE * (len(data) // 4):
            continue
        text = _strict_prefix(sample, encoding)
        if text is not None and implausible_share(text, nul_is_bad=lenient) <= MAX_IMPLAUSIBLE_SHARE:
            return encoding
    return None


def _candidates(counts: dict[int, list[int]], lenient: bool) -> tuple[tuple[str, int, tuple[int, ...]], ...]:
    if not lenient or counts[2][1] >= counts[2][0]:
        return _WIDE_FORMS
    return (*_WIDE_FORMS[:2], _WIDE_FORMS[3], _WIDE_FORMS[2])  # big-endian first


def looks_like_text(data: bytes, *, complete: bool = True) -> bool:
    """Whether NUL-free ``data`` reads as text: valid UTF-8 with plausible characters, or (legacy
    single/multi-byte encodings) control bytes at most :data:`MAX_IMPLAUSIBLE_SHARE` of it.

    ``complete=False``: ``data`` is a prefix, a UTF-8 character cut at its end is ignored.
    Empty data is text.
    """
    if not data:
        return True
    text = _strict_prefix(data, "utf-8") if not complete else _strict_utf8(data)
    if text is not None:
        return not text or implausible_share(text[:WIDE_SAMPLE_BYTES]) <= MAX_IMPLAUSIBLE_SHARE
    controls = len(data.translate(None, _NOT_CONTROL))
    return controls <= MAX_IMPLAUSIBLE_SHARE * len(data)


def _strict_utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def strip_stray_nuls(data: bytes, *, complete: bool = True) -> tuple[bytes, int] | None:
    """``(data without NUL bytes, how many were removed)`` when ``data`` is text with stray NULs
    (or none); None when the NULs cannot be stray (:func:`stray_nuls_allowed`) or the rest is not
    text (:func:`looks_like_text`). ``complete=False``: ``data`` is a prefix of the document."""
    nuls = data.count(0)
    if nuls and not stray_nuls_allowed(len(data), nuls_by_offset(data)):
        return None
    stripped = data.replace(b"\x00", b"") if nuls else data
    return (stripped, nuls) if looks_like_text(stripped, complete=complete) else None
