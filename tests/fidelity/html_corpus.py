"""HTML fidelity corpus: hand-written pages, one marker word per construct.

Markers: every ``*MARK`` word in ``Sample.must`` sits in its own construct (block and inline
elements, containers outside ``<main>``, tables, ``pre``, image alt text, entities, sloppy
markup, deep nesting, a legacy code page); ``must_not`` holds what is never text (script,
style, template, noscript, comments, ``data:`` URIs, the ``<head>`` but its ``<title>``). ``SECTIONS`` gives
the heading path expected for a few markers. ``big_sample`` is a generated multi-MB page of
headings, paragraphs with inline markup and SEC-filing-like tables (font/span in every cell).
"""

from __future__ import annotations

import random
import re

from tests.fidelity import Sample

# Text that must come out exactly so: inline elements join without spaces, <br> ends a line,
# character references are decoded; table cells are joined by " | ".
LITERAL = ("INLINEJOINMARK", "CAFÉMARK", "AT&TMARK", "NBSPMARK", "SOFTHYPHENMARK", "ZEROWIDTHMARK")
# Checked by the unit tests only (a marker with a line break would break the bench table).
BR_LINES = "BRONEMARK\nBRTWOMARK"
ROW = "CELLAMARK | CELLBMARK"
# <pre> keeps its line breaks and indentation.
PRE_LINES = "PRELINEONEMARK\n    PRELINETWOMARK"
_MARK = re.compile(r"(?<![&;\w])[A-Z0-9]+MARK\b")


def _page(body: str, head: str = "<title>HEADTITLEMARK</title>") -> bytes:
    return f"<!DOCTYPE html>\n<html><head>{head}</head>\n<body>\n{body}\n</body></html>\n".encode()


_BLOCKS = """
BARETEXTMARK directly in the body.
<p>A paragraph PARAMARK.</p>
<div>In a div DIVMARK<span> and a span SPANMARK</span></div>
<section>Section text SECTIONTAGMARK</section>
<article>Article text ARTICLEMARK</article>
<address>Address ADDRESSTAGMARK</address>
<blockquote>Quoted QUOTEMARK<p>quoted paragraph QUOTEPARAMARK</p></blockquote>
<center>Centered CENTERTAGMARK</center>
<figure><img src="x.png" alt="Alt text IMGALTMARK"><figcaption>Caption FIGCAPTIONMARK</figcaption></figure>
<details><summary>Summary SUMMARYTAGMARK</summary>Details body DETAILSTAGMARK
<p>details para DETAILSPARAMARK</p></details>
<dl><dt>Term DTTAGMARK</dt><dd>Definition DDTAGMARK</dd></dl>
<ul><li>Item LIONEMARK<ul><li>Nested NESTEDLIMARK</li></ul></li><li>Item LITWOMARK</li></ul>
<ol><li>Ordered OLITEMMARK</li></ol>
<p>INLINE<b>JOIN</b>MARK and <i>ITALICMARK</i> <u>UNDERLINEMARK</u> <s>STRIKEMARK</s> <mark>MARKTAGMARK</mark>
<font color="red">FONTTAGMARK</font> <code>CODETAGMARK</code> <kbd>KBDMARK</kbd> <sub>SUBMARK</sub> <sup>SUPMARK</sup>
<abbr title="t">ABBRMARK</abbr> <q>QTAGMARK</q> <small>SMALLMARK</small> <custom-tag>CUSTOMTAGMARK</custom-tag></p>
<p><ins>Inserted INSTAGMARK</ins> <del>Deleted but visible DELTAGMARK</del></p>
<p>BRONEMARK<br>BRTWOMARK</p>
<pre>PRELINEONEMARK
    PRELINETWOMARK</pre>
<p>CAF&Eacute;MARK AT&amp;TMARK&nbsp;NBSPMARK</p>
<p>Invisible characters: SOFT&shy;HYPHENMARK ZERO&#8203;WIDTH&#x2060;MARK</p>
<p><a href="https://example.com/x">Link text LINKTEXTMARK</a></p>
<p><button>Button BUTTONMARK</button> <label>Label LABELMARK</label></p>
<hr>
<p>After rule HRAFTERMARK</p>
"""

_NEVER = """
<p>Visible VISIBLEMARK</p>
<script>var SCRIPTMARK = 1;</script>
<style>.STYLEMARK { color: red }</style>
<template><p>TEMPLATEMARK</p></template>
<noscript><p>NOSCRIPTMARK</p></noscript>
<svg><title>SVGTITLEMARK</title><text>SVGTEXTMARK</text></svg>
<!-- COMMENTMARK -->
<p><img alt="DATAALTMARK" src="data:image/png;base64,iVBORw0KGgoDATAURIMARKAAAANSUhEUgAAAAEAAAAB"></p>
<p>Pasted inline data:image/png;base64,iVBORw0KGgoPASTEDURIMARKAAAANSUhEUg== after PASTEAFTERMARK</p>
"""

_CONTAINERS = """
<header><p>Header HEADERMARK</p></header>
<nav><a href="/">Home</a> <a href="/about">About</a></nav>
<main><h1>Main heading MAINHEADMARK</h1><p>Main text MAINMARK</p></main>
<aside><p>Aside note ASIDEMARK</p></aside>
<footer><p>Footer FOOTERMARK</p></footer>
"""

_TABLES = """
<table>
<caption>Caption CAPTIONMARK</caption>
<thead><tr><th>HEADAMARK</th><th>HEADBMARK</th></tr></thead>
<tbody><tr><td>CELLAMARK</td><td>CELLBMARK</td></tr>
<tr><td><font><span>FONTCELLMARK</span></font></td><td>12.5</td></tr></tbody>
</table>
<table><tr><td><h2>Layout LAYOUTHEADMARK</h2><p>Layout para LAYOUTPARAMARK</p>
<table><tr><td>INNERAMARK</td><td>INNERBMARK</td></tr></table></td></tr></table>
"""

_SECTIONS = """
<h1>Guide</h1><p>Intro GUIDEINTROMARK</p>
<h2>Install</h2><p>General INSTALLMARK</p>
<h3>Linux</h3><p>On Linux LINUXMARK</p>
<h3>Windows</h3><p>On Windows WINDOWSMARK</p>
<h2>Usage</h2><p>Use it USAGEMARK</p>
"""
SECTIONS = {
    "GUIDEINTROMARK": "Guide",
    "INSTALLMARK": "Guide > Install",
    "LINUXMARK": "Guide > Install > Linux",
    "WINDOWSMARK": "Guide > Install > Windows",
    "USAGEMARK": "Guide > Usage",
}

_SLOPPY = """
<p>Unclosed one SLOPPYONEMARK<p>Unclosed two SLOPPYTWOMARK
<ul><li>Unclosed item SLOPPYLIMARK<li>Another SLOPPYLITWOMARK</ul>
<table><tr><td>Unclosed cell SLOPPYCELLMARK<td>Second SLOPPYCELLTWOMARK</table>
<div><span>Stray end tag STRAYMARK</b></div></span>
</body></html>
Text after the end TRAILINGMARK
"""


def _nested(depth: int, marker: str) -> bytes:
    body = "<div>" * depth + f"Deep text {marker}" + "</div>" * depth + f"<p>After the nest AFTER{marker}</p>"
    return _page(body)


def _cp1252() -> bytes:
    html = (
        '<html><head><meta charset="windows-1252"></head><body>'
        "<p>Größe CPMARK café — “quoted” €</p></body></html>"
    )
    return html.encode("cp1252")


def samples() -> list[Sample]:
    """Every HTML sample with its markers."""

    never = ("SCRIPTMARK", "STYLEMARK", "TEMPLATEMARK", "NOSCRIPTMARK",
             "COMMENTMARK", "DATAURIMARK", "PASTEDURIMARK", "base64")
    tables_must = ("CAPTIONMARK", "HEADAMARK", "HEADBMARK", "CELLAMARK", "CELLBMARK", "FONTCELLMARK",
                   "LAYOUTHEADMARK", "LAYOUTPARAMARK", "INNERAMARK", "INNERBMARK", ROW)
    return [
        Sample("blocks", "blocks.html", _page(_BLOCKS), (*marks(_BLOCKS), *LITERAL, "HEADTITLEMARK")),
        Sample("never-text", "never.html", _page(_NEVER),
               ("VISIBLEMARK", "DATAALTMARK", "PASTEAFTERMARK", "SVGTITLEMARK", "SVGTEXTMARK"), never),
        Sample("containers", "containers.html", _page(_CONTAINERS), marks(_CONTAINERS)),
        Sample("tables", "tables.html", _page(_TABLES), tables_must),
        Sample("sections", "sections.html", _page(_SECTIONS), tuple(SECTIONS), sections=SECTIONS),
        Sample("sloppy", "sloppy.html", _page(_SLOPPY), marks(_SLOPPY)),
        Sample("nested-300", "nested300.html", _nested(300, "DEEP300MARK"), ("DEEP300MARK", "AFTERDEEP300MARK")),
        Sample("nested-1000", "nested1000.html", _nested(1000, "DEEPKMARK"), ("DEEPKMARK", "AFTERDEEPKMARK")),
        Sample("cp1252", "cp1252.html", _cp1252(), ("CPMARK", "Größe", "café", "“quoted”", "€")),
    ]


def marks(source: str) -> tuple[str, ...]:
    """The ``*MARK`` words written whole in ``source`` (not split by tags or entities)."""
    return tuple(dict.fromkeys(_MARK.findall(source)))


def big_sample(smoke: bool) -> Sample:
    """A generated page (≈3 MB; ≈0.3 MB with ``smoke``): headings, paragraphs with inline markup,
    and SEC-filing-like tables whose every cell wraps its text in ``font``/``span``."""
    rng = random.Random(42)
    words = ("revenue income segment fiscal quarter operating cash margin asset liability equity "
             "harbour berth vessel cargo tonnage pilot tide crane customs manifest").split()
    target = 300_000 if smoke else 3_000_000
    parts = ["<!DOCTYPE html><html><head><title>Annual report</title></head><body>"]
    size = 0
    section = 0
    while size < target:
        section += 1
        chunk = [f"<h2>Part {section}</h2>", f"<h3>Item {section}.1 BIGSECTION{section}</h3>"]
        for _ in range(8):
            sentence = " ".join(rng.choice(words) for _ in range(60))
            chunk.append(f"<p>{sentence[:200]} <b>{sentence[200:260]}</b> <a href='#n'>note</a> {sentence[260:]}</p>")
        chunk.append("<table>")
        for row in range(25):
            cells = "".join(
                f'<td style="padding:0"><font size="2"><span>{rng.choice(words)} {row * 7 + col}</span></font></td>'
                for col in range(6)
            )
            chunk.append(f"<tr>{cells}</tr>")
        chunk.append("</table>")
        text = "\n".join(chunk)
        parts.append(text)
        size += len(text)
    parts.append("<p>The last paragraph BIGENDMARK.</p></body></html>")
    return Sample("big", "big.html", "\n".join(parts).encode(), ("BIGSECTION1", "BIGENDMARK"))
