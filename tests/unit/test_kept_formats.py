"""The formats people keep (issue 29), through the dispatch: every marker of the generated corpus
(``tests/fidelity/kept_corpus.py``) comes out, with its section, under the registry's reader."""

from __future__ import annotations

import pytest

from shared.domain import formats
from shared.domain.errors import EncryptedDocumentError
from task_service.pipeline.parse import parse_document
from tests.fidelity import kept_corpus
from tests.fidelity.legacy_writer import make_doc, make_ppt


@pytest.mark.parametrize("kind", kept_corpus.KINDS)
def test_every_marker_and_section(kind: str) -> None:
    (sample,) = kept_corpus.samples(kind)
    assert formats.by_extension(formats.extension(sample.filename)).kind == kind  # type: ignore[union-attr]
    parsed = parse_document(sample.data, sample.filename)
    text = parsed.text
    assert [m for m in sample.must if m not in text] == []
    assert [m for m in sample.must_not if m in text] == []
    for marker, section in sample.sections.items():
        assert any(marker in b.text and b.section == section for b in parsed.blocks), (marker, section)


@pytest.mark.parametrize(("name", "data"), [("secret.doc", make_doc(["x"], encrypted=True)),
                                            ("secret.ppt", make_ppt([("t", "b", "x", "n")], encrypted=True))])
def test_password_protected_legacy_files_stay_encrypted(name: str, data: bytes) -> None:
    with pytest.raises(EncryptedDocumentError) as info:
        parse_document(data, name)
    assert info.value.error_code == "encrypted"


def test_templates_are_read_like_their_documents() -> None:
    data = make_doc(["Template body DOTMARK"])
    assert "DOTMARK" in parse_document(data, "letter.dot").text
    assert formats.by_extension("xlt").kind == "xls" and formats.by_extension("pot").kind == "ppt"  # type: ignore[union-attr]


def test_heic_photo_is_read_like_any_image() -> None:
    sample = kept_corpus.heic_sample()
    assert formats.by_extension("heic").kind == "image"  # type: ignore[union-attr]
    text = parse_document(sample.data, sample.filename).text
    assert [m for m in sample.must if m not in text] == []
