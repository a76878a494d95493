"""Plain-text candidates for ``bench/parsers.py``: bytes → text, on ``tests.fidelity.text_corpus``.

- ``ours``: ``parse_text(data, "doc.txt")`` (``decode.py``: BOM, BOM-less UTF-16/32, stray NULs,
  UTF-8, mostly UTF-8, charset-normalizer with the windows-1252 preference; then normalization
  and paragraph reflow, which dominate its time);
- ``ours-decode``: ``decode_text`` alone (the decoder, comparable with the detectors below);
- ``charset-normalizer``: ``str(from_bytes(data).best())`` as is (what ``decode.py`` falls back to);
- ``chardet``: ``data.decode(chardet.detect(data)["encoding"], "replace")``;
- ``utf-8-replace``: ``data.decode("utf-8", "replace")``, the naive reading.

The libraries are imported inside each function: a missing one is reported, not fatal.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.fidelity import Sample, text_corpus


def ours(data: bytes) -> str:
    from task_service.pipeline.parse import parse_text

    return parse_text(data, "doc.txt")


def ours_decode(data: bytes) -> str:
    from task_service.pipeline.decode import decode_text

    return decode_text(data)


def charset_normalizer(data: bytes) -> str:
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    return "" if best is None else str(best)


def chardet(data: bytes) -> str:
    import chardet as lib

    encoding = lib.detect(data)["encoding"]
    return "" if encoding is None else data.decode(encoding, "replace")


def utf8_replace(data: bytes) -> str:
    return data.decode("utf-8", "replace")


CANDIDATES: dict[str, Callable[[bytes], str]] = {
    "ours": ours,
    "ours-decode": ours_decode,
    "charset-normalizer": charset_normalizer,
    "chardet": chardet,
    "utf-8-replace": utf8_replace,
}


def samples() -> list[Sample]:
    return text_corpus.samples()


def big_sample(smoke: bool) -> Sample:
    return text_corpus.big_sample(smoke)
