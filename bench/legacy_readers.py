"""Legacy Office readers (.doc/.xls/.ppt): which one to use, by marker recall and MB/s.

``python -m bench.legacy_readers [--real DIR] [--lo-sample N] [--no-write]``. Skips (exit 0, one
line) without ``soffice`` (it makes the generated files). Candidates, each on the same files:

- ``.doc``: ours (``readers/legacy/doc.py``, the piece table over olefile), ``antiword -m UTF-8.txt``,
  ``catdoc -d utf-8``;
- ``.xls``: python-calamine (``readers/legacy/xls.py``), xlrd 2, ``xls2csv -d utf-8`` (catdoc);
- ``.ppt``: ours (``readers/legacy/ppt.py``, the record tree over olefile), ``catppt -d utf-8``;
- each: LibreOffice headless ``--convert-to docx|xlsx|pptx``, then our reader of that format.

Generated files: DOCX/XLSX/PPTX with a marker per page, table cell, header, note and in non-Latin
scripts, saved as .doc/.xls/.ppt by LibreOffice; recall = markers found / markers planted; MB/s =
bytes of the set / seconds to read all of it (a command-line tool's process start included, as the
sandbox child would pay it). Real files (``--real``, e.g. Apache POI's ``test-data``, made by Office
itself, fuzzed and password-protected ones included): files read without error, and word recall
against the ASCII words (4+ characters) that at least two candidates found in that file (a consensus:
no ground truth exists; ASCII only because the tools disagree on legacy code pages: on a Russian
Word 6 file antiword and catdoc both print cp1252 mojibake, which would otherwise "agree").
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.report import write_section

PAGES = (1, 20, 200)
Candidate = Callable[[Path], str]
_WORD = re.compile(r"(?a)\w{4,}")  # ASCII words: a code page guessed wrong does not count


def marker(fmt: str, kind: str, i: int) -> str:
    return f"M{fmt.upper()}{kind}{i:03d}X"


def planted(fmt: str, pages: int) -> list[str]:
    kinds = {"doc": ("PARA", "CELL", "UNI"), "xls": ("CELL", "UNI"), "ppt": ("TITLE", "BODY", "BOX", "NOTE")}[fmt]
    out = [marker(fmt, k, i) for i in range(pages) for k in kinds]
    return out + ([marker("doc", "HDR", 0)] if fmt == "doc" else [])


def make_docx(pages: int, path: Path) -> None:
    import docx
    from docx.enum.text import WD_BREAK

    d = docx.Document()
    d.sections[0].header.paragraphs[0].text = f"running header {marker('doc', 'HDR', 0)}"
    for i in range(pages):
        d.add_heading(f"Section {i}", level=1)
        for _ in range(10):
            d.add_paragraph("The quick brown fox jumps over the lazy dog. " * 6)
        d.add_paragraph(f"Paragraph {marker('doc', 'PARA', i)} ends here.")
        d.add_paragraph(f"Größe café naïve 中文测试 {marker('doc', 'UNI', i)} 한국어")
        t = d.add_table(rows=2, cols=2)
        t.cell(0, 0).text, t.cell(0, 1).text = "Item", "Value"
        t.cell(1, 0).text, t.cell(1, 1).text = f"row {i}", marker("doc", "CELL", i)
        if i < pages - 1:
            d.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
    d.save(path)


def make_xlsx(pages: int, path: Path) -> None:
    import xlsxwriter

    wb = xlsxwriter.Workbook(str(path))
    for i in range(pages):
        ws = wb.add_worksheet(f"Sheet{i}")
        ws.write_row(0, 0, ["Item", "Unit price", "Note"])
        for r in range(1, 41):
            ws.write_row(r, 0, [f"item {r}", r * 0.42, "plain words here"])
        ws.write_row(41, 0, [marker("xls", "CELL", i), 1.5, f"ünï 中文 {marker('xls', 'UNI', i)}"])
    wb.close()


def make_pptx(pages: int, path: Path) -> None:
    import pptx

    p = pptx.Presentation()
    for i in range(pages):
        s = p.slides.add_slide(p.slide_layouts[1])
        s.shapes.title.text = f"Slide {i} {marker('ppt', 'TITLE', i)}"
        s.placeholders[1].text = f"Body ünï 中文 {marker('ppt', 'BODY', i)}\nThe quick brown fox."
        box = s.shapes.add_textbox(0, 0, 100, 100)
        box.text_frame.text = f"free text box {marker('ppt', 'BOX', i)}"
        s.notes_slide.notes_text_frame.text = f"speaker note {marker('ppt', 'NOTE', i)}"
    p.save(path)


MAKERS = {"doc": (make_docx, "docx"), "xls": (make_xlsx, "xlsx"), "ppt": (make_pptx, "pptx")}


def soffice(args: list[str], profile: Path, timeout: float = 600) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["soffice", f"-env:UserInstallation=file://{profile}", "--headless", "--norestore", *args],
                          capture_output=True, timeout=timeout, check=False)


def generate(work: Path, profile: Path) -> dict[str, list[tuple[Path, int]]]:
    out: dict[str, list[tuple[Path, int]]] = {}
    for fmt, (make, src_ext) in MAKERS.items():
        sources = []
        for n in PAGES:
            src = work / f"{fmt}{n}.{src_ext}"
            make(n, src)
            sources.append(src)
        soffice(["--convert-to", fmt, "--outdir", str(work), *map(str, sources)], profile)
        out[fmt] = [(work / f"{fmt}{n}.{fmt}", n) for n in PAGES]
    return out


# --- candidates --------------------------------------------------------------------------------
def ours(kind: str) -> Candidate:
    import importlib

    from task_service.pipeline.limits import DEFAULT_LIMITS

    module = importlib.import_module(f"task_service.pipeline.readers.legacy.{kind}")

    def run(path: Path) -> str:
        return str(module.read(path.read_bytes(), DEFAULT_LIMITS).text)

    return run


def tool(*argv: str) -> Candidate:
    def run(path: Path) -> str:
        proc = subprocess.run([*argv, str(path)], capture_output=True, timeout=60, check=False)
        if proc.returncode != 0 and not proc.stdout:
            raise RuntimeError(proc.stderr.decode("utf-8", "replace")[:200])
        return proc.stdout.decode("utf-8", "replace")

    return run


def xlrd_text(path: Path) -> str:
    import xlrd

    book = xlrd.open_workbook(file_contents=path.read_bytes())
    return "\n".join(" | ".join(str(v) for v in sheet.row_values(r)) for sheet in book.sheets()
                     for r in range(sheet.nrows))


def libreoffice(target: str, reader: Callable[[Path], str]) -> Callable[[Path, Path], str]:
    def run(path: Path, profile: Path) -> str:
        with tempfile.TemporaryDirectory(prefix="lo-", dir=profile.parent) as out:
            proc = soffice(["--convert-to", target, "--outdir", out, str(path)], profile, timeout=120)
            made = list(Path(out).iterdir())
            if not made:
                raise RuntimeError(proc.stderr.decode("utf-8", "replace")[:200] or "no output")
            return reader(made[0])

    return run


def read_converted(path: Path) -> str:
    """The converted OOXML file through our own reader of that format (what a converter path would do)."""
    from task_service.pipeline.limits import DEFAULT_LIMITS
    from task_service.pipeline.parse import parse_document

    return parse_document(path.read_bytes(), path.name, DEFAULT_LIMITS).text


CANDIDATES: dict[str, dict[str, Candidate]] = {
    "doc": {"ours (piece table)": ours("doc"), "antiword": tool("antiword", "-m", "UTF-8.txt"),
            "catdoc": tool("catdoc", "-d", "utf-8")},
    "xls": {"python-calamine": ours("xls"), "xlrd": xlrd_text, "xls2csv": tool("xls2csv", "-d", "utf-8")},
    "ppt": {"ours (record tree)": ours("ppt"), "catppt": tool("catppt", "-d", "utf-8")},
}
LO = {fmt: libreoffice(f"{fmt}x", read_converted) for fmt in ("doc", "xls", "ppt")}


@dataclass
class Score:
    files: int = 0
    ok: int = 0
    found: int = 0
    wanted: int = 0
    bytes: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def cell(self) -> str:
        mbs = self.bytes / 1e6 / self.seconds if self.seconds else float("nan")
        recall = f"{self.found}/{self.wanted} ({100 * self.found / self.wanted:.1f} %)" if self.wanted else "–"
        return f"{self.ok}/{self.files} | {recall} | {mbs:,.2f}"


def timed(run: Callable[[], str]) -> tuple[str | None, float, str]:
    t0 = time.perf_counter()
    try:
        text = run()
        return text, time.perf_counter() - t0, ""
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a candidate's failure is an outcome (pyo3 panics are BaseException)
        return None, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}"[:120]


def on_generated(files: dict[str, list[tuple[Path, int]]], profile: Path) -> list[str]:
    lines = []
    for fmt, sized in files.items():
        runs = {**{name: (lambda p, c=c: c(p)) for name, c in CANDIDATES[fmt].items()},
                "LibreOffice headless": (lambda p, f=fmt: LO[f](p, profile))}
        for name, run in runs.items():
            score = Score()
            for path, n in sized:
                text, secs, err = timed(lambda r=run, p=path: r(p))
                want = planted(fmt, n)
                score.files += 1
                score.bytes += path.stat().st_size
                score.seconds += secs
                score.wanted += len(want)
                if text is None:
                    score.errors.append(err)
                    continue
                score.ok += 1
                score.found += sum(m in text for m in want)
            lines.append(f"| .{fmt} | {name} | {score.cell()} |")
            print(lines[-1], flush=True)
    return lines


def on_real(folder: Path, profile: Path, lo_sample: int) -> list[str]:
    lines = []
    for fmt in CANDIDATES:
        paths = sorted(p for p in folder.iterdir() if p.suffix.lower().lstrip(".") == fmt)
        runs: dict[str, tuple[Callable[[Path], str], list[Path]]] = {
            name: (c, paths) for name, c in CANDIDATES[fmt].items()}
        if lo_sample:
            sample = paths[:: max(1, len(paths) // lo_sample)][:lo_sample]
            runs["LibreOffice headless (sample)"] = (lambda p, f=fmt: LO[f](p, profile), sample)
        words: dict[str, dict[Path, set[str] | None]] = {}
        scores: dict[str, Score] = {}
        for name, (run, subset) in runs.items():
            words[name], scores[name] = read_all(run, subset)
        consensus_recall(words, scores)
        for name, score in scores.items():
            lines.append(f"| .{fmt} | {name} | {score.cell()} |")
            print(lines[-1], "errors:", score.errors[:3], flush=True)
    return lines


def read_all(run: Callable[[Path], str], paths: list[Path]) -> tuple[dict[Path, set[str] | None], Score]:
    """Each file's words (None: the candidate failed on it) and the candidate's score so far."""
    score = Score()
    words: dict[Path, set[str] | None] = {}
    for path in paths:
        text, secs, err = timed(lambda p=path: run(p))
        score.files += 1
        score.bytes += path.stat().st_size
        score.seconds += secs
        if text is None:
            score.errors.append(f"{path.name}: {err}")
            words[path] = None
        else:
            score.ok += 1
            words[path] = set(_WORD.findall(text.lower()))
    return words, score


def consensus_recall(words: dict[str, dict[Path, set[str] | None]], scores: dict[str, Score]) -> None:
    """Per file, the words at least two candidates found; each candidate's share of them."""
    for path in {p for found in words.values() for p in found}:
        found = [w for by_path in words.values() if (w := by_path.get(path))]
        if len(found) < 2:
            continue
        agreed = {w for w in set().union(*found) if sum(w in f for f in found) >= 2}
        for name, by_path in words.items():
            if path in by_path:
                scores[name].wanted += len(agreed)
                scores[name].found += len(agreed & (by_path[path] or set()))


DECISION = """\
**Decision** (`task_service/pipeline/readers/legacy/`): **.doc → ours** (every generated marker, headers and
footers too, which antiword drops; fields read as their result; Word 6/95 in the code page of the document's
language, where antiword and catdoc print cp1252 mojibake for a Russian file; on real files it misses only a
Word 2.0 file, which is not a compound file and is refused at upload); **.xls → python-calamine**, already the
XLSX reader's library (the same cell rendering, the best consensus on real files with xls2csv; xlrd stops on
more real files: NAME formulas it cannot parse, stricter compound-file checks); **.ppt → ours** (catppt reads
only the SlideListWithText, so nothing of a LibreOffice-written file, whose text is in the shapes; ours reads
both, in slide order through the persist directory, notes included). LibreOffice headless reads about
everything but at 0.01–0.4 MB/s (a process start and a conversion per file, 1–4 s) and 325 MB of packages. The
three chosen run in process, inside the sandbox child under its limits, and need no system package; the tools
are installed for this bench only (`make bench-legacy`). Files "not read" by ours are password-protected (→
`encrypted`), fuzzed, or not compound files; MB/s varies several-fold with the load of the shared machine."""


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--real", type=Path, help="a folder of real .doc/.xls/.ppt files")
    ap.add_argument("--lo-sample", type=int, default=10, help="real files per format LibreOffice reads too")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    if shutil.which("soffice") is None:
        print("bench.legacy_readers: soffice not installed (apt-get install libreoffice-*-nogui); skipped")
        return
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-legacy-readers-") as tmp:
        work = Path(tmp)
        profile = work / "profile"
        soffice(["--terminate_after_init"], profile)
        gen = on_generated(generate(work, profile), profile)
        real = on_real(a.real, profile, a.lo_sample) if a.real else []
    head = "| format | candidate | files read | markers (words) found | MB/s |\n|---|---|---:|---:|---:|\n"
    md = ("## Legacy Office readers (`python -m bench.legacy_readers`)\n\n"
          f"Generated files (1, 20 and 200 pages / sheets / slides, LibreOffice-written; markers in paragraphs, "
          f"table cells, headers, notes, non-Latin scripts). MB/s includes a command-line tool's process start. "
          f"1-minute load {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (2 cores, shared).\n\n"
          + head + "\n".join(gen) + "\n")
    if real:
        md += (f"\nReal files ({a.real.name}: Office-made and fuzzed test files of another project; words = the "
               "ASCII words of 4+ characters at least two candidates found in a file; LibreOffice on a sample; "
               "password-protected files count as not read, for every candidate):\n\n"
               + head + "\n".join(real) + "\n")
    md += "\n" + DECISION + "\n"
    print(md)
    if not a.no_write:
        write_section("legacy-readers", md)


if __name__ == "__main__":
    main(sys.argv[1:])
