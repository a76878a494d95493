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
