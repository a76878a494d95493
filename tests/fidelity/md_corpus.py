"""Markdown fidelity corpus: hand-written documents, one marker word per construct.

Markers: every ``*MARK`` word in ``Sample.must`` sits in its own construct (ATX and setext
headings, emphasis, code, lists, block quotes, GFM tables, task lists, footnotes, raw HTML,
front matter, link targets, image alt text, deep nesting); ``must_not`` holds what is never
text (HTML comments, scripts, ``data:`` URIs). ``SECTIONS`` gives the heading path expected for
a few markers. ``big_sample`` is a generated multi-MB document with headings, paragraphs,
lists, code and one big table.
"""

from __future__ import annotations

import random
import re

from tests.fidelity import Sample, html_corpus

_MARK = re.compile(r"(?<![&;\w])[A-Z0-9]+MARK\b")
# Link targets are kept after the link text.
LINK_TARGETS = (
    "the portal (https://host/path/LINKTARGETMARK)",
    "REFTEXTMARK (https://ref.example/REFTARGETMARK)",
)

_TEXT = """
Setext title SETEXTMARK
=======================

A paragraph PARAMARK with *emphasis EMPHMARK*, **strong STRONGMARK**, `inline code CODESPANMARK`,
~~struck STRIKEMARK~~ and a hard break HARDBREAKONEMARK\\
after it HARDBREAKTWOMARK. Escaped \\*ESCAPEMARK\\* and an entity CAF&Eacute;MARK.

> Quoted QUOTEMARK
>
> > Nested quote NESTEDQUOTEMARK

- Bullet BULLETMARK
  - Nested bullet NESTEDBULLETMARK
    1. Ordered inside ORDEREDINSIDEMARK
- [ ] Task open TASKOPENMARK
- [x] Task done TASKDONEMARK

3. Ordered from three ORDEREDMARK

```python
def fenced():  # FENCEDMARK
    return "FENCEDSTRINGMARK"
```

    indented code INDENTEDCODEMARK

Term TERMMARK
: Definition DEFINITIONMARK

***

After the rule RULEAFTERMARK. A footnote reference FOOTREFMARK[^note].

[^note]: The footnote text FOOTNOTEMARK.
"""

_LINKS = """
# Links

See [the portal](https://host/path/LINKTARGETMARK "title") and [REFTEXTMARK][ref].
An autolink <https://auto.example/AUTOLINKMARK> and a mail <mailto.MAILMARK@example.com>.
An image ![Alt text IMGALTMARK](picture.png) and a [link around ![LINKEDALTMARK](p.png)](https://x.example/LINKEDIMGMARK).
An inline anchor [jump JUMPMARK](#links) keeps its text.

[ref]: https://ref.example/REFTARGETMARK
"""

_HTML = """
# Raw HTML

<details>
<summary>Summary SUMMARYMDMARK</summary>

Inside details DETAILSMDMARK.

</details>

Inline <kbd>KBDMDMARK</kbd> and <span>SPANMDMARK</span>, line<br>break BRMDMARK.

<!-- COMMENTMDMARK -->

<script>var SCRIPTMDMARK = 1;</script>

<div align="center">Centered DIVMDMARK</div>
"""

_TABLE = """
# Tables

| Name | Value |
|------|------:|
| CELLONEMARK | 1 |
| `CELLCODEMARK` | **CELLBOLDMARK** |
| escaped \\| pipe PIPEMARK | 3 |
"""

_SECTIONS = """
# Guide

Intro GUIDEINTROMARK.

## Install

General INSTALLMARK.

### Linux

On Linux LINUXMARK.

### Windows

On Windows WINDOWSMARK.

## Usage

Use it USAGEMARK.
"""
SECTIONS = html_corpus.SECTIONS  # the same outline, written in Markdown

_FRONT_MATTER = """---
title: Front matter FRONTMATTERMARK
tags: [a, b]
---
# After the front matter

Body BODYMARK.
"""

_DATA_URI = """
# Embedded image

Before BEFOREDATAMARK ![DATAALTMARK](data:image/png;base64,iVBORw0KGgoDATAURIMARKAAAANSUhEUg==) after AFTERDATAMARK.
"""


def _nested_list(depth: int, marker: str) -> bytes:
    lines = [f"{'  ' * level}- level {level}" for level in range(depth)]
    lines.append(f"{'  ' * depth}- Deepest {marker}")
    return ("\n".join(lines) + f"\n\nAfter the list AFTER{marker}.\n").encode()


def marks(source: str) -> tuple[str, ...]:
    """The ``*MARK`` words written whole in ``source`` (not split by markup or entities)."""
    return tuple(dict.fromkeys(_MARK.findall(source)))


def samples() -> list[Sample]:
    """Every Markdown sample with its markers."""
    never_html = ("COMMENTMDMARK", "SCRIPTMDMARK")
    return [
        Sample("text", "text.md", _TEXT.encode(), (*marks(_TEXT), "CAFÉMARK")),
        Sample("links", "links.md", _LINKS.encode(), (*marks(_LINKS), *LINK_TARGETS, "AUTOLINKMARK")),
        Sample("raw-html", "html.md", _HTML.encode(), tuple(m for m in marks(_HTML) if m not in never_html),
               never_html),
        Sample("table", "table.md", _TABLE.encode(), marks(_TABLE)),
        Sample("sections", "sections.md", _SECTIONS.encode(), tuple(SECTIONS), sections=SECTIONS),
        Sample("front-matter", "front.md", _FRONT_MATTER.encode(), marks(_FRONT_MATTER)),
        Sample("data-uri", "data.md", _DATA_URI.encode(), ("BEFOREDATAMARK", "DATAALTMARK", "AFTERDATAMARK"),
               ("DATAURIMARK", "base64")),
        Sample("nested-120", "nested.md", _nested_list(120, "DEEPLISTMARK"), ("DEEPLISTMARK", "AFTERDEEPLISTMARK")),
    ]


def big_sample(smoke: bool) -> Sample:
    """A generated document (≈3 MB; ≈0.3 MB with ``smoke``): sections of paragraphs with inline
    markup and links, lists and code, then one big GFM table (a third of the bytes)."""
    rng = random.Random(42)
    words = ("revenue income segment fiscal quarter operating cash margin asset liability equity "
             "harbour berth vessel cargo tonnage pilot tide crane customs manifest").split()
    target = 300_000 if smoke else 3_000_000
    parts = ["# Annual report", ""]
    size = 0
    section = 0
    while size < target * 2 // 3:
        section += 1
        chunk = [f"## Part {section} BIGSECTION{section}", ""]
        for _ in range(6):
            sentence = " ".join(rng.choice(words) for _ in range(60))
            chunk += [f"{sentence[:150]} *{sentence[150:200]}* [note](https://example.com/n/{section}) "
                      f"`{sentence[200:220]}` {sentence[220:]}", ""]
        chunk += [f"- {rng.choice(words)} item" for _ in range(5)] + [""]
        chunk += ["```", *(f"line {i} = {rng.choice(words)}" for i in range(5)), "```", ""]
        text = "\n".join(chunk)
        parts.append(text)
        size += len(text)
    parts += ["## The big table", "", "| id | name | amount | note |", "|---:|---|---:|---|"]
    row = 0
    while size < target:
        row += 1
        line = f"| {row} | {rng.choice(words)} {rng.choice(words)} | {rng.randint(1, 10**6)} | {rng.choice(words)} |"
        parts.append(line)
        size += len(line) + 1
    parts += ["", "The last paragraph BIGENDMARK.", ""]
    return Sample("big", "big.md", "\n".join(parts).encode(), ("BIGSECTION1", "BIGENDMARK"))
