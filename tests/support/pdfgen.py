"""Minimal PDFs written by hand for tests: one content stream per page, Helvetica as F1."""

from __future__ import annotations

import zlib

#: A Letter page whose content stream is object %d; Helvetica as F1.
PAGE = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources"
        b" << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>")


def text_page(*lines: str) -> bytes:
    """A page content stream showing ``lines`` top-down (ASCII, no parentheses or backslashes)."""
    ops = b" 0 -14 Td ".join(b"(" + line.encode("ascii") + b") Tj" for line in lines)
    return b"BT /F1 12 Tf 72 720 Td " + ops + b" ET" if lines else b"BT ET"


def pdf_pages(streams: list[bytes]) -> bytes:
    """A PDF whose page ``i`` draws ``streams[i]`` (Flate-compressed here)."""
    n = len(streams)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               f"<< /Type /Pages /Kids [{' '.join(f'{3 + 2 * i} 0 R' for i in range(n))}] /Count {n} >>".encode()]
    for i, stream in enumerate(streams):
        packed = zlib.compress(stream)
        objects.append(PAGE % (4 + 2 * i))
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream")
    return assemble(objects)


def assemble(objects: list[bytes]) -> bytes:
    """A PDF file of ``objects`` (numbered from 1; object 1 is the catalog) with its xref table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


# --- text at given positions, rotated pages, columns (PDF reading order, issue 17) ---------------

#: Helvetica advance widths (1/1000 em, from its AFM) of the characters the generators use.
_WIDTHS = dict(zip("abcdefghijklmnopqrstuvwxyz", [556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833,
                                                  556, 556, 556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500],
                   strict=True))
_WIDTHS.update(dict(zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ", [667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833,
                                                      722, 778, 667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611],
                        strict=True)))
_WIDTHS.update({c: 556 for c in "0123456789"} | {" ": 278, ".": 278, ",": 278, ":": 278, "-": 333})


def text_width(text: str, size: float) -> float:
    """The advance width of ``text`` in Helvetica at ``size`` points (unknown characters: 600)."""
    return sum(_WIDTHS.get(c, 600) for c in text) * size / 1000


def placed_text(items: list[tuple[float, float, str]], size: float = 10.0,
                matrix: tuple[float, float, float, float] = (1, 0, 0, 1)) -> bytes:
    """A content stream drawing each ``(x, y, text)`` in that order, its baseline starting at
    ``x, y`` (page space) and running along the text matrix ``matrix`` (``a b c d`` of ``Tm``:
    ``0 1 -1 0`` runs upwards, rotated 90° counter-clockwise)."""
    a, b, c, d = matrix
    ops = [b"%g %g %g %g %.2f %.2f Tm (%s) Tj" % (a, b, c, d, x, y, text.encode("ascii")) for x, y, text in items]
    return b"BT /F1 %g Tf " % size + b" ".join(ops) + b" ET"


def pdf_document(streams: list[bytes], *, rotate: list[int] | None = None, size: tuple[float, float] = (612, 792),
                 extra: list[list[bytes]] | None = None, catalog: bytes = b"",
                 tail: list[bytes] | None = None) -> bytes:
    """A PDF whose page ``i`` draws ``streams[i]`` with ``/Rotate rotate[i]`` on a ``size`` media
    box; ``extra[i]`` are objects (annotation dictionaries) listed in the page's ``/Annots``,
    numbered after the pages, then ``tail`` objects (appearance streams); ``annotation_ref``
    gives their numbers; ``catalog`` adds entries to the catalog (``/AcroForm``)."""
    n = len(streams)
    extra = extra or [[] for _ in streams]
    first_extra = 3 + 2 * n
    objects = [b"<< /Type /Catalog /Pages 2 0 R " + catalog + b" >>",
               f"<< /Type /Pages /Kids [{' '.join(f'{3 + 2 * i} 0 R' for i in range(n))}] /Count {n} >>".encode()]
    annots: list[bytes] = []
    for i, stream in enumerate(streams):
        refs = " ".join(f"{first_extra + len(annots) + k} 0 R" for k in range(len(extra[i])))
        annots.extend(extra[i])
        turn = rotate[i] if rotate else 0
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %g %g] /Rotate %d /Contents %d 0 R"
                       b" /Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >>"
                       b" /Annots [%s] >>" % (size[0], size[1], turn, 4 + 2 * i, refs.encode()))
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return assemble(objects + annots + (tail or []))


def annotation_ref(pages: int, index: int) -> int:
    """The object number of the ``index``-th extra object (all pages counted, then ``tail``) of
    ``pdf_document``."""
    return 3 + 2 * pages + index


def appearance(text: str, width: float, height: float, size: float = 10.0) -> bytes:
    """A form XObject (an annotation's ``/AP /N``) showing ``text`` in Helvetica."""
    body = b"/Tx BMC BT /F1 %g Tf 2 %g Td (%s) Tj ET EMC" % (size, (height - size) / 2 + 2, text.encode("ascii"))
    return (b"<< /Type /XObject /Subtype /Form /BBox [0 0 %g %g] /Resources << /Font << /F1 << /Type /Font"
            b" /Subtype /Type1 /BaseFont /Helvetica >> >> >> /Length %d >>\nstream\n" % (width, height, len(body))
            + body + b"\nendstream")


def rotated_lines(lines: list[str], rotate: int, size: float = 12.0) -> tuple[bytes, list[int]]:
    """A page showing ``lines`` top-down *as the viewer sees it* on a Letter page with ``/Rotate
    rotate``: the text is drawn turned against the page's rotation, as scanners and landscape
    exports write it. Returns the content stream and the ``rotate`` list for ``pdf_document``."""
    width, height = 612.0, 792.0
    items = []
    for k, line in enumerate(lines):
        down = 72 + k * size * 1.4  # from the viewer's top edge
        if rotate == 90:  # viewer's top edge is the page's left edge; text runs up
            items.append((down, 72.0, line))
        elif rotate == 180:
            items.append((width - 72, down, line))
        elif rotate == 270:
            items.append((width - down, height - 72, line))
        else:
            items.append((72.0, height - down, line))
    matrix = {90: (0, 1, -1, 0), 180: (-1, 0, 0, -1), 270: (0, -1, 1, 0)}.get(rotate, (1, 0, 0, 1))
    return placed_text(items, size, matrix), [rotate]


def sentences(count: int, seed: int) -> list[str]:
    """``count`` made-up sentences of 6-14 distinct pseudo-words each (deterministic in ``seed``),
    so a sentence's word run occurs nowhere else."""
    import random

    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ren", "tu", "sal", "vo", "ne", "dri", "pa", "ol", "qua", "ber", "zi", "fen", "mo"]
    out = []
    for _ in range(count):
        words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(6, 14))]
        words[0] = words[0].capitalize()
        out.append(" ".join(words) + ".")
    return out


def column_page(text: list[str], columns: int, order: str, *, size: float = 10.0, gutter: float = 18.0,
                title: str = "Quarterly minutes of the board", seed: int = 0) -> tuple[bytes, list[str]]:
    """A Letter page: a full-width ``title``, then ``text`` (sentences) set ragged-right in
    ``columns`` columns (a blank line after about one sentence in four), then a centred footer;
    drawn column after column (``order="columns"``), row by row interleaving the columns
    (``"rows"``), or right column first (``"reverse"``). Returns the content stream and the
    sentences that fit, in reading order."""
    import random

    rng = random.Random(seed)
    left, right, top, bottom, leading = 54.0, 558.0, 700.0, 90.0, size * 1.2
    width = (right - left - gutter * (columns - 1)) / columns
    rows = int((top - bottom) / leading)
    lines: list[str] = []
    placed: list[str] = []
    for sentence in text:
        trial = _set_words(list(lines), sentence.split(), width, size)
        if len(trial) > rows * columns:
            break
        lines, placed = trial, [*placed, sentence]
        if rng.random() < 0.25:
            lines.append("")
    cells = {(k // rows, k % rows): line for k, line in enumerate(lines) if line}
    keys = sorted(cells, key=lambda cr: (cr[1], cr[0]) if order == "rows" else
                  ((-cr[0] if order == "reverse" else cr[0]), cr[1]))
    items = [(left, 740.0, title)]
    items += [(left + c * (width + gutter), top - r * leading, cells[c, r]) for c, r in keys]
    items.append((306.0 - text_width("Page 1", size) / 2, 50.0, "Page 1"))
    return placed_text(items, size), placed


def _set_words(lines: list[str], words: list[str], width: float, size: float) -> list[str]:
    """``lines`` with ``words`` set after them, a new line when the next word does not fit."""
    for word in words:
        if lines and lines[-1] and text_width(lines[-1] + " " + word, size) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def intact(text: str, sentences: list[str]) -> float:
    """Share of ``sentences`` whose words occur in ``text`` contiguous and in order."""
    tokens = " " + " ".join(text.split()) + " "
    return sum(1 for s in sentences if " " + " ".join(s.split()) + " " in tokens) / max(len(sentences), 1)
