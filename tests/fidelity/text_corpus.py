"""Plain-text fidelity corpus: the same kind of text in the encodings uploads arrive in.

One sample per encoding case, each with its own ``*MARK`` word plus words whose letters only
come out right when the encoding is (``été``, ``人人生而自由``, ``Толстого``): UTF-16 LE/BE and
UTF-32 LE/BE without a byte-order mark (ASCII, CJK, Cyrillic; CRLF lines), with a BOM, stray NUL
bytes inside a marker word (found only when the NUL is removed) in UTF-8 and windows-1252, a
stray invalid byte in UTF-8, and legacy code pages (windows-1252, windows-1251, GBK, Shift_JIS).
``big_sample`` is a multi-MB UTF-16 LE file without a BOM (the new decoding path's speed).
"""

from __future__ import annotations

import codecs

from tests.fidelity import Sample

_EN = "Quarterly report on indexing throughput. All workers finished their documents on time."
_FR = "L'été était très chaud; la señora comió paella. Größe: 15,50 €."
_ZH = "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。"
_RU = "Война и мир — роман Льва Толстого. Все люди рождаются свободными и равными."
_JA = "すべての人間は、生まれながらにして自由であり、かつ、尊厳と権利とについて平等である。"


def _lines(*parts: str, repeat: int = 3, newline: str = "\r\n") -> str:
    return newline.join(" ".join(parts) for _ in range(repeat)) + newline


def _sample(name: str, data: bytes, *must: str) -> Sample:
    return Sample(name=name, filename=f"{name}.txt", data=data, must=must)


def samples() -> list[Sample]:
    """Every encoding case once; markers listed in each sample's ``must``."""
    return [
        _sample("utf16le-no-bom", _lines(_EN, "UTFSIXTEENLEMARK").encode("utf-16-le"), "UTFSIXTEENLEMARK"),
        _sample("utf16be-no-bom", _lines(_EN, "UTFSIXTEENBEMARK").encode("utf-16-be"), "UTFSIXTEENBEMARK"),
        _sample("utf16le-cjk-no-bom", _lines(_ZH, "CJKSIXTEENMARK").encode("utf-16-le"), "CJKSIXTEENMARK",
                "人人生而自由"),
        _sample("utf16be-cjk-no-bom", _lines(_ZH, "CJKBEMARK").encode("utf-16-be"), "CJKBEMARK", "兄弟关系"),
        _sample("utf16le-cyrillic-no-bom", _lines(_RU, "CYRSIXTEENMARK").encode("utf-16-le"), "CYRSIXTEENMARK",
                "Толстого"),
        _sample("utf16le-only-u4e00-nul", "一切人生而自由，在尊严和权利上平等。".encode("utf-16-le"), "一切人生而自由"),
        _sample("utf32le-no-bom", _lines(_FR, "UTFTHIRTYTWOLEMARK").encode("utf-32-le"), "UTFTHIRTYTWOLEMARK",
                "été était très"),
        _sample("utf32be-no-bom", _lines(_ZH, "UTFTHIRTYTWOBEMARK").encode("utf-32-be"), "UTFTHIRTYTWOBEMARK",
                "人人生而自由"),
        _sample("utf16-bom", codecs.BOM_UTF16_LE + _lines(_FR, "BOMSIXTEENMARK").encode("utf-16-le"),
                "BOMSIXTEENMARK", "été était très"),
        _sample("nul-in-utf8", _lines(_FR, "NULUTF\x00EIGHTMARK", repeat=1).encode(), "NULUTFEIGHTMARK",
                "été était très"),
        _sample("nul-in-cp1252", _lines(_FR, "NULCP\x00LATINMARK", repeat=2).encode("cp1252"), "NULCPLATINMARK",
                "été était très"),
        _sample("utf8-stray-byte", _lines(_FR, "STRAYBYTEMARK", repeat=4).encode() + b"price 5\x80.",
                "STRAYBYTEMARK", "été était très"),
        _sample("utf8-stray-cp1252-accent",
                _lines(_FR, "STRAYACCENTMARK", repeat=8).encode() + "Le café était fermé.".encode("cp1252"),
                "STRAYACCENTMARK", "été était très", "Le café était fermé."),
        _sample("invisible-characters",
                _lines(_EN, "SOFT\u00adHYPHENMARK ZERO\u200bWIDTHMARK WORD\u2060JOINERMARK BIDI\u200eMARK").encode(),
                "SOFTHYPHENMARK", "ZEROWIDTHMARK", "WORDJOINERMARK", "BIDIMARK"),
        _sample("cp1252", _lines(_FR, "CPLATINMARK").encode("cp1252"), "CPLATINMARK", "été était très", "15,50 €"),
        _sample("cp1251", _lines(_RU, "CPCYRILLICMARK").encode("cp1251"), "CPCYRILLICMARK", "Толстого"),
        _sample("gbk", _lines(_ZH, "GBKMARK").encode("gbk"), "GBKMARK", "人人生而自由"),
        _sample("shift-jis", _lines(_JA, "SJISMARK").encode("shift_jis"), "SJISMARK", "生まれながらにして自由"),
        _sample("utf8", _lines(_ZH, _FR, "UTFEIGHTMARK").encode(), "UTFEIGHTMARK", "人人生而自由", "été"),
    ]


def big_sample(smoke: bool) -> Sample:
    """A UTF-16 LE file without a BOM, ≈0.2 MB (smoke) or ≈6 MB: English and Chinese lines."""
    lines = 1_000 if smoke else 30_000
    text = "".join(f"{i}: {_EN} {_ZH}\r\n" for i in range(lines)) + "BIGSIXTEENMARK\r\n"
    return _sample("big-utf16le-no-bom", text.encode("utf-16-le"), "BIGSIXTEENMARK")
