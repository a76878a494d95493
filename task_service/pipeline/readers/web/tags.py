"""The HTML walker's classes of tags (block, heading, skipped, SVG text, preformatted), HTML's
whitespace, and the ``data:`` URIs and link targets it never turns into text (pure)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass



BLOCK_TAGS = frozenset(
    "address article aside blockquote body caption center col colgroup dd details dialog dir div dl dt "
    "fieldset figcaption figure footer form frameset header hgroup hr html legend li listing main menu "
    "ol optgroup option p plaintext search section select summary table tbody textarea tfoot thead ul xmp".split()
)
HEADINGS = {f"h{level}": level for level in range(1, 7)}
SKIP_TAGS = frozenset("head script style template noscript iframe noembed noframes".split())
# SVG elements that carry visible text (labels) or its accessible name; other SVG elements hold none.
SVG_TEXT_TAGS = frozenset("text title desc".split())
PRE_TAGS = frozenset(("pre", "listing", "plaintext", "xmp", "textarea"))
# HTML's ASCII whitespace (not NBSP, which is text).
WHITESPACE = re.compile("[ \t\n\f\r]+")
DATA_URI = re.compile(r"\bdata:(?:[\w.+-]+/[\w.+-]+)?(?:;[\w.+-]+(?:=[^;,\s]*)?)*,[^\s\"'<>)\]]*", re.IGNORECASE)
SKIPPED_HREF = ("#", "javascript:", "data:", "vbscript:")
