"""JSON, JSONL and NDJSON → blocks: every value with its key path as context (stdlib ``json``).

Named ``jsondoc`` so that it can never shadow the standard library's ``json``.

- Bytes → text with ``decode.py`` (BOM, UTF-16/32, legacy code pages, with its warnings).
- The whole text is tried as one JSON value; when it is not one but its lines are (JSON Lines,
  NDJSON: one value per line, blank lines ignored), each line is a record whose paths start
  with ``line N``. A line that is not valid JSON is skipped and counted in a warning; when no
  line is valid, ``CorruptDocumentError``.
- Every leaf value (string, number, boolean; ``null`` and empty containers are not text) is
  written ``path: value`` with its key path in JavaScript notation (``readings[0].note``,
  ``["key with spaces"]``). The leaves of one object (or one array of scalars) form one block,
  one line each, up to ``_GROUP_CHARS`` characters a block, so that a chunk holds a record
  rather than a fragment; a string longer than ``_LONG`` characters is a block of its own.
  ``section`` is the top-level key (none for JSON Lines), so records of one array chunk together.

Limits (``ParseLimits``): nesting deeper than ``structured_max_depth`` or more leaf values than
``structured_max_values`` → ``ParseLimitError`` (the stdlib parser's own recursion limit,
≈1,000 levels, and Python's int-digit limit, 4,300 digits, are caught the same way).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from task_service.pipeline.decode import decode
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits

_GROUP_CHARS = 1_000
_LONG = 300
_IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$]*$")


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of a JSON document or of JSON Lines (auto-detected), with warnings.

    Raises ``CorruptDocumentError`` (neither valid JSON nor any valid JSON line),
    ``ParseLimitError`` (nesting or value count beyond ``limits``), ``UndecodableTextError``.
    """
    decoded = decode(data)
    text = decoded.text.lstrip("\ufeff")
    walker = _Walker(limits)
    try:
        value = _loads(text, "JSON document")
    except json.JSONDecodeError as exc:
        if "\n" not in text.strip():
            raise CorruptDocumentError(f"not valid JSON: {exc}") from exc
        return _lines(text, walker, decoded.warnings)
    walker.value(value, "", None)
    return ParsedDocument(tuple(walker.blocks), decoded.warnings)


def read_lines(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of a JSON Lines / NDJSON document: one record per non-blank line (see ``read``)."""
    decoded = decode(data)
    return _lines(decoded.text.lstrip("\ufeff"), _Walker(limits), decoded.warnings)


def _lines(text: str, walker: _Walker, warnings: tuple[str, ...]) -> ParsedDocument:
    bad: list[int] = []
    good = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = _loads(line, f"JSON line {number}")
        except json.JSONDecodeError:
            bad.append(number)
            continue
        good += 1
        walker.value(value, f"line {number}", None)
    if not good:
        raise CorruptDocumentError("neither valid JSON nor JSON Lines (no line is a JSON value)")
    if bad:
        shown = ", ".join(map(str, bad[:5])) + (" …" if len(bad) > 5 else "")
        warnings = (*warnings, f"{len(bad):,} line(s) not valid JSON skipped (line {shown})")
    return ParsedDocument(tuple(walker.blocks), warnings)


def _loads(text: str, what: str) -> object:
    """``json.loads``; ``JSONDecodeError`` for text that is not JSON, ``ParseLimitError`` for JSON
    Python will not hold (nesting past its recursion limit; an integer past its int-digit limit,
    which ``json`` raises as a plain ``ValueError``)."""
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise ParseLimitError(f"{what} nests arrays/objects too deeply to be read") from exc
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        raise ParseLimitError(
            f"{what} holds an integer of more than {sys.get_int_max_str_digits():,} digits, "
            f"which cannot be read as a number: {exc}"
        ) from exc


@dataclass
class _Walker:
    limits: ParseLimits
    blocks: list[Block] = field(default_factory=list)
    values: int = 0

    def value(self, value: object, path: str, section: str | None, depth: int = 0) -> None:
        """Walk ``value`` at ``path``: leaves of each container grouped, containers walked after."""
        if depth > self.limits.structured_max_depth:
            raise ParseLimitError(
                f"JSON nested more than {self.limits.structured_max_depth} levels deep (STRUCTURED_MAX_DEPTH)"
            )
        if not isinstance(value, dict | list):
            self._group(path, [(path, value)], section)
            return
        leaves: list[tuple[str, object]] = []
        nested: list[tuple[str, object, str | None]] = []
        for key, child, child_section in _children(value, path, section, depth):
            if isinstance(child, dict | list):
                nested.append((key, child, child_section))
            else:
                leaves.append((key, child))
        self._group(path, leaves, section)
        for key, child, child_section in nested:
            self.value(child, key, child_section, depth + 1)

    def _group(self, path: str, leaves: list[tuple[str, object]], section: str | None) -> None:
        lines: list[str] = []
        size = 0
        for key, leaf in leaves:
            text = _scalar(leaf)
            if text is None:
                continue
            self._count()
            line = f"{key}: {text}" if key else text
            if len(text) > _LONG:
                self._emit(lines, section)
                lines, size = [], 0
                self.blocks.append(Block(line, section))
                continue
            if size + len(line) > _GROUP_CHARS:
                self._emit(lines, section)
                lines, size = [], 0
            lines.append(line)
            size += len(line) + 1
        self._emit(lines, section)

    def _emit(self, lines: list[str], section: str | None) -> None:
        if lines:
            self.blocks.append(Block("\n".join(lines), section))

    def _count(self) -> None:
        self.values += 1
        if self.values > self.limits.structured_max_values:
            raise ParseLimitError(
                f"JSON holds more than {self.limits.structured_max_values:,} values (STRUCTURED_MAX_VALUES)"
            )


def _children(
    value: dict[str, object] | list[object], path: str, section: str | None, depth: int
) -> Iterator[tuple[str, object, str | None]]:
    if isinstance(value, dict):
        for key, child in value.items():
            yield _join(path, str(key)), child, section if depth or section else str(key)
    else:
        for index, child in enumerate(value):
            yield f"{path}[{index}]", child, section


def _join(path: str, key: str) -> str:
    if _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _scalar(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value.strip() else None
    return str(value)
