"""Small hostile files built for the readers (issue 28): each repeats a reference or amplifies its
output so that a naive reader holds the parser for a minute or more. Generated, never stored:
``unit/test_hostile_inputs.py`` checks each reader on a small one, ``e2e/test_hostile_files.py``
sends the full-size ones through a worker.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib

from tests.fidelity import zip_bytes
from tests.fidelity.msg_writer import Attachment, Message, build_msg
from tests.support.pdfgen import assemble

_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG = "http://schemas.openxmlformats.org/package/2006/relationships"


def json_key_paths(depth: int = 150, key_chars: int = 60, leaves: int = 8_000) -> bytes:
    """A JSON object nested ``depth`` levels under long keys, ``leaves`` numbers at the bottom:
    every leaf is written with its whole key path (127 KB → 73 M characters of text)."""
    inner: object = {f"v{i}": i for i in range(leaves)}
    for level in range(depth):
        inner = {f"k{level:03d}" * (key_chars // 4): inner}
    return json.dumps(inner).encode()


def json_huge_integer(digits: int = 1_000_000) -> bytes:
    """A JSON document holding one integer of ``digits`` digits (past Python's int-digit limit)."""
    return b'{"n": ' + b"7" * digits + b"}"


def csv_wide_headers(columns: int = 4_000, header_chars: int = 40, rows: int = 300) -> bytes:
    """A CSV whose ``columns`` long headers are repeated before every cell of ``rows`` rows."""
    header = ",".join(f"{'h' * header_chars}{i}" for i in range(columns))
    row = ",".join("1" for _ in range(columns))
    return (header + "\n" + "\n".join(row for _ in range(rows)) + "\n").encode()


def epub_repeated_spine(repeats: int = 20_000, marker: str = "SPINEMARK") -> bytes:
    """An EPUB whose spine names its one chapter ``repeats`` times."""
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Repeated</dc:title>'
        '<dc:identifier id="id">x</dc:identifier></metadata><manifest>'
        '<item id="c" href="c.xhtml" media-type="application/xhtml+xml"/></manifest><spine>'
        + '<itemref idref="c"/>' * repeats + "</spine></package>"
    )
    chapter = ('<html xmlns="http://www.w3.org/1999/xhtml"><body>'
               + f"<p>{marker} " + "a chapter read again and again " * 40 + "</p></body></html>")
    container = ('<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                 'container"><rootfiles><rootfile full-path="OEBPS/content.opf" '
                 'media-type="application/oebps-package+xml"/></rootfiles></container>')
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:  # stored: the spine is not refused as a ZIP bomb first
        archive.writestr("mimetype", "application/epub+zip")
        for name, text in (("META-INF/container.xml", container), ("OEBPS/content.opf", opf),
                           ("OEBPS/c.xhtml", chapter)):
            archive.writestr(name, text)
    return out.getvalue()


def pptx_repeated_slide(repeats: int = 30_000, marker: str = "SLIDEMARK") -> bytes:
    """A PPTX whose ``p:sldIdLst`` names its one slide ``repeats`` times (one relationship)."""
    p = "http://schemas.openxmlformats.org/presentationml/2006/main"
    a = "http://schemas.openxmlformats.org/drawingml/2006/main"
    ids = "".join(f'<p:sldId id="{256 + i}" r:id="rId1"/>' for i in range(repeats))
    presentation = f'<p:presentation xmlns:p="{p}" xmlns:r="{_R}"><p:sldIdLst>{ids}</p:sldIdLst></p:presentation>'
    slide = (f'<p:sld xmlns:p="{p}" xmlns:a="{a}"><p:cSld><p:spTree><p:sp><p:txBody><a:p><a:r>'
             f"<a:t>{marker} text of the one slide</a:t></a:r></a:p></p:txBody></p:sp></p:spTree></p:cSld></p:sld>")
    return zip_bytes({
        "[Content_Types].xml": '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>',
        "_rels/.rels": f'<Relationships xmlns="{_PKG}"><Relationship Id="r1" Type="{_R}/officeDocument" '
                       'Target="ppt/presentation.xml"/></Relationships>',
        "ppt/presentation.xml": presentation,
        "ppt/_rels/presentation.xml.rels": f'<Relationships xmlns="{_PKG}"><Relationship Id="rId1" '
                                          f'Type="{_R}/slide" Target="slides/slide1.xml"/></Relationships>',
        "ppt/slides/slide1.xml": slide,
    })


def xlsx_repeated_sheet(repeats: int = 2_000, rows: int = 200, marker: str = "SHEETMARK") -> bytes:
    """An XLSX whose workbook lists ``repeats`` sheets, every one naming the same worksheet part."""
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    sheets = "".join(f'<sheet name="S{i}" sheetId="{i + 1}" r:id="rId{i + 1}"/>' for i in range(repeats))
    rels = "".join(f'<Relationship Id="rId{i + 1}" Type="{_R}/worksheet" Target="worksheets/sheet1.xml"/>'
                   for i in range(repeats))
    cells = "".join(f'<row r="{r}"><c r="A{r}" t="inlineStr"><is><t>{marker} {r}</t></is></c>'
                    f'<c r="B{r}"><v>{r}</v></c></row>' for r in range(1, rows + 1))
    types = ('<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
             '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
             '<Default Extension="xml" ContentType="application/xml"/>'
             '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.'
             'spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType='
             '"application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>')
    return zip_bytes({
        "[Content_Types].xml": types,
        "_rels/.rels": f'<Relationships xmlns="{_PKG}"><Relationship Id="r1" Type="{_R}/officeDocument" '
                       'Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": f'<workbook xmlns="{main}" xmlns:r="{_R}"><sheets>{sheets}</sheets></workbook>',
        "xl/_rels/workbook.xml.rels": f'<Relationships xmlns="{_PKG}">{rels}</Relationships>',
        "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{main}"><sheetData>{cells}</sheetData></worksheet>',
    })


def msg_aliased_attachments(count: int = 200, size: int = 2 * 1024 * 1024) -> bytes:
    """An Outlook .msg of ``count`` text attachments whose data directory entries all name the
    first one's ``size`` bytes (an aliased compound file: the others hold 4 KiB each)."""
    def words(n: int) -> bytes:
        return (b"attached words " * (n // 15 + 1))[:n]

    attachments = [Attachment(f"a{i}.txt", words(size if i == 0 else 4096)) for i in range(count)]
    data = bytearray(build_msg(Message(subject="aliased", body="see the attachments", attachments=attachments)))
    name = "__substg1.0_37010102".encode("utf-16-le")
    entries = [off for off in range(512, len(data) - 127, 128) if data[off:off + len(name)] == name
               and struct.unpack_from("<H", data, off + 64)[0] == len(name) + 2]
    if len(entries) != count:
        raise AssertionError(f"found {len(entries)} attachment data entries, expected {count}")
    start, length = data[entries[0] + 116:entries[0] + 124], data[entries[0] + 120:entries[0] + 128]
    for off in entries[1:]:
        data[off + 116:off + 124] = start  # first sector and size: every entry names the first stream
        data[off + 120:off + 128] = length
    return bytes(data)


def zip_part_lying_about_its_size(declared: int = 1_000, real: int = 64 * 1024 * 1024, name: str = "big.xml") -> bytes:
    """A ZIP whose one deflated part of ``real`` bytes declares ``declared`` (central directory and
    local header both)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = b"<a/>" * (1 << 18)
    parts = [compressor.compress(chunk) for _ in range(real // len(chunk))]
    deflated = b"".join(parts) + compressor.flush()
    crc = 0
    for _ in range(real // len(chunk)):
        crc = zlib.crc32(chunk, crc)
    raw = name.encode()
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(deflated), declared, len(raw), 0)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(deflated), declared,
                          len(raw), 0, 0, 0, 0, 0, 0)
    directory_at = len(local) + len(raw) + len(deflated)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central) + len(raw), directory_at, 0)
    return local + raw + deflated + central + raw + end


def html_reopened_formatting(elements: int = 8_000, blocks: int = 9_000) -> bytes:
    """``elements`` formatting elements with distinct attributes (Noah's Ark keeps them all)
    closed by one ``</div>``, then ``blocks`` ``<div>x</div>``: each text re-opens all of them."""
    opened = "".join(f"<b c={i}>" for i in range(elements))
    return ("<html><body><div>" + opened + "</div>" + "<div>x</div>" * blocks + "</body></html>").encode()


def pdf_huge_scanned_pages(pages: int = 100, side_pt: int = 14_400) -> bytes:
    """A PDF of ``pages`` scanned pages (a small image over the whole page, no text layer) of
    ``side_pt`` × ``side_pt`` points (200 in: 1.6 Gpx each at 200 dpi, 50 Mpx once scaled down)."""
    pixels = zlib.compress(bytes(16 * 16))
    image = (b"<< /Type /XObject /Subtype /Image /Width 16 /Height 16 /ColorSpace /DeviceGray "
             b"/BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n" % len(pixels)
             + pixels + b"\nendstream")
    stream = b"q %d 0 0 %d 0 0 cm /Im1 Do Q" % (side_pt, side_pt)
    kids = " ".join(f"{3 + 3 * i} 0 R" for i in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode()]
    for i in range(pages):
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents %d 0 R "
                       b"/Resources << /XObject << /Im1 %d 0 R >> >> >>" % (side_pt, side_pt, 4 + 3 * i, 5 + 3 * i))
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        objects.append(image)
    return assemble(objects)


def zip_is_valid(data: bytes) -> bool:
    """Whether ``zipfile`` opens ``data`` (a sanity check of the builders above)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)):
            return True
    except zipfile.BadZipFile:
        return False
