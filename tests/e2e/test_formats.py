"""Every format of the registry, end to end: upload → worker → chunks → search.

* The handed inputs (``../shared/cases/formats``): accepted, INDEXED, every marker in a chunk as a
  word of its own and found in the top 5 of a default (hybrid) search for the sentence around it.
* One generated file of every other new kind (its fidelity corpus' first sample): INDEXED with
  every marker word it must hold, a couple of them found by search.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.e2e.conftest import WorkerFactory
from tests.fidelity import Sample
from tests.support import CASES as SHARED_CASES
from tests.support import Api

CASES = SHARED_CASES / "formats"
HANDED: dict[str, tuple[str, ...]] = {
    "speaker-notes-and-groups.pptx": ("Corvalline", "Duskmarrow", "Wistlecombe", "Ambergrove"),
    "two-sheets.xlsx": ("Hollowmere", "Pennywhistle"),
    "half-scanned.pdf": ("Gorsefield", "Rookhaven"),
}
#: Searched for in each generated kind (the rest are only checked to be in the chunks).
SEARCHED_PER_KIND = 2


def _sentence_around(content: str, marker: str, words: int = 8) -> str:
    """Up to ``words`` words either side of ``marker`` in ``content`` (the chunk that holds it)."""
    at = content.index(marker)
    before = content[:at].split()[-words:]
    after = content[at + len(marker):].split()[:words]
    return " ".join([*before, marker, *after])


def _holder(chunks: list[dict[str, object]], marker: str, *, word: bool = True) -> str | None:
    """The first chunk holding ``marker`` (as a word of its own when ``word``: a generated corpus also
    has markers glued to their neighbours on purpose, e.g. "italRTFJOINMARK")."""
    pattern = re.compile(rf"(?<![^\W_]){re.escape(marker)}(?![^\W_])" if word else re.escape(marker))
    return next((str(c["content"]) for c in chunks if pattern.search(str(c["content"]))), None)


def _assert_found(api: Api, kb: int, chunks: list[dict[str, object]], markers: tuple[str, ...],
                  searched: int | None = None) -> None:
    for i, marker in enumerate(markers):
        holder = _holder(chunks, marker, word=searched is None)
        assert holder is not None, f"{marker} is not in any chunk" + (" as a word" if searched is None else "")
        if searched is not None and i >= searched:
            continue
        query = _sentence_around(holder, marker)
        hits = api.search(kb, query, top_k=5)
        assert any(marker in h["content"] for h in hits), (marker, query, [h["content"][:80] for h in hits])


def _first(samples: Callable[[], list[Sample]]) -> Callable[[], Sample]:
    return lambda: samples()[0]


def _generated() -> dict[str, Callable[[], Sample]]:
    from tests.fidelity import docs_corpus, kept_corpus, mail_corpus, odp_corpus, pptx_corpus, sheet_corpus

    out: dict[str, Callable[[], Sample]] = {
        "pptx": _first(pptx_corpus.samples),
        "odp": _first(odp_corpus.samples),
        "eml": _first(mail_corpus.eml_samples),
        "msg": _first(mail_corpus.msg_samples),
        "xlsx": _first(sheet_corpus.xlsx_samples),
        "ods": _first(sheet_corpus.ods_samples),
        "csv": _first(sheet_corpus.csv_samples),
    }
    for kind in docs_corpus.KINDS:
        out[kind] = _first(lambda kind=kind: docs_corpus.samples(kind))  # type: ignore[misc]
    for kind in kept_corpus.KINDS:  # issue 29: legacy Office, markup, code, configuration, logs
        out[kind] = _first(lambda kind=kind: kept_corpus.samples(kind))  # type: ignore[misc]
    return out


def _scans() -> dict[str, tuple[str, bytes, tuple[str, ...], tuple[str, ...]]]:
    """An image, a scanned PDF and a half-scanned PDF, rendered from known text (OCR)."""
    from tests.fidelity import kept_corpus
    from tests.support import ocrgen
    from tests.support.pdfgen import text_page

    page = ocrgen.degrade(ocrgen.language_page("eng", 200))
    quillmoor = ocrgen.page_image(("The Quillmoor depot closes at six.",), 200)
    heic = kept_corpus.heic_sample()
    return {
        "image png": ("notice.png", ocrgen.png_bytes(page), ("Rookhaven", "drainage"), ()),
        "image heic": (heic.filename, heic.data, heic.must, ()),
        "scanned pdf": ("scan.pdf", ocrgen.scanned_pdf([page, quillmoor]), ("Rookhaven", "Quillmoor"), ()),
        "half-scanned pdf": ("half.pdf", ocrgen.scanned_pdf([text_page("The Gantrell ferry sails at noon"), quillmoor]),
                             ("Gantrell", "Quillmoor"), ()),
        **_scans_issue_29(),
    }


def _scans_issue_29() -> dict[str, tuple[str, bytes, tuple[str, ...], tuple[str, ...]]]:
    """Scanned tables with coloured cells, a ~100 dpi phone photo, Korean and Japanese pages, and
    pictures of text as the only content of a PDF page (8 % of it), a slide and a sheet."""
    import io

    from tests.support import ocrgen

    photo = io.BytesIO()
    ocrgen.photo_page(100).save(photo, "JPEG", quality=90)
    notice = ocrgen.text_picture(("The Tamberlyn depot closes at six.", "Ask for Mr Ostrowick at the gate."))
    return {
        "scanned table png": ("table.png", ocrgen.png_bytes(ocrgen.degrade_colour(ocrgen.table_page(200))),
                              ("Brantwick", "Kasprzak"), ()),
        "photo jpg": ("photo.jpg", photo.getvalue(), ("Rookhaven", "Ostrava"), ()),
        "korean png": ("notice-ko.png", ocrgen.png_bytes(ocrgen.degrade(ocrgen.language_page("kor", 200))),
                       ("도서관", "열람실"), ()),
        "japanese png": ("notice-ja.png", ocrgen.png_bytes(ocrgen.degrade(ocrgen.language_page("jpn", 200))),
                         ("図書館", "閲覧室"), ()),
        "picture on 8 % of a pdf page": ("notice.pdf", ocrgen.pdf_with_picture(notice), ("Tamberlyn", "Ostrowick"), ()),
        "picture-only slide pptx": ("notice.pptx", ocrgen.pptx_with_picture(notice), ("Tamberlyn", "Ostrowick"), ()),
        "picture on a sheet xlsx": ("notice.xlsx", ocrgen.xlsx_with_picture(notice), ("Tamberlyn", "Ostrowick"), ()),
        "text with stray nul bytes txt": ("build.log.txt", _stray_nuls(), ("Varnholt", "Quenbury"), ()),
        "words in angle brackets txt": ("howto.txt", b"How to log in\n\nType <Zephyrine> as the user name, then\n"
                                        b"call List<Brackwater> from the template.\n", ("Zephyrine", "Brackwater"), ()),
        **_misnamed(),
    }


def _misnamed() -> dict[str, tuple[str, bytes, tuple[str, ...], tuple[str, ...]]]:
    """Files whose bytes are another format than their name says: read as what they are (issue 29)."""
    from tests.fidelity import docx_corpus, pptx_corpus
    from tests.support import ocrgen
    from tests.support.pdfgen import text_page

    docx, pptx = docx_corpus.samples()[0], pptx_corpus.samples()[0]
    pdf = ocrgen.scanned_pdf([text_page("The Harrowgate ferry sails at noon")])
    return {
        "docx named .doc": ("minutes.doc", docx.data, docx.must[:2], ()),
        "pptx named .ppt": ("deck.ppt", pptx.data, pptx.must[:2], ()),
        "pdf named .txt": ("ferry.txt", pdf, ("Harrowgate",), ()),
    }


def _stray_nuls() -> bytes:
    """A log with a NUL per line and a zeroed 4 KiB block (a crash): text, its NULs removed (issue 29)."""
    lines = b"".join(b"Release %03d of the Varnholt build passed its checks.\x00\n" % i for i in range(60))
    return lines + b"\x00" * 4096 + b"The Quenbury mirror took over after the crash.\n"


def _uploads() -> dict[str, tuple[str, bytes, tuple[str, ...], tuple[str, ...]]]:
    """label → (file name, bytes, markers that must be found, markers that must not be indexed)."""
    out = {f"generated {kind}": (s.filename, s.data, s.must, s.must_not)
           for kind, make in sorted(_generated().items()) for s in (make(),)}
    out |= _scans()
    if CASES.is_dir():
        out |= {f"handed {name}": (name, (CASES / name).read_bytes(), markers, ()) for name, markers in HANDED.items()}
    return out


def test_every_format_is_indexed_and_found(api: Api, workers: WorkerFactory) -> None:
    """One worker, one KB per file (a clean top 5); every failure listed at once."""
    uploads = _uploads()
    workers()
    started = {label: (kb := api.create_kb(f"format-{i}"), api.upload(kb, name=name, data=data)["document_id"])
               for i, (label, (name, data, _, _)) in enumerate(uploads.items())}
    failures: dict[str, str] = {}
    for label, (kb, document_id) in started.items():
        _, _, must, must_not = uploads[label]
        doc = api.wait_terminal(document_id)
        if doc["status"] != "INDEXED":
            failures[label] = f"{doc['status']} {doc['error_code']}: {doc['error_message']}"
            continue
        chunks = api.chunks(document_id)
        text = "\n".join(str(c["content"]) for c in chunks)
        try:
            assert not [m for m in must_not if m in text], "indexed what must not be"
            searched = None if label.startswith("handed") else SEARCHED_PER_KIND
            _assert_found(api, kb, chunks, must, searched=searched)
        except AssertionError as exc:
            failures[label] = str(exc)[:400]
    assert failures == {}
