"""LaTeX (``.tex``) → paragraph blocks under their sectioning commands, markup removed (pure).

Sectioning commands give the headings: ``\\part`` (level 1), ``\\chapter`` (2), ``\\section`` (3),
``\\subsection`` (4), ``\\subsubsection`` (5), ``\\paragraph`` (6), starred or not, with an optional
short title (the long one, in braces, is the heading). ``\\title{...}`` is a paragraph. Text: comments
(``%`` to the end of the line, not ``\\%``) are dropped; the arguments of commands that hold no
prose (``\\label``, ``\\ref``, ``\\cite``, ``\\usepackage``, ``\\includegraphics``...) and
``\\begin{…}`` / ``\\end{…}`` are dropped; any other command name goes and its braced argument stays
(``\\emph{word}`` → ``word``); ``~`` is a space; escaped specials (``\\%``, ``\\&``, ``\\$``, ``\\#``,
``\\_``) are the characters. Math stays as written, minus command names. No macro is expanded.
"""

from __future__ import annotations

import re

from task_service.pipeline.document import ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers.markup._outline import Line, decoded_lines, outline_blocks

__all__ = ["read"]

_LEVELS = {"part": 1, "chapter": 2, "section": 3, "subsection": 4, "subsubsection": 5, "paragraph": 6}
_HEADING = re.compile(r"\s*\\(part|chapter|section|subsection|subsubsection|paragraph)\*?\s*(?:\[[^\]]*\])?\s*\{")
_COMMENT = re.compile(r"(?<!\\)%.*")
_NO_PROSE = re.compile(
    r"\\(?:label|ref|eqref|pageref|cite[a-z]*|usepackage|documentclass|includegraphics|bibliographystyle|"
    r"bibliography|input|include|newcommand|renewcommand|providecommand|setlength|addtolength|vspace|hspace|"
    r"begin|end|url)\*?(?:\[[^\]]*\])*(?:\{[^{}]*\})?")
_COMMAND = re.compile(r"\\([A-Za-z@]+)\*?(?:\[[^\]]*\])?")
_ESCAPED = re.compile(r"\\([%&$#_{}])")


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Raises ``UndecodableTextError``."""
    del limits
    lines, warnings = decoded_lines(data)
    return outline_blocks((_line(line) for line in lines), warnings)


def _line(line: str) -> Line:
    line = _COMMENT.sub("", line)
    match = _HEADING.match(line)
    if match:
        title, rest = _braced(line, match.end())
        return Line(_prose(title) + " " + _prose(rest).strip(), _LEVELS[match.group(1)])
    return Line(_prose(line) if line.strip() else "")


def _braced(line: str, start: int) -> tuple[str, str]:
    """The text of the brace group that opened before ``start`` (nested groups included) and what
    follows it; an unclosed group runs to the end of the line."""
    depth = 1
    for i in range(start, len(line)):
        if line[i] == "{" and line[i - 1] != "\\":
            depth += 1
        elif line[i] == "}" and line[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return line[start:i], line[i + 1 :]
    return line[start:], ""


def _prose(text: str) -> str:
    """A line of LaTeX as its words (module docstring)."""
    text = _NO_PROSE.sub("", text)
    text = text.replace("\\\\", "\n").replace("~", " ")
    text = _COMMAND.sub(lambda m: "\\" if m.group(1) in "%&$#_" else "", text)
    text = _ESCAPED.sub(r"\1", text)
    return text.replace("{", "").replace("}", "")
