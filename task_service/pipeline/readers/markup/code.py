"""Source code → blocks per top-level definition, ``section`` = that definition (pure).

The file is split where a top-level definition starts: a line at column 0 that defines a function,
class, type or table in one of the common languages (:data:`_SYMBOL`: Python, Go, Rust, JavaScript /
TypeScript, Java / C# / Kotlin, C / C++, Ruby, PHP, shell, SQL; the comments and decorators right above
it go with it). Each part's ``section`` is its signature head (``def parse_document``, ``func (s
*Server) Run``, ``CREATE TABLE document_info``); the lines before the first definition (imports,
a module docstring) have none; nothing inside a triple-quoted string or a ``/* */`` comment
starts a definition. Within a part, blank lines separate the blocks; indentation and line
breaks are kept (the chunker cuts at line ends). The document's name already says its path; the
registry's kind names the language.

No parser per language: a line pattern is what search needs (where a name is defined, with its
code), costs one regex per line, and never fails on code that does not compile.
"""

from __future__ import annotations

import re

from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.markup._outline import decoded_lines

__all__ = ["read", "symbol"]

_NAME = r"[A-Za-z_$][\w$]*"
#: A top-level definition, by language family (matched at column 0 only).
_SYMBOL = re.compile(
    "|".join((
        rf"(?:async\s+)?def\s+{_NAME}|class\s+{_NAME}",  # Python, Ruby (def/class/module)
        rf"module\s+{_NAME}",
        rf"func\s+(?:\([^)]*\)\s*)?{_NAME}|type\s+{_NAME}\s+(?:struct|interface)",  # Go
        r"(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|unsafe\s+|const\s+)*(?:fn|struct|enum|trait|impl|mod|union)\b[^;{]*",
        rf"(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*{_NAME}",  # JavaScript / TypeScript
        rf"(?:export\s+)?(?:declare\s+)?(?:abstract\s+)?(?:class|interface|enum|namespace)\s+{_NAME}",
        rf"(?:export\s+)?(?:const|let|var)\s+{_NAME}\s*(?::[^=]*)?=\s*(?:async\s*)?(?:\([^)]*\)|{_NAME})\s*=>",
        rf"(?:export\s+)?type\s+{_NAME}\s*(?:<[^>]*>)?\s*=",
        rf"(?:(?:public|private|protected|internal|static|final|abstract|sealed|partial|data|open)\s+)+"
        rf"(?:class|interface|enum|record|object|struct)\s+{_NAME}",  # Java, C#, Kotlin
        rf"(?:fun|object)\s+{_NAME}",
        rf"(?:struct|union|enum|namespace|template\s*<[^>]*>\s*class|typedef\s+struct)\s+{_NAME}",  # C, C++
        rf"(?:static\s+|inline\s+|extern\s+|const\s+|unsigned\s+|signed\s+)*{_NAME}(?:::{_NAME})*[\s*&]+"
        rf"\**(?:{_NAME}::)*~?{_NAME}\s*\([^;]*\)\s*(?:const\s*)?\{{?\s*$",  # a C/C++ function head (no ';')
        rf"(?:function\s+)?{_NAME}\s*\(\)\s*\{{?",  # shell
        r"(?i:create\s+(?:or\s+replace\s+)?(?:unique\s+)?(?:temporary\s+)?(?:table|view|materialized\s+view|"
        r"function|procedure|index|trigger|type|schema|sequence)\s+(?:if\s+not\s+exists\s+)?[\w.\"`]+)",  # SQL
    ))
)
#: Lines that belong to the definition below them: decorators, annotations, comments.
_LEADING = re.compile(r"\s*(?:@|#|//|/\*|\*|--|;|\"\"\"|''')")
_QUOTES = re.compile(r'\"\"\"|\'\'\'|/\*|\*/')
_CLOSES = {'"""': '"""', "'''": "'''", "/*": "*/"}
_KEYWORDS = frozenset({"if", "for", "while", "switch", "return", "else", "elif", "catch", "do", "sizeof"})


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of a source file (module docstring). Raises ``UndecodableTextError``."""
    del limits  # one regex per line
    lines, warnings = decoded_lines(data)
    return ParsedDocument(tuple(_blocks(lines)), warnings)


def symbol(line: str) -> str | None:
    """The definition a column-0 line starts (its head, one line, at most 120 characters), or None."""
    if not line or line[0].isspace():
        return None
    match = _SYMBOL.match(line)
    if match is None:
        return None
    head = " ".join(match.group(0).split()).rstrip("{( :")
    first = head.split(" ", 1)[0].split("(", 1)[0]
    return None if first in _KEYWORDS or not head else head[:120]


def _still_quoted(line: str, quoted: str | None) -> str | None:
    """The open multi-line string or comment (``\"\"\"``, ``\'\'\'``, ``/*``) after ``line``, or None."""
    for token in _QUOTES.findall(line):
        if quoted is None:
            quoted = token
        elif token == _CLOSES[quoted]:
            quoted = None
    return quoted


def _blocks(lines: list[str]) -> list[Block]:
    blocks: list[Block] = []
    section: str | None = None
    paragraph: list[str] = []

    def flush(upto: int | None = None) -> None:
        body = paragraph[:upto] if upto is not None else paragraph
        if any(line.strip() for line in body):
            blocks.append(Block("\n".join(body).strip("\n"), section))
        del paragraph[: len(body)]

    quoted: str | None = None  # inside a Python triple-quoted string or a C block comment: no symbols
    for line in lines:
        name = symbol(line) if quoted is None else None
        quoted = _still_quoted(line, quoted)
        if name is not None:
            lead = len(paragraph)
            while lead and _LEADING.match(paragraph[lead - 1]):
                lead -= 1
            flush(lead)  # the comments/decorators above stay in ``paragraph`` and join the definition
            section = name
        if line.strip():
            paragraph.append(line.rstrip())
        else:
            flush()
    flush()
    return blocks
