"""What the CLI prints and where its secrets come from.

- Text from users and the server (file names, KB names, error messages) is printed as
  ``rich.text.Text``, never parsed as rich markup: a document named ``[/bold]crash.txt`` is a
  file name, not a closing tag (``MarkupError``) or a style.
- An API token is read from ``RAG_TOKEN``, a file (``--token-file``) or standard input
  (``--token-stdin``, or ``--token -``); ``--token VALUE`` still works but warns, because the
  command line is visible to every user of the machine (``ps``, ``/proc/PID/cmdline``) and lands
  in shell history.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer
from rich.console import Console
from rich.text import Text

TOKEN_ENV = "RAG_TOKEN"
ARGV_WARNING = (f"warning: --token puts the secret on the command line (visible in ps and shell history); "
                f"use {TOKEN_ENV}, --token-file FILE or --token-stdin")

TokenFile = Annotated[Path | None, typer.Option(
    "--token-file", help="read the API token from this file (first line)", show_default=False, dir_okay=False)]
TokenStdin = Annotated[bool, typer.Option("--token-stdin", help="read the API token from standard input")]


class TokenSourceError(ValueError):
    """No usable token source (the message says what to pass)."""


def plain(value: Any) -> Text:
    """``value`` as literal text for a rich table cell or ``Console.print`` (no markup)."""
    return Text("" if value is None else str(value))


def styled(value: Any, style: str) -> Text:
    """``value`` as literal text in ``style`` (for example ``"red"``)."""
    return Text("" if value is None else str(value), style=style)


def print_error(console: Console, message: Any) -> None:
    """``error: MESSAGE`` in red, the message printed as it is."""
    console.print(Text.assemble(("error:", "red"), " ", str(message)), highlight=False)


def _first_line(stream: TextIO) -> str:
    return stream.readline().strip()


def read_token(token: str = "", token_file: Path | None = None, token_stdin: bool = False,
               *, stdin: TextIO | None = None, env: dict[str, str] | None = None,
               warn: Console | None = None) -> str:
    """The API token from, in order: standard input (``token_stdin`` or ``token == "-"``),
    ``token_file`` (its first line), ``token`` (argv: a warning on ``warn``), ``RAG_TOKEN``.
    Returns "" when none is given. Raises ``TokenSourceError`` for two sources at once, an
    unreadable file or an empty stdin/file."""
    sources = [token_stdin or token == "-", token_file is not None, bool(token) and token != "-"]
    if sum(sources) > 1:
        raise TokenSourceError("give one of --token, --token-file, --token-stdin")
    if token_stdin or token == "-":
        value = _first_line(stdin or sys.stdin)
        if not value:
            raise TokenSourceError("no token on standard input")
        return value
    if token_file is not None:
        try:
            with token_file.open(encoding="utf-8") as f:
                value = _first_line(f)
        except OSError as exc:
            raise TokenSourceError(f"cannot read the token file {token_file}: {exc.strerror}") from exc
        if not value:
            raise TokenSourceError(f"the token file {token_file} is empty")
        return value
    if token:
        if warn is not None:
            warn.print(Text(ARGV_WARNING, style="yellow"), highlight=False)
        return token
    return (os.environ if env is None else env).get(TOKEN_ENV, "").strip()
