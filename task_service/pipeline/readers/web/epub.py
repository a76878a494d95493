"""EPUB (2 and 3) → blocks: the spine's XHTML documents in order, each through our HTML walker.

Why our own package reading (zipfile + lxml) rather than EbookLib: measured with ``python -m
bench.parsers epub odt rtf jsondoc xml`` (21 markers of ``tests/fidelity/docs_corpus.py``; MB/s of
inflated XHTML on a 1.3 MB generated book, both through our HTML walker, 2 shared cores, medians
of 5): ours 21/21, 4.4 MB/s; EbookLib 0.20 20/21 (no book title, no chapter titles), 5.7 MB/s, and
one more dependency (six) for ~60 lines of container/OPF/nav reading.

- ``META-INF/container.xml`` names the package document (OPF); its ``manifest`` maps ids to
  files and its ``spine`` gives the reading order (every ``itemref``, ``linear="no"`` included:
  it is still the book's text); a document the spine names again is read once (a spine naming
  one chapter 20,000 times held the parser 100 s), with a warning. Each spine item is decoded
  (``decode.py``: BOM, declared or detected encoding) and read by ``html.extract_html``, so every
  construct the HTML reader keeps (tables, lists, figures, alt text, ``details``, ...) is kept here.
- Chapter titles: from the EPUB 3 navigation document (``nav epub:type="toc"``) or else the
  EPUB 2 NCX (``navPoint``/``navLabel``); a chapter's title is the ``section`` prefix of its
  blocks ("Chapter 2 > A heading inside it"). A chapter without one keeps the heading path its
  own headings give. The book's title, when a chapter's ``<title>`` merely repeats it, is
  given once, as the first block.
- DRM: a ``META-INF/encryption.xml`` that encrypts content documents (not only fonts, which
  IDPF/Adobe font obfuscation mangles and which hold no text) → ``EncryptedDocumentError``.

Errors: ``ParseLimitError`` (ZIP limits, checked first; XML or HTML nesting limits),
``CorruptDocumentError`` (not a ZIP, no container or package document, an unreadable part),
``EncryptedDocumentError`` (DRM).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from urllib.parse import unquote

from lxml import etree

from shared.domain.errors import CorruptDocumentError, EncryptedDocumentError
from shared.domain.normalize import sanitize
from task_service.pipeline.decode import decode, sniff_html_charset
from task_service.pipeline.document import SECTION_SEPARATOR, Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers._shared.xmlzip import ZipPackage, local, parse_xml
from task_service.pipeline.readers.web.html import extract_html

_FONT_OBFUSCATION = frozenset({"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"})
_TEXT_TYPES = ("application/xhtml+xml", "text/html", "application/x-dtbook+xml")
_EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"


@dataclass(frozen=True)
class _Book:
    title: str
    spine: tuple[str, ...]  # ZIP entry names of the content documents, in reading order
    titles: dict[str, str]  # entry name → chapter title (first nav/NCX entry pointing at it)


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of an EPUB in spine order with chapter titles as sections, and warnings.

    Raises ``ParseLimitError``, ``CorruptDocumentError``, ``EncryptedDocumentError``.
    """
    with ZipPackage.open(data, limits, "EPUB") as archive:
        _refuse_drm(archive)
        book = _book(archive)
        blocks: list[Block] = [Block(book.title)] if book.title.strip() else []
        warnings: dict[str, None] = {}
        read_once: set[str] = set()
        repeated = 0
        for name in book.spine:
            if (entry := archive.entry(name) or name) in read_once:
                repeated += 1  # a spine that names one document again and again: read once
                continue
            read_once.add(entry)
            raw = archive.read(name)
            if raw is None:
                warnings[f"spine item {name!r} is missing from the package"] = None
                continue
            decoded = decode(raw, declared=sniff_html_charset(raw))
            parsed = extract_html(sanitize(decoded.text))
            blocks.extend(_chapter(parsed.blocks, book.titles.get(name), book.title))
            warnings.update(dict.fromkeys((*decoded.warnings, *parsed.warnings)))
    if repeated:
        warnings[f"{repeated:,} spine entries name a document already read (each read once)"] = None
    return ParsedDocument(tuple(blocks), tuple(warnings))


def _chapter(blocks: tuple[Block, ...], title: str | None, book_title: str) -> list[Block]:
    """A chapter's blocks with its title as section prefix; a leading ``<title>`` equal to the book's dropped."""
    out = list(blocks)
    if out and " ".join(out[0].text.split()) == " ".join(book_title.split()) and out[0].section is None:
        out = out[1:]
    if not title:
        return out
    prefixed = []
    for block in out:
        inner = block.section
        if inner is None or inner == title:
            section = title
        elif inner.split(SECTION_SEPARATOR, 1)[0] == title:
            section = inner
        else:
            section = title + SECTION_SEPARATOR + inner
        prefixed.append(Block.restated(block.text, section, block.page))
    return prefixed


def _refuse_drm(archive: ZipPackage) -> None:
    root = archive.xml("META-INF/encryption.xml")
    if root is None:
        return
    for data in root.iter("{*}EncryptedData"):
        method = next(data.iter("{*}EncryptionMethod"), None)
        algorithm = "" if method is None else method.get("Algorithm", "")
        reference = next(data.iter("{*}CipherReference"), None)
        uri = "" if reference is None else reference.get("URI", "")
        if algorithm not in _FONT_OBFUSCATION and not _is_font(uri):
            raise EncryptedDocumentError(
                f"the EPUB is DRM-protected (META-INF/encryption.xml encrypts {uri or 'its content'}); "
                "only DRM-free e-books can be read"
            )


def _is_font(uri: str) -> bool:
    return uri.lower().rsplit(".", 1)[-1] in {"ttf", "otf", "woff", "woff2", "ttc"}


def _book(archive: ZipPackage) -> _Book:
    container = archive.xml("META-INF/container.xml")
    if container is None:
        raise CorruptDocumentError("EPUB has no META-INF/container.xml: not an e-book package")
    rootfile = next(container.iter("{*}rootfile"), None)
    opf_name = "" if rootfile is None else unquote(rootfile.get("full-path", ""))
    opf = archive.xml(opf_name) if opf_name else None
    if opf is None:
        raise CorruptDocumentError(f"EPUB package document {opf_name!r} named by container.xml is missing")
    folder = posixpath.dirname(opf_name)
    items = {
        item.get("id", ""): (_resolve(folder, item.get("href", "")), item.get("media-type", ""),
                             item.get("properties", ""))
        for item in opf.iter("{*}item")
    }
    spine_el = next(opf.iter("{*}spine"), None)
    spine = tuple(
        items[ref.get("idref", "")][0]
        for ref in ([] if spine_el is None else spine_el.iter("{*}itemref"))
        if ref.get("idref", "") in items and items[ref.get("idref", "")][1] in _TEXT_TYPES
    )
    title = next(("".join(t.itertext()) for t in opf.iter("{http://purl.org/dc/elements/1.1/}title")), "")
    nav = next((href for href, _, props in items.values() if "nav" in props.split()), None)
    ncx_id = "" if spine_el is None else spine_el.get("toc", "")
    ncx = items.get(ncx_id, ("", "", ""))[0] or next(
        (href for href, media, _ in items.values() if media == "application/x-dtbncx+xml"), None
    )
    return _Book(title.strip(), spine, _titles(archive, nav, ncx))


def _titles(archive: ZipPackage, nav: str | None, ncx: str | None) -> dict[str, str]:
    """Entry name → the first table-of-contents label that points into it (EPUB 3 nav, else NCX)."""
    titles: dict[str, str] = {}
    if nav and (raw := archive.read(nav)) is not None:
        root = _lenient_xml(raw, nav)
        tocs = [n for n in root.iter("{*}nav") if n.get(_EPUB_TYPE, "") == "toc"] if root is not None else []
        for link in (tocs[0].iter("{*}a") if tocs else ()):
            _add_title(titles, nav, link.get("href", ""), "".join(link.itertext()))
    if not titles and ncx and (raw := archive.read(ncx)) is not None:
        root = _lenient_xml(raw, ncx)
        for point in (root.iter("{*}navPoint") if root is not None else ()):
            label = next(point.iter("{*}text"), None)
            content = next((c for c in point if local(c.tag) == "content"), None)
            if label is not None and content is not None:
                _add_title(titles, ncx, content.get("src", ""), "".join(label.itertext()))
    return titles


def _lenient_xml(raw: bytes, name: str) -> etree._Element | None:
    """A table of contents is an aid: a malformed one costs the chapter titles, not the book."""
    try:
        return parse_xml(raw, "EPUB", name)
    except CorruptDocumentError:
        return None


def _add_title(titles: dict[str, str], base: str, href: str, label: str) -> None:
    target = _resolve(posixpath.dirname(base), href.split("#", 1)[0])
    label = " ".join(label.split())
    if target and label and target not in titles:
        titles[target] = label


def _resolve(folder: str, href: str) -> str:
    if not href:
        return ""
    return posixpath.normpath(posixpath.join(folder, unquote(href))).lstrip("/")
