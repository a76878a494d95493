"""Fidelity corpus for EPUB, ODT, RTF, JSON/JSONL and XML: documents written by hand (ZIP and
XML assembled here, RTF typed), one marker word per construct.

``samples(kind)`` and ``big_sample(kind, smoke)`` for ``kind`` in ``KINDS``. ``must_not`` holds
what is never text (tracked deletions, field instructions, font tables, picture data, XML
comments). ``SECTIONS`` per sample: the section expected for a few markers.
"""

from __future__ import annotations

import io
import json
import zipfile

from tests.fidelity import Sample, zip_bytes

KINDS = ("epub", "odt", "rtf", "json", "xml")


# ---------------------------------------------------------------- EPUB

_CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
    "</rootfiles></container>"
)


def _xhtml(title: str, body: str) -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml" '
        f'xmlns:epub="http://www.idpf.org/2007/ops"><head><title>{title}</title></head><body>{body}</body></html>'
    )


def epub(chapters: list[tuple[str, str, str]], *, nav: bool = True, ncx: bool = True,
         extra: dict[str, str | bytes] | None = None, book_title: str = "BOOKTITLEMARK") -> bytes:
    """An EPUB 3 (with an EPUB 2 NCX) of ``(file, toc label, body)`` chapters; spine in list order."""
    items = "".join(
        f'<item id="c{i}" href="text/{name}" media-type="application/xhtml+xml"/>'
        for i, (name, _, _) in enumerate(chapters)
    )
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
    toc = ' toc="ncx"' if ncx else ""
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
        f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{book_title}</dc:title>'
        '<dc:identifier id="id">x</dc:identifier></metadata><manifest>'
        + ('<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>' if nav else "")
        + ('<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>' if ncx else "")
        + items + f"</manifest><spine{toc}>{spine}</spine></package>"
    )
    links = "".join(f'<li><a href="text/{name}#top">{label}</a></li>' for name, label, _ in chapters if label)
    points = "".join(
        f'<navPoint id="n{i}"><navLabel><text>{label}</text></navLabel><content src="text/{name}"/></navPoint>'
        for i, (name, label, _) in enumerate(chapters) if label
    )
    entries: dict[str, str | bytes] = {"META-INF/container.xml": _CONTAINER, "OEBPS/content.opf": opf}
    if nav:
        entries["OEBPS/nav.xhtml"] = _xhtml("Nav", f'<nav epub:type="toc"><ol>{links}</ol></nav>')
    if ncx:
        entries["OEBPS/toc.ncx"] = f'<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap>{points}</navMap></ncx>'
    for name, _, body in chapters:
        entries[f"OEBPS/text/{name}"] = _xhtml(book_title, body)
    entries.update(extra or {})
    return zip_bytes(entries, mimetype="application/epub+zip")


_EPUB_CH1 = """<h1>Chapter One</h1><p>Paragraph EPUBPARAMARK with <b>bold EPUBBOLDMARK</b>.</p>
<ul><li>List EPUBLISTMARK</li></ul><table><tr><td>EPUBCELLAMARK</td><td>EPUBCELLBMARK</td></tr></table>
<figure><img src="i.png" alt="Alt EPUBALTMARK"/><figcaption>Caption EPUBCAPTIONMARK</figcaption></figure>
<aside epub:type="footnote" id="n1"><p>Footnote EPUBNOTEMARK</p></aside>
<details><summary>EPUBSUMMARYMARK</summary>EPUBDETAILSMARK</details><pre>EPUBPREMARK</pre>"""
_EPUB_CH2 = """<h2>Inner EPUBHEADINGMARK</h2><p>Second chapter EPUBCHAPTWOMARK &amp; <span>EPUBSPANMARK</span></p>
<blockquote>EPUBQUOTEMARK</blockquote><dl><dt>EPUBDTMARK</dt><dd>EPUBDDMARK</dd></dl><script>EPUBSCRIPTMARK</script>"""
_EPUB_CH3 = "<p>No toc label EPUBNOLABELMARK</p><svg><text>EPUBSVGMARK</text></svg>"


def _epub_samples() -> list[Sample]:
    chapters = [("ch1.xhtml", "Part EPUBTOCONEMARK", _EPUB_CH1), ("ch2.xhtml", "Part Two", _EPUB_CH2),
                ("ch3.xhtml", "", _EPUB_CH3)]
    must = ("BOOKTITLEMARK", "EPUBPARAMARK", "EPUBBOLDMARK", "EPUBLISTMARK", "EPUBCELLAMARK", "EPUBCELLBMARK",
            "EPUBALTMARK", "EPUBCAPTIONMARK", "EPUBNOTEMARK", "EPUBSUMMARYMARK", "EPUBDETAILSMARK", "EPUBPREMARK",
            "EPUBHEADINGMARK", "EPUBCHAPTWOMARK", "EPUBSPANMARK", "EPUBQUOTEMARK", "EPUBDTMARK", "EPUBDDMARK",
            "EPUBNOLABELMARK", "EPUBSVGMARK")
    ncx_only = epub([("a.xhtml", "NCX EPUBNCXTITLEMARK", "<p>EPUBNCXBODYMARK</p>")], nav=False)
    return [
        Sample("epub-constructs", "book.epub", epub(chapters), must, ("EPUBSCRIPTMARK",),
               sections={"EPUBPARAMARK": "Part EPUBTOCONEMARK > Chapter One",
                         "EPUBCHAPTWOMARK": "Part Two > Inner EPUBHEADINGMARK"}),
        Sample("epub-ncx", "ncx.epub", ncx_only, ("EPUBNCXBODYMARK",),
               sections={"EPUBNCXBODYMARK": "NCX EPUBNCXTITLEMARK"}),
    ]


# ---------------------------------------------------------------- ODT

_ODF_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
    'xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:dc="http://purl.org/dc/elements/1.1/" '
    'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" office:version="1.3"'
)
_MANIFEST = (
    '<?xml version="1.0"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" '
    'manifest:version="1.3"><manifest:file-entry manifest:full-path="/" '
    'manifest:media-type="application/vnd.oasis.opendocument.text"/>'
    '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml">{enc}</manifest:file-entry>'
    "</manifest:manifest>"
)

ODT_BODY = """<text:tracked-changes><text:changed-region text:id="ct1"><text:deletion><office:change-info>
<dc:creator>A</dc:creator></office:change-info><text:p>Deleted ODTDELETEDMARK</text:p></text:deletion>
</text:changed-region></text:tracked-changes>
<text:table-of-content><text:index-body><text:p>TOC entry</text:p></text:index-body></text:table-of-content>
<text:h text:outline-level="1">Top ODTHEADONEMARK</text:h>
<text:p>Plain ODTPARAMARK <text:span>span ODTSPANMARK</text:span>
<text:a xlink:href="http://x">link ODTLINKMARK</text:a></text:p>
<text:p>ODTSLEFTMARK<text:s/>ODTSRIGHTMARK<text:tab/>ODTTABRIGHTMARK<text:line-break/>ODTBREAKRIGHTMARK<text:s
text:c="3"/>ODTSCMARK</text:p>
<text:h text:outline-level="2">Sub ODTHEADTWOMARK</text:h>
<text:list><text:list-item><text:p>Item ODTLISTMARK</text:p><text:list><text:list-item>
<text:p>Nested ODTNESTEDMARK</text:p>
</text:list-item></text:list></text:list-item><text:list-item><text:number>2.</text:number>
<text:p>Numbered ODTNUMBEREDMARK</text:p>
</text:list-item></text:list>
<table:table table:name="T"><table:table-column table:number-columns-repeated="2"/>
<table:table-header-rows><table:table-row><table:table-cell><text:p>ODTHEADCELLMARK</text:p></table:table-cell>
</table:table-row></table:table-header-rows><table:table-row><table:table-cell><text:p>ODTCELLAMARK</text:p>
</table:table-cell>
<table:table-cell><text:p>ODTCELLBMARK</text:p></table:table-cell></table:table-row></table:table>
<text:p>Anchor ODTANCHORMARK<draw:frame draw:name="F1"><draw:text-box><text:p>Text box ODTTEXTBOXMARK</text:p>
</draw:text-box></draw:frame><draw:frame><draw:image xlink:href="Pictures/x.png"/><svg:title>Alt ODTALTMARK</svg:title>
<svg:desc>Desc ODTDESCMARK</svg:desc></draw:frame><draw:custom-shape><text:p>Shape ODTSHAPEMARK</text:p>
</draw:custom-shape>
</text:p>
<text:p>Noted ODTNOTEREFMARK<text:note text:note-class="footnote"><text:note-citation>1</text:note-citation>
<text:note-body><text:p>Footnote ODTFOOTNOTEMARK</text:p></text:note-body></text:note> and
<text:note text:note-class="endnote"><text:note-citation>i</text:note-citation><text:note-body>
<text:p>Endnote ODTENDNOTEMARK</text:p>
</text:note-body></text:note></text:p>
<text:p><office:annotation><dc:creator>Reviewer</dc:creator><dc:date>2024-01-01</dc:date>
<text:p>Comment ODTCOMMENTMARK</text:p>
</office:annotation>Commented ODTCOMMENTEDMARK<text:change text:change-id="ct1"/></text:p>
<text:section text:name="S">
<text:p>In section ODTSECTIONMARK <text:bookmark text:name="b"/>ODTBOOKMARKTAILMARK</text:p></text:section>
<text:p>Field <text:page-number>ODTFIELDMARK</text:page-number> <text:ruby><text:ruby-base>ODTRUBYMARK</text:ruby-base>
<text:ruby-text>rt</text:ruby-text></text:ruby></text:p>"""
ODT_MUST = tuple(sorted({w for w in ODT_BODY.replace("<", " ").replace(">", " ").split()
                         if w.startswith("ODT") and w.endswith("MARK") and w != "ODTDELETEDMARK"}))
ODT_SEPARATED = (("ODTSLEFTMARK", "ODTSRIGHTMARK"), ("ODTSRIGHTMARK", "ODTTABRIGHTMARK"),
                 ("ODTTABRIGHTMARK", "ODTBREAKRIGHTMARK"))
_ODT_STYLES = (
    f'<office:document-styles {_ODF_NS}><office:master-styles><style:master-page style:name="Standard">'
    "<style:header><text:p>Header ODTHEADERMARK</text:p></style:header>"
    "<style:footer><text:p>Footer ODTFOOTERMARK</text:p></style:footer></style:master-page>"
    "</office:master-styles></office:document-styles>"
)


def odt(body: str, *, encrypted: bool = False, styles: str = _ODT_STYLES) -> bytes:
    content = f"<office:document-content {_ODF_NS}><office:body><office:text>{body}</office:text></office:body>" \
              "</office:document-content>"
    enc = '<manifest:encryption-data manifest:checksum="x"/>' if encrypted else ""
    return zip_bytes({"content.xml": content, "styles.xml": styles, "META-INF/manifest.xml": _MANIFEST.format(enc=enc)},
                mimetype="application/vnd.oasis.opendocument.text")


def _odt_samples() -> list[Sample]:
    flat = (f'<?xml version="1.0"?><office:document {_ODF_NS}><office:body><office:text><text:p>Flat ODTFLATMARK'
            "</text:p></office:text></office:body></office:document>").encode()
    return [
        Sample("odt-constructs", "doc.odt", odt(ODT_BODY), (*ODT_MUST, "ODTHEADERMARK", "ODTFOOTERMARK"),
               ("ODTDELETEDMARK", "Reviewer"),
               sections={"ODTPARAMARK": "Top ODTHEADONEMARK",
                         "ODTLISTMARK": "Top ODTHEADONEMARK > Sub ODTHEADTWOMARK"}),
        Sample("odt-flat", "doc.fodt", flat, ("ODTFLATMARK",)),
    ]


# ---------------------------------------------------------------- RTF

RTF_DOC = rb"""{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\fswiss\fcharset0 Arial FONTNAMEMARK;}
{\f1\froman\fcharset204 Times;}}
{\colortbl;\red255\green0\blue0;}{\stylesheet{\s1 heading 1 STYLEMARK;}}{\*\generator GENERATORMARK;}
{\info{\author AUTHORINFOMARK}}
{\header\pard RTFHEADERMARK\par}
\pard\outlinelevel0\s1 Heading RTFHEADINGMARK\par
\pard Plain RTFPARAMARK {\b bold RTFBOLDMARK} {\i ital}RTFJOINMARK\par
RTFTABLEFTMARK\tab RTFTABRIGHTMARK\line RTFLINERIGHTMARK\par
Caf\'e9RTFHEXMARK \f1\'cf\'f0\'e8RTFCYRMARK\f0  na\u239?veRTFUNIMARK {\uc0\u8364}RTFUCZEROMARK\par
{\field{\*\fldinst HYPERLINK "http://x" FLDINSTMARK}{\fldrslt Link RTFFIELDMARK}}\par
{\deleted Deleted RTFDELETEDMARK}Kept RTFKEPTMARK\par
\trowd\cellx1000\cellx2000 RTFCELLAMARK\cell RTFCELLBMARK\cell\row
\pard{\pict\pngblip\picw10 89504e470d0a1a0aPICTDATAMARK}{\*\unknowndest UNKNOWNDESTMARK} After RTFPICTAFTERMARK\par
Note RTFNOTEREFMARK{\super\chftn}{\footnote\pard Footnote RTFFOOTNOTEMARK\par}\par
{\*\annotation Comment RTFANNOTATIONMARK}\par
Binary {\object{\*\objdata \bin4 \}\{x}}RTFBINAFTERMARK\par
Symbols\~RTFNBSPMARK\emdash RTFDASHMARK\par
Smile \u-10179?\u-8704?RTFSURROGATEMARK\par
}"""
RTF_MUST = ("RTFHEADERMARK", "RTFHEADINGMARK", "RTFPARAMARK", "RTFBOLDMARK", "RTFJOINMARK", "RTFTABLEFTMARK",
            "RTFTABRIGHTMARK", "RTFLINERIGHTMARK", "CaféRTFHEXMARK", "ПриRTFCYRMARK", "naïveRTFUNIMARK",
            "€RTFUCZEROMARK", "RTFFIELDMARK", "RTFKEPTMARK", "RTFCELLAMARK", "RTFCELLBMARK", "RTFPICTAFTERMARK",
            "RTFNOTEREFMARK", "RTFFOOTNOTEMARK", "RTFANNOTATIONMARK", "RTFBINAFTERMARK", "RTFNBSPMARK",
            "RTFDASHMARK", "\U0001f600RTFSURROGATEMARK")
RTF_MUST_NOT = ("FONTNAMEMARK", "STYLEMARK", "GENERATORMARK", "AUTHORINFOMARK", "FLDINSTMARK", "RTFDELETEDMARK",
                "PICTDATAMARK", "UNKNOWNDESTMARK")


def _rtf_samples() -> list[Sample]:
    return [Sample("rtf-constructs", "memo.rtf", RTF_DOC, RTF_MUST, RTF_MUST_NOT,
                   sections={"RTFPARAMARK": "Heading RTFHEADINGMARK"})]


# ---------------------------------------------------------------- JSON / XML

JSON_DOC = {
    "title": "Report JSONTITLEMARK",
    "readings": [{"note": "JSONNOTEMARK", "value": 4.5, "ok": True}, {"note": "Second JSONSECONDMARK"}],
    "tags": ["JSONTAGAMARK", "JSONTAGBMARK"],
    "nested": {"deeper": {"deepest": "JSONDEEPMARK"}},
    "key with spaces": "JSONSPACEDKEYMARK",
    "long": "JSONLONGMARK " + "word " * 100,
    "unicode": "naïve JSONUNICODEMARK",
}
JSON_PATHS = ("readings[0].note: JSONNOTEMARK", "nested.deeper.deepest: JSONDEEPMARK",
              '["key with spaces"]: JSONSPACEDKEYMARK', "tags[1]: JSONTAGBMARK")
XML_DOC = b"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE catalog [<!ENTITY company "XMLENTITYMARK Corp">]>
<catalog xmlns:x="urn:x">
  <!-- XMLCOMMENTMARK -->
  <?pi XMLPIMARK?>
  <book id="b1" title="Attribute XMLATTRMARK">
    <title>XMLTITLEMARK</title><x:author>XMLNSMARK</x:author>
    <blurb>Mixed XMLMIXEDMARK <em>XMLEMMARK</em> tail XMLTAILMARK</blurb>
  </book>
  <note><![CDATA[XMLCDATAMARK <not a tag>]]></note>
  <publisher>&company;</publisher>
  <long>XMLLONGMARK """ + b"text " * 40 + b"""</long>
</catalog>"""
XML_MUST = ("XMLATTRMARK", "XMLTITLEMARK", "XMLNSMARK", "XMLMIXEDMARK", "XMLEMMARK", "XMLTAILMARK", "XMLCDATAMARK",
            "XMLENTITYMARK", "XMLLONGMARK")


def _json_samples() -> list[Sample]:
    lines = "\n".join(json.dumps({"id": i, "text": f"JSONLLINE{i}MARK"}) for i in range(3)) + "\n{broken\n"
    return [
        Sample("json-constructs", "data.json", json.dumps(JSON_DOC, indent=2, ensure_ascii=False).encode(),
               (*[m for m in json.dumps(JSON_DOC, ensure_ascii=False).replace('"', " ").split() if m.endswith("MARK")],
                )),
        Sample("jsonl", "data.jsonl", lines.encode(), ("JSONLLINE0MARK", "JSONLLINE1MARK", "JSONLLINE2MARK")),
    ]


def _xml_samples() -> list[Sample]:
    return [Sample("xml-constructs", "data.xml", XML_DOC, XML_MUST, ("XMLCOMMENTMARK", "XMLPIMARK"))]


def samples(kind: str) -> list[Sample]:
    return {"epub": _epub_samples, "odt": _odt_samples, "rtf": _rtf_samples, "json": _json_samples,
            "xml": _xml_samples}[kind]()


# ---------------------------------------------------------------- big samples (throughput)

_WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing matches".split()


def _sentence(i: int) -> str:
    return " ".join(_WORDS[(i * 7 + k) % len(_WORDS)] for k in range(14)) + f" item{i}."


def _inflated(data: bytes) -> int:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return sum(info.file_size for info in archive.infolist())


def big_sample(kind: str, smoke: bool) -> Sample:
    """A multi-MB document of ``kind`` (a few hundred KB with ``smoke``); ``size`` is its byte length,
    for EPUB and ODT the inflated size of the package's parts (the generated text compresses 20-30:1)."""
    n = 300 if smoke else 6_000
    if kind == "epub":
        chapters = [(f"c{c}.xhtml", f"Chapter {c}", "".join(f"<p>{_sentence(c * 1000 + i)} <b>bold</b></p>"
                                                            for i in range(n // 10))) for c in range(20)]
        data = epub(chapters)
        return Sample("epub-big", "big.epub", data, (), measured_bytes=_inflated(data))
    if kind == "odt":
        odt_body = "".join(f'<text:p>{_sentence(i)}<text:s/><text:span>span</text:span></text:p>' for i in range(n * 2))
        data = odt(odt_body)
        return Sample("odt-big", "big.odt", data, (), measured_bytes=_inflated(data))
    if kind == "rtf":
        body = b"".join(b"\\pard " + _sentence(i).encode() + b" {\\b bold} caf\\'e9\\par\n" for i in range(n * 2))
        return Sample("rtf-big", "big.rtf", b"{\\rtf1\\ansi\\ansicpg1252" + body + b"}", ())
    if kind == "json":
        records = [{"id": i, "text": _sentence(i), "tags": ["a", "b"], "meta": {"ok": True}} for i in range(n * 2)]
        return Sample("json-big", "big.json", json.dumps({"records": records}).encode(), ())
    items = "".join(f"<rec id='{i}'><title>{_sentence(i)}</title><p>Mixed <b>x</b> {_sentence(i)}</p></rec>"
                    for i in range(n * 2))
    return Sample("xml-big", "big.xml", f"<root>{items}</root>".encode(), ())
