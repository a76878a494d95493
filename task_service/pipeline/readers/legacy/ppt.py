"""PowerPoint 97-2003 ``.ppt`` / ``.pot`` / ``.pps`` bytes → blocks per slide (our walker of [MS-PPT]; pure).

A presentation's text lies in two places of the ``PowerPoint Document`` stream, a tree of records
(8-byte header: version/instance, type, length; version 0xF = a container, [MS-PPT] 2.3.1):

- the DocumentContainer's ``SlideListWithTextContainer`` (type 0x0FF0, instance 0 = slides,
  2.4.14.3): per slide a ``SlidePersistAtom`` (0x03F3) then its placeholders' text as
  ``TextHeaderAtom`` (0x0F9F, the text type: title, body, ...) + ``TextCharsAtom`` (0x0FA0,
  UTF-16LE) or ``TextBytesAtom`` (0x0FA8, the low bytes of UTF-16: Latin-1). PowerPoint writes
  placeholder text there and refers to it from the shape (``OutlineTextRefAtom``, 0x0F9E);
- each ``SlideContainer`` (0x03EE): its drawing's shapes (OfficeArt ``SpContainer`` 0xF004) hold
  their own text in an ``OfficeArtClientTextbox`` (0xF00D) — text boxes, and every text of a file
  LibreOffice wrote — with the shape's position in its ``OfficeArtClientAnchor`` (0xF010).

Slides are found in presentation order through the persist directory ([MS-PPT] 2.1.2, 2.3.6):
``Current User`` → the last ``UserEditAtom`` (0x0FF5) → its chain of ``PersistDirectoryAtom``
(0x1772) → the DocumentContainer → each ``SlidePersistAtom``'s ``persistIdRef`` → the slide's
container, so a fast-saved file's superseded copies are not read. When that chain is broken the
slide containers are read in stream order. Master slides (their "Click to edit" prompts) are not read;
notes are (``NotesContainer`` 0x03F0 of each slide, through ``SlideAtom.notesIdRef``).

Each slide becomes blocks through ``slides.slide_blocks`` (title first, then shapes top to bottom,
left to right; notes last), ``page`` = the slide number, ``section`` = its title.

Errors: ``EncryptedDocumentError``, ``UnsupportedTypeError`` (another OLE kind),
``CorruptDocumentError`` (no ``PowerPoint Document`` stream), ``ParseLimitError`` (records nested
deeper than ``structured_max_depth``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from shared.domain.errors import CorruptDocumentError, ParseLimitError
from task_service.pipeline.document import Block, ParsedDocument
from task_service.pipeline.limits import ParseLimits
from task_service.pipeline.readers._shared.slides import Item, slide_blocks
from task_service.pipeline.readers.legacy._ole import open_compound, read_stream

__all__ = ["read"]

_DOCUMENT, _SLIDE, _NOTES, _SLIDE_ATOM = 0x03E8, 0x03EE, 0x03F0, 0x03EF
_SLWT, _SLIDE_PERSIST, _USER_EDIT, _PERSIST_DIR = 0x0FF0, 0x03F3, 0x0FF5, 0x1772
_TEXT_HEADER, _TEXT_CHARS, _TEXT_BYTES, _OUTLINE_REF = 0x0F9F, 0x0FA0, 0x0FA8, 0x0F9E
_SHAPE, _CLIENT_TEXTBOX, _CLIENT_ANCHOR = 0xF004, 0xF00D, 0xF010
_TITLE_TYPES = (0, 6)  # Tx_TYPE_TITLE, Tx_TYPE_CENTERTITLE ([MS-PPT] 2.13.33 TextTypeEnum)
_MAX_EDITS = 1_000  # UserEditAtom chain length read at most (a cycle ends there)


@dataclass(frozen=True, slots=True)
class _Record:
    type: int
    instance: int
    start: int  # offset of the body in the stream
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass
class _Text:
    text: str
    kind: int = 4  # TextHeaderAtom type; 4 = Tx_TYPE_OTHER


@dataclass
class _SlideRef:
    persist_id: int
    texts: list[_Text] = field(default_factory=list)


def read(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Blocks of every slide, with its notes (module docstring). Raises as the module docstring says."""
    with open_compound(data, "ppt") as ole:
        stream = read_stream(ole, "PowerPoint Document")
        user = read_stream(ole, "Current User")
    if not stream:
        raise CorruptDocumentError("PowerPoint file without a 'PowerPoint Document' stream")
    deck = _Deck(stream, limits.structured_max_depth)
    blocks: list[Block] = []
    for number, (items, notes) in enumerate(deck.slides(user), start=1):
        blocks += slide_blocks(number, items, notes)
    return ParsedDocument(tuple(blocks))


class _Deck:
    """The record tree of one ``PowerPoint Document`` stream."""

    def __init__(self, stream: bytes, max_depth: int) -> None:
        self.stream = stream
        self.max_depth = max_depth

    def children(self, start: int, end: int) -> Iterator[_Record]:
        """The records directly inside ``[start, end)``; a record running past ``end`` ends the walk."""
        pos = start
        while pos + 8 <= end:
            ver_inst, rtype, length = struct.unpack_from("<HHI", self.stream, pos)
            body_end = pos + 8 + length
            if body_end > end:
                return
            yield _Record(rtype, ver_inst >> 4, pos + 8, body_end)
            pos = body_end

    def walk(self, rec: _Record, depth: int = 0) -> Iterator[_Record]:
        """Every record under container ``rec``, depth first, in stream order."""
        if depth > self.max_depth:
            raise ParseLimitError(f"PowerPoint records nest deeper than {self.max_depth} (STRUCTURED_MAX_DEPTH)")
        for child in self.children(rec.start, rec.end):
            yield child
            if self.is_container(child):
                yield from self.walk(child, depth + 1)

    def is_container(self, rec: _Record) -> bool:
        return rec.start >= 8 and self.stream[rec.start - 8] & 0x0F == 0x0F

    def at(self, offset: int) -> _Record | None:
        """The record whose header starts at ``offset``, if it fits in the stream."""
        return next(self.children(offset, len(self.stream)), None) if 0 <= offset < len(self.stream) else None

    def text(self, rec: _Record) -> str:
        """A text atom's text, its paragraph (``\\r``) and line (``\\v``) breaks as ``\\n``; a lone
        ``*`` (the placeholder PowerPoint stores for a slide-number or date field) as ``""``."""
        body = self.stream[rec.start : rec.end]
        text = body.decode("utf-16-le", errors="replace") if rec.type == _TEXT_CHARS else body.decode("latin-1")
        text = text.replace("\r", "\n").replace("\v", "\n")
        return "" if text.strip() == "*" else text

    def u32(self, rec: _Record, offset: int) -> int:
        if rec.length < offset + 4:
            return -1
        return int(struct.unpack_from("<I", self.stream, rec.start + offset)[0])

    # --- slide order --------------------------------------------------------------------------
    def slides(self, user: bytes) -> Iterator[tuple[list[Item], list[str]]]:
        """Per slide in presentation order: its shapes' texts and its notes."""
        persist, doc_ref = self.persist_directory(user)
        document = self.at(persist.get(doc_ref, -1))
        if document is None or document.type != _DOCUMENT:  # no persist directory: slides in stream order
            top = _Record(-1, 0, 0, len(self.stream))
            for rec in self.walk(top):
                if rec.type == _SLIDE:
                    yield self.shapes(rec, []), []
            return
        refs, notes_refs = self.slide_lists(document)
        notes_by_id = {slide_id: ref for slide_id, ref in notes_refs}
        for ref in refs:
            container = self.at(persist.get(ref.persist_id, -1))
            if container is None or container.type != _SLIDE:
                yield [Item((0.0, float(i)), [t.text], t.kind in _TITLE_TYPES) for i, t in enumerate(ref.texts)], []
                continue
            notes_ref = notes_by_id.get(self.notes_id(container))
            notes_container = None if notes_ref is None else self.at(persist.get(notes_ref.persist_id, -1))
            notes: list[str] = [t.text for t in notes_ref.texts] if notes_ref else []
            if notes_container is not None and notes_container.type == _NOTES:
                notes += [t for item in self.shapes(notes_container, []) for t in item.texts if t not in notes]
            yield self.shapes(container, ref.texts), notes

    def persist_directory(self, user: bytes) -> tuple[dict[int, int], int]:
        """persistId → stream offset (the newest edit wins, [MS-PPT] 2.3.6), and the persistId of the
        DocumentContainer; ({}, -1) when unreadable."""
        if len(user) < 20:
            return {}, -1
        offset = struct.unpack_from("<I", user, 16)[0]  # CurrentUserAtom.offsetToCurrentEdit
        out: dict[int, int] = {}
        seen: set[int] = set()
        doc_ref = -1
        for _ in range(_MAX_EDITS):
            edit = self.at(offset)
            if edit is None or edit.type != _USER_EDIT or offset in seen:
                break
            seen.add(offset)
            if doc_ref < 0:
                doc_ref = self.u32(edit, 16)  # UserEditAtom.docPersistIdRef of the newest edit
            directory = self.at(self.u32(edit, 12))
            if directory is not None and directory.type == _PERSIST_DIR:
                for pid, pos in self.directory_entries(directory):
                    out.setdefault(pid, pos)
            offset = self.u32(edit, 8)  # offsetLastEdit; 0 = the first edit
            if offset <= 0:
                break
        return out, doc_ref

    def directory_entries(self, rec: _Record) -> Iterator[tuple[int, int]]:
        pos = rec.start
        while pos + 4 <= rec.end:
            head = struct.unpack_from("<I", self.stream, pos)[0]
            first, count = head & 0xFFFFF, head >> 20
            pos += 4
            for i in range(count):
                if pos + 4 > rec.end:
                    return
                yield first + i, struct.unpack_from("<I", self.stream, pos)[0]
                pos += 4

    def slide_lists(self, document: _Record) -> tuple[list[_SlideRef], list[tuple[int, _SlideRef]]]:
        """The slides' and the notes' SlidePersistAtoms with the texts that follow each."""
        slides: list[_SlideRef] = []
        notes: list[tuple[int, _SlideRef]] = []
        for lst in self.children(document.start, document.end):
            if lst.type != _SLWT or lst.instance not in (0, 2):
                continue
            current: _SlideRef | None = None
            kind = 4
            for rec in self.children(lst.start, lst.end):
                if rec.type == _SLIDE_PERSIST:
                    current = _SlideRef(self.u32(rec, 0))
                    if lst.instance == 0:
                        slides.append(current)
                    else:
                        notes.append((self.u32(rec, 12), current))  # SlidePersistAtom.slideId
                elif rec.type == _TEXT_HEADER:
                    kind = self.u32(rec, 0)
                elif rec.type in (_TEXT_CHARS, _TEXT_BYTES) and current is not None and (text := self.text(rec)):
                    current.texts.append(_Text(text, kind))
        return slides, notes

    def notes_id(self, slide: _Record) -> int:
        atom = next((r for r in self.children(slide.start, slide.end) if r.type == _SLIDE_ATOM), None)
        return -1 if atom is None else self.u32(atom, 16)  # SlideAtom.notesIdRef

    # --- shapes -------------------------------------------------------------------------------
    def shapes(self, container: _Record, outline: list[_Text]) -> list[Item]:
        """The text of every shape of a slide or notes container, with its position; ``outline``:
        the slide's texts in the SlideListWithText (referred to by index, the rest appended)."""
        items: list[Item] = []
        used: set[int] = set()
        for rec in self.walk(container):
            if rec.type == _SHAPE:
                item = self.shape(rec, outline, used, len(items))
                if item is not None:
                    items.append(item)
        for i, t in enumerate(outline):
            if i not in used:
                items.append(Item((1e9, float(i)), [t.text], t.kind in _TITLE_TYPES))
        return items

    def shape(self, shape: _Record, outline: list[_Text], used: set[int], ordinal: int) -> Item | None:
        position = (1e9 - 1, float(ordinal))
        texts: list[str] = []
        title = False
        for rec in self.children(shape.start, shape.end):
            if rec.type == _CLIENT_ANCHOR:
                position = self.anchor(rec) or position
            elif rec.type == _CLIENT_TEXTBOX:
                kind = 4
                for atom in self.children(rec.start, rec.end):
                    if atom.type == _TEXT_HEADER:
                        kind = self.u32(atom, 0)
                    elif atom.type in (_TEXT_CHARS, _TEXT_BYTES) and (text := self.text(atom)):
                        texts.append(text)
                        title |= kind in _TITLE_TYPES
                    elif atom.type == _OUTLINE_REF and 0 <= (index := self.u32(atom, 0)) < len(outline):
                        used.add(index)
                        texts.append(outline[index].text)
                        title |= outline[index].kind in _TITLE_TYPES
        return Item(position, texts, title) if texts else None

    def anchor(self, rec: _Record) -> tuple[float, float] | None:
        """(top, left) of an OfficeArtClientAnchor: 8 bytes of int16 or 16 bytes of int32."""
        if rec.length == 8:
            top, left = struct.unpack_from("<hh", self.stream, rec.start)
        elif rec.length == 16:
            top, left = struct.unpack_from("<ii", self.stream, rec.start)
        else:
            return None
        return float(top), float(left)
