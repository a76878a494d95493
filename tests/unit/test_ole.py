"""shared.domain.ole over compound files built here (tests/fidelity/cfb_writer.py)."""

from __future__ import annotations

import io
import struct

import olefile
import pytest

from shared.domain.errors import CorruptDocumentError, EncryptedDocumentError, UnsupportedTypeError
from shared.domain.ole import classify_ole, is_ole, refusal
from tests.fidelity.cfb_writer import write_cfb

BIG = 5000  # over the 4,096-byte mini-stream cutoff: the stream lives in regular sectors


def fib(flags: int = 0, ident: int = 0xA5EC, size: int = BIG) -> bytes:
    """A WordDocument stream: FIB base wIdent, nFib, unused, lid, pnNext, then the flags word."""
    head = struct.pack("<HHHHHH", ident, 0x00C1, 0, 0x0409, 0, flags)
    return head + b"\0" * (size - len(head))


def record(rtype: int, body: bytes = b"") -> bytes:
    return struct.pack("<HH", rtype, len(body)) + body


BOF = record(0x0809, struct.pack("<HHHHII", 0x0600, 0x0005, 0x0DBB, 0x07CC, 0, 0))
FILEPASS = record(0x002F, struct.pack("<HHH", 1, 1, 1) + b"\x11" * 48)
EOF_ = record(0x000A)


def workbook(*records: bytes, size: int = BIG) -> bytes:
    data = b"".join(records)
    return data + b"\0" * max(0, size - len(data))


def current_user(token: int) -> bytes:
    """CurrentUserAtom: record header (recType 0x0FF6), size 20, headerToken, offsets..."""
    return struct.pack("<HHI", 0, 0x0FF6, 28) + struct.pack("<II", 20, token) + b"\0" * 20


def doc(**kw: int) -> bytes:
    return write_cfb({"WordDocument": fib(**kw), "1Table": b"\0" * 600, "\x05SummaryInformation": b"s" * 200})


@pytest.mark.parametrize(
    ("streams", "kind"),
    [
        ({"WordDocument": fib(), "1Table": b"\0" * 600}, "doc"),
        ({"WordDocument": fib(size=300), "0Table": b"\0" * 10}, "doc"),  # in the mini stream
        ({"Workbook": workbook(BOF, EOF_), "\x05SummaryInformation": b"s" * 100}, "xls"),
        ({"Book": workbook(BOF, EOF_, size=200)}, "xls"),
        ({"PowerPoint Document": b"\0" * BIG, "Current User": current_user(0xE391C05F)}, "ppt"),
        ({"__substg1.0_0037001F": "Subject".encode("utf-16-le"), "__properties_version1.0": b"\0" * 32}, "msg"),
        ({"__nameid_version1.0/__substg1.0_00020102": b"\0" * 16, "__substg1.0_1000001F": b"x" * 10}, "msg"),
        ({"EncryptionInfo": b"\x04\x00\x04\x00" + b"\0" * 200, "EncryptedPackage": b"\x99" * BIG,
          "\x06DataSpaces/Version": b"\0" * 76}, "encrypted_ooxml"),
        ({"VisioDocument": b"\0" * BIG}, "unknown_ole"),
        ({"Data": b""}, "unknown_ole"),
    ],
)
def test_kinds(streams: dict[str, bytes], kind: str) -> None:
    assert classify_ole(write_cfb(streams)) == kind


def test_encryption_info_alone_is_not_encrypted_ooxml() -> None:
    assert classify_ole(write_cfb({"EncryptionInfo": b"\0" * 10})) == "unknown_ole"


def test_doc_fencrypted_bit() -> None:
    assert classify_ole(doc()) == "doc"
    assert classify_ole(doc(flags=0x0100)) == "encrypted"
    assert classify_ole(doc(flags=0x8100)) == "encrypted"  # XOR-obfuscated: fEncrypted + fObfuscated
    assert classify_ole(doc(flags=0xFEFF)) == "doc"  # every other flag set
    assert classify_ole(doc(flags=0x0100, ident=0x1234)) == "doc"  # not a FIB: the bit means nothing


@pytest.mark.parametrize(
    ("stream", "kind"),
    [
        (workbook(BOF, FILEPASS, EOF_), "encrypted"),
        (workbook(BOF, record(0x0086), FILEPASS, EOF_), "encrypted"),  # WRITEPROT before FILEPASS
        (workbook(BOF, record(0x0086), EOF_, FILEPASS), "xls"),  # after the globals' EOF: not ours
        (workbook(record(0x0001), FILEPASS), "xls"),  # no BOF first: not a BIFF stream
        (workbook(BOF, FILEPASS, EOF_, size=100), "encrypted"),  # in the mini stream
        # FILEPASS past the first 512-byte sector: the sector chain is followed
        (workbook(BOF, record(0x00E1, b"\0" * 1500), record(0x0042, b"\0" * 2), FILEPASS, EOF_), "encrypted"),
        (workbook(BOF, record(0x00E1, b"\0" * 8200), FILEPASS, size=20000), "xls"),  # past the 8 KiB read
    ],
)
def test_xls_filepass(stream: bytes, kind: str) -> None:
    assert classify_ole(write_cfb({"Workbook": stream})) == kind


def test_chain_is_followed_not_assumed_contiguous() -> None:
    # two big streams: the Workbook's sectors come after another stream's, so its start is not sector 0
    data = write_cfb({"Aaaa": b"\1" * BIG, "Workbook": workbook(BOF, record(0x00E1, b"\0" * 700), FILEPASS, EOF_)})
    ole = olefile.OleFileIO(io.BytesIO(data))
    assert next(k for k in ole.root.kids if k.name == "Workbook").isectStart > 0
    assert classify_ole(data) == "encrypted"


@pytest.mark.parametrize(
    ("streams", "kind"),
    [
        ({"PowerPoint Document": b"\0" * BIG, "Current User": current_user(0xF3D1C4DF)}, "encrypted"),
        ({"PowerPoint Document": b"\0" * BIG, "Current User": current_user(0xE391C05F),
          "EncryptedSummary": b"\0" * 50}, "encrypted"),
        ({"PowerPoint Document": b"\0" * BIG, "Current User": b"\0" * 8}, "ppt"),  # too short to hold a token
        ({"PowerPoint Document": b"\0" * BIG}, "ppt"),
    ],
)
def test_ppt_encryption(streams: dict[str, bytes], kind: str) -> None:
    assert classify_ole(write_cfb(streams)) == kind


@pytest.mark.parametrize(
    ("streams", "error", "words"),
    [
        ({"WordDocument": fib()}, UnsupportedTypeError, ["a Word 97-2003 document", "upload it named .doc"]),
        ({"Workbook": workbook(BOF, EOF_)}, UnsupportedTypeError, ["an Excel 97-2003 workbook", "named .xls"]),
        ({"PowerPoint Document": b"\0" * BIG}, UnsupportedTypeError, ["PowerPoint 97-2003", "upload it named .ppt"]),
        ({"WordDocument": fib(flags=0x0100)}, EncryptedDocumentError, ["a Word 97-2003 document, password-protected"]),
        ({"Workbook": workbook(BOF, FILEPASS)}, EncryptedDocumentError, ["Excel 97-2003 workbook, password"]),
        ({"EncryptionInfo": b"\0" * 8, "EncryptedPackage": b"\0" * 8}, EncryptedDocumentError, ["password"]),
        ({"Contents": b"\0" * 8}, UnsupportedTypeError, ["OLE compound file", ".docx"]),
    ],
)
def test_refusal_messages(streams: dict[str, bytes], error: type[Exception], words: list[str]) -> None:
    err = refusal(write_cfb(streams))
    assert type(err) is error
    for word in words:
        assert word in str(err)


def test_refusal_codes_and_msg_is_read() -> None:
    assert refusal(write_cfb({"__substg1.0_0037001F": b"S\0"})) is None
    enc = refusal(doc(flags=0x0100))
    plain = refusal(doc())
    assert enc is not None and enc.error_code == "encrypted"
    assert plain is not None and plain.error_code == "unsupported_type"


@pytest.mark.parametrize(
    "data",
    [
        b"PK\x03\x04not ole",
        b"",
        bytes.fromhex("D0CF11E0A1B11AE1"),  # the signature alone (short bytes must not be a file name)
        bytes.fromhex("D0CF11E0A1B11AE1") + b"\0" * 2000,  # a header of zeros
        doc()[:700],  # truncated: directory and FAT gone
    ],
)
def test_not_a_readable_compound_file(data: bytes) -> None:
    with pytest.raises(CorruptDocumentError):
        classify_ole(data)


def test_stream_pointing_past_the_end_is_corrupt() -> None:
    data = bytearray(write_cfb({"WordDocument": fib()}))
    ole = olefile.OleFileIO(io.BytesIO(bytes(data)))
    sid = next(k for k in ole.root.kids if k.name == "WordDocument").sid
    first_dir = struct.unpack_from("<I", data, 48)[0]
    start_at = 512 + first_dir * 512 + sid * 128 + 116
    struct.pack_into("<I", data, start_at, 4000)  # sector 4000 is far past the end
    with pytest.raises(CorruptDocumentError):
        classify_ole(bytes(data))


def test_is_ole() -> None:
    assert is_ole(doc())
    assert not is_ole(b"PK\x03\x04")


def test_writer_round_trip_nested_storages_and_sizes() -> None:
    streams = {f"s{i}": bytes([i]) * (i * 311) for i in range(1, 30)}
    streams["a/b/c"] = b"deep"
    streams["a/x"] = b"y" * 4096
    ole = olefile.OleFileIO(io.BytesIO(write_cfb(streams)), raise_defects=olefile.DEFECT_POTENTIAL)
    for name, data in streams.items():
        assert ole.openstream(name).read() == data
    assert ole.get_type("a/b") == olefile.STGTY_STORAGE


def test_writer_rejects_bad_names() -> None:
    with pytest.raises(ValueError):
        write_cfb({"x" * 32: b""})
    with pytest.raises(ValueError):
        write_cfb({"a": b"1", "a/b": b"2"})


def test_legacy_readers_check_the_kind_first() -> None:
    """The legacy readers (``readers/legacy``) answer from the compound file's kind before reading."""
    from task_service.pipeline.limits import ParseLimits
    from task_service.pipeline.readers.legacy import doc, xls

    with pytest.raises(EncryptedDocumentError, match="password-protected"):
        doc.read(write_cfb({"EncryptionInfo": b"\0" * 8, "EncryptedPackage": b"\0" * 8}), ParseLimits())
    with pytest.raises(UnsupportedTypeError, match=r"Excel 97-2003 workbook"):
        doc.read(write_cfb({"Workbook": workbook(BOF, EOF_)}), ParseLimits())
    with pytest.raises(UnsupportedTypeError, match=r"\.msg"):
        xls.read(write_cfb({"__substg1.0_0037001F": b"S\0"}), ParseLimits())
    with pytest.raises(CorruptDocumentError):
        xls.read(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1garbage", ParseLimits())
