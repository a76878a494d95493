"""Legacy binary Office formats (.doc/.xls/.ppt): what converting them with LibreOffice headless costs.

``python -m bench.legacy [--runs N] [--no-write]``. Skips (exit 0, one line) when ``soffice`` is
absent. Generates DOCX/XLSX/PPTX of 1, 10 and 50 pages (sheets, slides) with a marker word per
page, turns them into .doc/.xls/.ppt with soffice, then times ``soffice --headless --convert-to
docx|xlsx|pptx`` of each legacy file: cold (a new LibreOffice profile, as a fresh sandbox child
would have) and warm (the profile already made; median of N runs); peak RSS (``/usr/bin/time -v``);
whether it still works under ``prlimit --as=2 GiB`` (the sandbox child's RLIMIT_AS) and offline
(``unshare -rn``); and the marker recall of the converted file. Writes the "legacy" section of
bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from bench.report import write_section
from shared.domain.ole import classify_ole

SIZES = (1, 10, 50)
GIB = 1024**3
TARGET = {"doc": "docx", "xls": "xlsx", "ppt": "pptx"}
SOURCE = {"doc": "docx", "xls": "xlsx", "ppt": "pptx"}


@dataclass
class Row:
    fmt: str
    pages: int
    size_kb: float
    cold_s: float
    warm_s: list[float]
    rss_mb: float
    as_2gib: bool
    offline: bool
    recall: str
    kind: str


def marker(fmt: str, i: int) -> str:
    return f"LEGACY{fmt.upper()}PAGE{i:03d}MARK"


def make_docx(pages: int) -> bytes:
    import docx  # python-docx (dev)
    from docx.enum.text import WD_BREAK

    d = docx.Document()
    for i in range(pages):
        d.add_heading(f"Section {i} {marker('doc', i)}", level=1)
        for _ in range(12):
            d.add_paragraph("The quick brown fox jumps over the lazy dog. " * 6)
        if i < pages - 1:
            d.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def make_xlsx(pages: int) -> bytes:
    import xlsxwriter  # dev

    buf = io.BytesIO()
    wb = xlsxwriter.Workbook(buf, {"in_memory": True})
    for i in range(pages):
        ws = wb.add_worksheet(f"Sheet{i}")
        ws.write_row(0, 0, ["Item", "Unit price", "Note"])
        for r in range(1, 41):
            ws.write_row(r, 0, [f"item {r}", r * 0.42, marker("xls", i) if r == 1 else "plain words here"])
    wb.close()
    return buf.getvalue()


def make_pptx(pages: int) -> bytes:
    import pptx  # python-pptx (dev)

    p = pptx.Presentation()
    for i in range(pages):
        s = p.slides.add_slide(p.slide_layouts[1])
        s.shapes.title.text = f"Slide {i}"
        s.placeholders[1].text = f"{marker('ppt', i)}\nThe quick brown fox jumps over the lazy dog."
    buf = io.BytesIO()
    p.save(buf)
    return buf.getvalue()


MAKERS = {"doc": make_docx, "xls": make_xlsx, "ppt": make_pptx}

# Measured by hand (a bench cannot uninstall packages), 2026-12-01 on this 2-core machine, beside other sessions.
INSTALL_NOTE = """\
Install (`apt-get install -y --no-install-recommends libreoffice-writer-nogui libreoffice-calc-nogui \
libreoffice-impress-nogui`, Debian 12, LibreOffice 7.4.7): 73 packages, 104 MB downloaded, **325 MB** on disk;
download of all 73 from scratch 4.4 s (`apt-get download`), unpack + configure 34 s: **~40 s** per fresh CI
machine. Also by hand: the 50-page .doc still converts under `prlimit --as` of 1 GiB and of 512 MiB; peak RSS
of `soffice.bin` itself (not through the `soffice` script) 217 MB. A password-protected DOCX made by
msoffcrypto-tool is classified `encrypted_ooxml`.

**Decision (2026-12-01): refuse** — superseded by issue 29: the legacy formats are now read in process by
readers chosen against LibreOffice and the Debian tools (section "legacy-readers"). Install (~40 s), memory
(~210 MB: fits 2 GiB, even 512 MiB) and offline use are fine,
but a warm conversion costs a LibreOffice process start plus import/export per file whatever its size:
1.0–2.6 s per file on a quiet machine (first run, load ≈ 2: 1-page .doc 2.05 s, 1-sheet .xls 2.11 s, 1-slide
.ppt 1.02 s median; 50 pages 1.9–2.6 s, 0.04–0.05 s per page), 2.3–4.0 s with the cores shared (load ≈ 8–10,
the table above), 4–15 s in a run beside a unit-test session. The prior's bar (< 2 s per small file, warm) is not met
reliably, and that is ~500× our own parse of the converted DOCX (~10 MB/s, `bench.parsers`: ~4 ms for
these files). It would also put 325 MB and LibreOffice's whole .doc/.xls/.ppt import code (C++) inside
the sandbox child. So `shared/domain/ole.py` recognises the file and the refusal names the format to
save as."""


def soffice(args: list[str], profile: Path, wrap: tuple[str, ...] = ()) -> tuple[float, float, bool]:
    """Run soffice under /usr/bin/time -v; return (wall s, peak RSS MB, ok)."""
    cmd = [*wrap, "/usr/bin/time", "-v", "soffice", f"-env:UserInstallation=file://{profile}",
           "--headless", "--norestore", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    wall = time.perf_counter() - t0
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    rss = int(m.group(1)) / 1024 if m else float("nan")
    return wall, rss, proc.returncode == 0


def convert(
    src: Path, target: str, outdir: Path, profile: Path, wrap: tuple[str, ...] = ()
) -> tuple[float, float, bool]:
    outdir.mkdir(exist_ok=True)
    for old in outdir.iterdir():
        old.unlink()
    wall, rss, ok = soffice(["--convert-to", target, "--outdir", str(outdir), str(src)], profile, wrap)
    out = outdir / f"{src.stem}.{target}"
    return wall, rss, ok and out.exists() and out.stat().st_size > 0


def recall(path: Path, fmt: str, pages: int) -> str:
    with zipfile.ZipFile(path) as z:
        text = " ".join(z.read(n).decode("utf-8", "replace") for n in z.namelist() if n.endswith(".xml"))
    text = re.sub(r"<[^>]+>", "", text)
    found = sum(marker(fmt, i) in text for i in range(pages))
    return f"{found}/{pages}"


def legacy_files(work: Path, profile: Path) -> dict[tuple[str, int], Path]:
    out: dict[tuple[str, int], Path] = {}
    for fmt, make in MAKERS.items():
        for n in SIZES:
            src = work / f"{fmt}{n}.{SOURCE[fmt]}"
            src.write_bytes(make(n))
            _, _, ok = convert(src, fmt, work / "legacy", profile)
            dst = work / f"{fmt}{n}.{fmt}"
            shutil.move(work / "legacy" / f"{fmt}{n}.{fmt}", dst)
            if not ok:
                raise RuntimeError(f"soffice could not write {dst.name}")
            out[(fmt, n)] = dst
    return out


def measure(fmt: str, n: int, src: Path, work: Path, runs: int) -> Row:
    outdir = work / "out"
    cold_profile = Path(tempfile.mkdtemp(prefix="lo-cold-", dir=work))
    cold, _, ok = convert(src, TARGET[fmt], outdir, cold_profile)
    if not ok:
        raise RuntimeError(f"cold conversion of {src.name} failed")
    warm, rss = [], []
    for _ in range(runs):
        w, r, ok = convert(src, TARGET[fmt], outdir, cold_profile)
        warm.append(w)
        rss.append(r)
    got = recall(outdir / f"{src.stem}.{TARGET[fmt]}", fmt, n)
    as_ok = convert(src, TARGET[fmt], outdir, cold_profile, ("prlimit", f"--as={2 * GIB}"))[2]
    off_ok = convert(src, TARGET[fmt], outdir, cold_profile, ("unshare", "-rn"))[2]
    kind = classify_ole(src.read_bytes())
    return Row(fmt, n, src.stat().st_size / 1024, cold, warm, max(rss), as_ok, off_ok, got, kind)


def table(rows: list[Row], runs: int) -> str:
    head = ("| file | pages | KB | cold s (new profile) | warm s (median of "
            f"{runs}, min–max) | warm s/page | peak RSS MB | RLIMIT_AS 2 GiB | offline | markers kept | "
            "classify_ole |\n"
            "|---|---:|---:|---:|---:|---:|---:|---|---|---|---|\n")
    lines = []
    for r in rows:
        med = statistics.median(r.warm_s)
        lines.append(f"| .{r.fmt} → .{TARGET[r.fmt]} | {r.pages} | {r.size_kb:,.0f} | {r.cold_s:.2f} | "
                     f"{med:.2f} ({min(r.warm_s):.2f}–{max(r.warm_s):.2f}) | {med / r.pages:.3f} | "
                     f"{r.rss_mb:,.0f} | {'works' if r.as_2gib else 'FAILS'} | "
                     f"{'works' if r.offline else 'FAILS'} | {r.recall} | {r.kind} |")
    return head + "\n".join(lines)


def version() -> str:
    p = subprocess.run(["soffice", "--version"], capture_output=True, text=True, check=False)
    return p.stdout.strip().split("\n")[0]


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    if shutil.which("soffice") is None:
        print("bench.legacy: soffice not installed (apt-get install libreoffice-*-nogui); skipped")
        return
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-legacy-") as tmp:
        work = Path(tmp)
        files = legacy_files(work, work / "gen-profile")
        rows = []
        for (fmt, n), path in files.items():
            rows.append(measure(fmt, n, path, work, a.runs))
            print(table(rows[-1:], a.runs).splitlines()[-1], flush=True)
    md = (f"## Legacy binary formats (`python -m bench.legacy`)\n\n{version()}, Debian's "
          "libreoffice-{writer,calc,impress}-nogui. One `soffice --headless --convert-to` process per file "
          "(as a sandbox child would run it); cold = a new user profile, warm = profile already made. Pages = "
          "pages (.doc, hard page breaks), sheets of 41 rows (.xls), slides (.ppt). 1-minute load average "
          f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (2 cores).\n\n"
          + table(rows, a.runs) + "\n\n" + INSTALL_NOTE)
    print(md)
    if not a.no_write:
        write_section("legacy", md)


if __name__ == "__main__":
    main(sys.argv[1:])
