"""ODP fidelity corpus: OpenDocument presentations written by hand (ZIP + content.xml), one marker
word per construct.

The package is what LibreOffice writes, minus styles: ``mimetype`` first and stored (ODF 1.3
Part 2, §3.3), ``META-INF/manifest.xml``, ``content.xml``, a picture and an embedded chart
object (``Object 1/content.xml``). ``ORDER`` lists markers in reading order (title first, then
top to bottom, left to right); ``SECTIONS`` maps markers to their slide's section.
"""

from __future__ import annotations

import io
import zipfile

from tests.fidelity import Sample
from tests.fidelity.pptx_corpus import _png

MIME = "application/vnd.oasis.opendocument.presentation"
_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
    'xmlns:chart="urn:oasis:names:tc:opendocument:xmlns:chart:1.0" '
    'xmlns:xlink="http://www.w3.org/1999/xlink" office:version="1.3"'
)
ORDER = ("ODPTITLEMARK", "ODPTOPMARK", "ODPBODYMARK", "ODPLEFTMARK", "ODPRIGHTMARK", "ODPNOTESMARK")
SECTIONS = {"ODPBODYMARK": "ODPTITLEMARK deck", "ODPHIDDENMARK": "Hidden (hidden slide)", "ODPNOTITLEMARK": "Slide 4"}
LITERAL = ("ODPLINELEFTMARK\nODPLINERIGHTMARK", "ODPSPACEMARK   three", "Speaker notes: ODPNOTESMARK")


def _frame(text: str, x: str, y: str, cls: str = "") -> str:
    attr = f' presentation:class="{cls}"' if cls else ""
    return (
        f'<draw:frame{attr} svg:x="{x}" svg:y="{y}" svg:width="5cm" svg:height="2cm">'
        f"<draw:text-box><text:p>{text}</text:p></draw:text-box></draw:frame>"
    )


def _notes(text: str) -> str:
    return (
        '<presentation:notes><draw:page-thumbnail svg:x="1cm" svg:y="1cm" svg:width="10cm" svg:height="8cm"/>'
        f'{_frame(text, "1cm", "10cm", "notes")}</presentation:notes>'
    )


_PAGE1 = (
    '<draw:page draw:name="page1">'
    + _frame("ODPRIGHTMARK", "12cm", "12cm")
    + _frame("ODPLEFTMARK", "1cm", "12cm")
    + '<draw:frame presentation:class="outline" svg:x="1cm" svg:y="5cm" svg:width="20cm" svg:height="6cm">'
    "<draw:text-box><text:list><text:list-item><text:p>ODPBODYMARK</text:p><text:list><text:list-item>"
    "<text:p>ODPLEVELTWOMARK</text:p></text:list-item></text:list></text:list-item></text:list>"
    "<text:p>ODPLINELEFTMARK<text:line-break/>ODPLINERIGHTMARK</text:p>"
    '<text:p>ODPSPACEMARK<text:s text:c="3"/>three<text:tab/><text:span>ODPSPANMARK</text:span> '
    '<text:a xlink:href="https://example.com/">ODPLINKMARK</text:a></text:p></draw:text-box></draw:frame>'
    + _frame("ODPTOPMARK", "1cm", "0.2cm")
    + _frame("ODPTITLEMARK deck", "1cm", "1cm", "title")
    + _notes("ODPNOTESMARK")
    + "</draw:page>"
)
_PAGE2 = (
    '<draw:page draw:name="page2">' + _frame("Shapes ODPSHAPESMARK", "1cm", "1cm", "title")
    + '<draw:custom-shape svg:x="1cm" svg:y="4cm" svg:width="4cm" svg:height="2cm"><text:p>ODPCUSTOMMARK</text:p>'
    "<draw:enhanced-geometry/></draw:custom-shape>"
    '<draw:rect draw:transform="rotate (0.5) translate (2cm 5cm)" svg:width="3cm" svg:height="1cm">'
    "<text:p>ODPRECTMARK</text:p></draw:rect>"
    + "<draw:g>" + _frame("ODPGROUPMARK", "1cm", "8cm") + "<draw:g>" + _frame("ODPNESTEDMARK", "1cm", "9cm")
    + "</draw:g></draw:g>"
    + _frame("ODPOFFSLIDEMARK", "-8cm", "3cm")
    + '<draw:frame svg:x="15cm" svg:y="4cm" svg:width="4cm" svg:height="3cm"><draw:image xlink:href="Pictures/p1.png"'
    ' xlink:type="simple"/><svg:title>ODPALTTITLEMARK</svg:title><svg:desc>ODPALTDESCMARK</svg:desc></draw:frame>'
    '<draw:frame svg:x="15cm" svg:y="9cm" svg:width="8cm" svg:height="6cm"><draw:object xlink:href="./Object 1"'
    ' xlink:type="simple"/></draw:frame>'
    "</draw:page>"
)
_PAGE3 = (
    '<draw:page draw:name="page3" draw:style-name="dpHidden">' + _frame("Hidden", "1cm", "1cm", "title")
    + '<draw:frame svg:x="1cm" svg:y="4cm" svg:width="20cm" svg:height="4cm"><table:table>'
    "<table:table-column table:number-columns-repeated=\"3\"/><table:table-header-rows><table:table-row>"
    "<table:table-cell><text:p>ODPHEADMARK</text:p></table:table-cell>"
    '<table:table-cell table:number-columns-spanned="2"><text:p>Spanned</text:p></table:table-cell>'
    "<table:covered-table-cell/></table:table-row></table:table-header-rows><table:table-row>"
    "<table:table-cell><text:p>P-7</text:p></table:table-cell><table:table-cell><text:p>ODPCELLMARK</text:p>"
    "<text:p>ODPCELLTWOMARK</text:p></table:table-cell><table:table-cell/></table:table-row></table:table>"
    "</draw:frame>" + _frame("ODPHIDDENMARK", "1cm", "10cm") + "</draw:page>"
)
_PAGE4 = '<draw:page draw:name="page4">' + _frame("ODPNOTITLEMARK", "1cm", "3cm") + "</draw:page>"
_STYLES = (
    '<office:automatic-styles><style:style style:name="dpHidden" style:family="drawing-page">'
    '<style:drawing-page-properties presentation:visibility="hidden"/></style:style></office:automatic-styles>'
)
MUST = (
    "ODPTITLEMARK", "ODPTOPMARK", "ODPBODYMARK", "ODPLEVELTWOMARK", "ODPLEFTMARK", "ODPRIGHTMARK", "ODPNOTESMARK",
    "ODPLINELEFTMARK", "ODPLINERIGHTMARK", "ODPSPACEMARK", "ODPSPANMARK", "ODPLINKMARK",
    "ODPSHAPESMARK", "ODPCUSTOMMARK", "ODPRECTMARK", "ODPGROUPMARK", "ODPNESTEDMARK", "ODPOFFSLIDEMARK",
    "ODPALTDESCMARK", "ODPCHARTTITLEMARK", "ODPHEADMARK", "ODPCELLMARK", "ODPCELLTWOMARK", "ODPHIDDENMARK",
    "ODPNOTITLEMARK",
)


def _chart() -> str:
    return (
        f"<office:document-content {_NS}><office:body><office:chart><chart:chart>"
        "<chart:title><text:p>ODPCHARTTITLEMARK</text:p></chart:title></chart:chart></office:chart>"
        "</office:body></office:document-content>"
    )


def package(pages: str, styles: str = "", extra: dict[str, bytes] | None = None, mime: str = MIME) -> bytes:
    """An ODP: ``mimetype`` first and stored, a manifest, ``content.xml`` with ``pages``, ``extra`` parts."""
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_NS}>{styles}'
        f"<office:body><office:presentation>{pages}</office:presentation></office:body></office:document-content>"
    )
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
        'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">'
        f'<manifest:file-entry manifest:full-path="/" manifest:media-type="{mime}"/>'
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>'
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), mime, compress_type=zipfile.ZIP_STORED)
        archive.writestr("META-INF/manifest.xml", manifest)
        archive.writestr("content.xml", content)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return buffer.getvalue()


def deck() -> bytes:
    extra = {"Pictures/p1.png": _png(64, 48), "Object 1/content.xml": _chart().encode()}
    return package(_PAGE1 + _PAGE2 + _PAGE3 + _PAGE4, _STYLES, extra)


def samples() -> list[Sample]:
    return [Sample("odp-constructs", "constructs.odp", deck(), MUST, sections=SECTIONS)]


def big_sample(smoke: bool) -> Sample:
    """20 (``smoke``) or 300 pages: title, 6 list items, a 4×3 table, a group, notes; measured on content.xml."""
    pages = []
    for n in range(20 if smoke else 300):
        items = "".join(
            f"<text:list-item><text:p>Point {b} of slide {n}: sed do eiusmod tempor incididunt.</text:p>"
            "</text:list-item>" for b in range(6)
        )
        rows = "".join(
            "<table:table-row>" + "".join(
                f"<table:table-cell><text:p>r{r}c{c} s{n}</text:p></table:table-cell>" for c in range(3)
            ) + "</table:table-row>" for r in range(4)
        )
        pages.append(
            f'<draw:page draw:name="p{n}">{_frame(f"Slide {n} heading", "1cm", "1cm", "title")}'
            '<draw:frame presentation:class="outline" svg:x="1cm" svg:y="4cm" svg:width="20cm" svg:height="6cm">'
            f"<draw:text-box><text:list>{items}</text:list></draw:text-box></draw:frame>"
            f'<draw:frame svg:x="1cm" svg:y="11cm" svg:width="20cm" svg:height="4cm"><table:table>{rows}'
            f'</table:table></draw:frame><draw:g>{_frame(f"Box {n} text.", "22cm", "4cm")}</draw:g>'
            f"{_notes(f'Notes of slide {n}: ut enim ad minim veniam.')}</draw:page>"
        )
    data = package("".join(pages))
    size = zipfile.ZipFile(io.BytesIO(data)).getinfo("content.xml").file_size
    return Sample("odp-big", "big.odp", data, ("Box 19 text.",), measured_bytes=size)
