"""Filled form fields and annotation text of a PDF page, as lines to index (PDFium, caller holds the lock).

A page's text layer (``FPDFText_LoadPage``) holds only its content stream: the value a user typed
into an AcroForm field lives in the field's ``/V`` and the widget's appearance stream, the text of
a FreeText annotation or of a sticky note in its ``/Contents``. Each is indexed once, on its page:

- a filled field as ``"<name>: <value>"``, the name being the field's ``/TU`` (the name shown to
  users) or else its fully qualified ``/T``; check boxes and radio buttons only when on (their
  export value, "Yes" or the chosen option), push buttons and signatures never;
- a FreeText annotation as its text; a Text annotation (a sticky note) as ``"Note: <text>"``
  (``"Note (<author>): <text>"`` with a ``/T``);
- not when the page's own text inside the annotation's rectangle already says it (a flattened
  form keeps the widget but draws the value into the page), nor twice in a document (a field
  with a widget on every page).

Field values need PDFium's form environment (``PdfDocument.init_forms``, before any page is
loaded): ``open_forms`` does that when the document has an AcroForm.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

_SKIPPED_FIELDS = {pdfium_c.FPDF_FORMFIELD_PUSHBUTTON, pdfium_c.FPDF_FORMFIELD_SIGNATURE,
                   pdfium_c.FPDF_FORMFIELD_UNKNOWN}
_TOGGLES = {pdfium_c.FPDF_FORMFIELD_CHECKBOX, pdfium_c.FPDF_FORMFIELD_RADIOBUTTON}
_XFA = {pdfium_c.FORMTYPE_XFA_FULL, pdfium_c.FORMTYPE_XFA_FOREGROUND}


def open_forms(pdf: pdfium.PdfDocument) -> tuple[str, ...]:
    """Start PDFium's form environment when ``pdf`` has a form (before loading pages); warnings
    for what stays out (the dynamic part of an XFA form)."""
    kind = pdfium_c.FPDF_GetFormType(pdf.raw)
    if kind == pdfium_c.FORMTYPE_NONE:
        return ()
    pdf.init_forms()
    if kind in _XFA:
        return ("the PDF is an XFA form: only its AcroForm fields are indexed, not the XFA form's own content",)
    return ()


def page_annotations(pdf: pdfium.PdfDocument, page: pdfium.PdfPage, textpage: pdfium.PdfTextPage,
                     seen: set[str]) -> list[str]:
    """Lines for the filled fields and annotation text of ``page`` (module docstring), skipping
    what ``textpage`` shows inside the annotation and what is in ``seen``; both go into ``seen``."""
    form = pdf.formenv.raw if pdf.formenv is not None else None
    lines: list[str] = []
    for index in range(pdfium_c.FPDFPage_GetAnnotCount(page.raw)):
        annot = pdfium_c.FPDFPage_GetAnnot(page.raw, index)
        if not annot:
            continue
        try:
            text, value = _annotation_text(form, annot)
            if text and text not in seen:
                seen.add(text)
                if not _shown(textpage, annot, value):
                    lines.append(text)
        finally:
            pdfium_c.FPDFPage_CloseAnnot(annot)
    return lines


def _annotation_text(form: object, annot: object) -> tuple[str, str]:
    """``(line to index, the value itself)``; ``("", "")`` for an annotation with nothing to index."""
    subtype = pdfium_c.FPDFAnnot_GetSubtype(annot)
    if subtype == pdfium_c.FPDF_ANNOT_WIDGET and form is not None:
        return _field_text(form, annot)
    if subtype == pdfium_c.FPDF_ANNOT_FREETEXT:
        contents = _clean(_string_value(annot, b"Contents"))
        return contents, contents
    if subtype == pdfium_c.FPDF_ANNOT_TEXT:
        contents = _clean(_string_value(annot, b"Contents"))
        author = _clean(_string_value(annot, b"T"))
        label = f"Note ({author})" if author else "Note"
        return (f"{label}: {contents}", contents) if contents else ("", "")
    return "", ""


def _field_text(form: object, annot: object) -> tuple[str, str]:
    kind = pdfium_c.FPDFAnnot_GetFormFieldType(form, annot)
    if kind in _SKIPPED_FIELDS or (kind in _TOGGLES and not pdfium_c.FPDFAnnot_IsChecked(form, annot)):
        return "", ""
    value = _clean(_utf16(pdfium_c.FPDFAnnot_GetFormFieldValue, form, annot))
    if not value or value == "Off":
        return "", ""
    name = _clean(_utf16(pdfium_c.FPDFAnnot_GetFormFieldAlternateName, form, annot))
    name = name or _clean(_utf16(pdfium_c.FPDFAnnot_GetFormFieldName, form, annot))
    return (f"{name}: {value}" if name else value), value


def _shown(textpage: pdfium.PdfTextPage, annot: object, value: str) -> bool:
    """Whether the page's own text inside the annotation's rectangle (1 pt wider) contains ``value``."""
    rect = pdfium_c.FS_RECTF()
    if not pdfium_c.FPDFAnnot_GetRect(annot, rect):
        return False
    left, right = sorted((rect.left, rect.right))
    bottom, top = sorted((rect.bottom, rect.top))
    inside = textpage.get_text_bounded(left - 1, bottom - 1, right + 1, top + 1)
    return _folded(value) in _folded(inside)


def _string_value(annot: object, key: bytes) -> str:
    return _utf16(lambda buf, size: pdfium_c.FPDFAnnot_GetStringValue(annot, key, buf, size))


def _utf16(getter: Callable[..., int], *args: object) -> str:
    """A PDFium string getter's UTF-16LE result (asked twice: its length, then its bytes)."""
    size = getter(*args, None, 0)
    if size <= 2:
        return ""
    buffer = ctypes.create_string_buffer(size)
    getter(*args, ctypes.cast(buffer, ctypes.POINTER(pdfium_c.FPDF_WCHAR)), size)
    return buffer.raw[: size - 2].decode("utf-16-le", errors="replace")


def _clean(text: str) -> str:
    """Line ends made ``\\n``, surrounding whitespace dropped."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()
