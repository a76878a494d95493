"""Office math → linear text (``task_service.pipeline.readers.office.equations``): every structure, separators, and that
every word and number of an equation is a word of its own for the embedding model's tokenizer."""

from __future__ import annotations

import re

import pytest
from lxml import etree

from task_service.pipeline.chunk import load_minilm_tokenizer
from task_service.pipeline.readers.office.docx import extract_docx
from task_service.pipeline.readers.office.equations import math_text
from tests.unit.test_docx import package

NS = ('xmlns:m="http://schemas.openxmlformats.org/officeDocument/2006/math" '
      'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
      'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"')


def r(text: str) -> str:
    return f"<m:r><m:t>{text}</m:t></m:r>"


def part(tag: str, inner: str) -> str:
    return f"<m:{tag}>{inner}</m:{tag}>"


def sup(base: str, script: str) -> str:
    return part("sSup", part("e", r(base)) + part("sup", r(script)))


def sub(base: str, script: str) -> str:
    return part("sSub", part("e", r(base)) + part("sub", r(script)))


def frac(num: str, den: str, kind: str = "") -> str:
    props = f'<m:fPr><m:type m:val="{kind}"/></m:fPr>' if kind else ""
    return part("f", props + part("num", num) + part("den", den))


def text(inner: str) -> str:
    return math_text(etree.fromstring(f"<m:oMath {NS}>{inner}</m:oMath>"))


CASES = {
    "superscript after a run": (r("E=m") + sup("c", "2"), "E=mc^2"),
    "fraction of words": (r("k") + frac(r("ZELTRONI"), r("BC")), "k ZELTRONI / BC"),
    "fraction operands in parentheses": (frac(r("a+b"), r("c")), "(a+b) / c"),
    "bar-less fraction (binomial)": (frac(r("n"), r("k"), "noBar"), "n ¦ k"),
    "subscript ends before the next letter": (sub("H", "2") + r("O"), "H_2 O"),
    "sub and superscript": (part("sSubSup", part("e", r("x")) + part("sub", r("i")) + part("sup", r("2"))),
                            "x_i^2"),
    "negative exponent": (sup("x", "-1"), "x^(-1)"),
    "pre-scripts": (part("sPre", part("sub", r("1")) + part("sup", r("2")) + part("e", r("X"))), "_1^2 X"),
    "n-ary sum": (part("nary", '<m:naryPr><m:chr m:val="∑"/></m:naryPr>' + part("sub", r("i=1"))
                       + part("sup", r("n")) + part("e", sub("x", "i"))), "∑_(i=1)^n x_i"),
    "integral by default, hidden limits": (part("nary", '<m:naryPr><m:subHide m:val="1"/><m:supHide/></m:naryPr>'
                                                + part("sub", r("0")) + part("sup", r("1")) + part("e", r("f"))),
                                           "∫ f"),
    "square root": (part("rad", '<m:radPr><m:degHide m:val="on"/></m:radPr><m:deg/>' + part("e", r("x"))), "√ x"),
    "cube root": (part("rad", part("deg", r("3")) + part("e", r("y+1"))), "√(3&y+1)"),
    "delimiters": (r("f") + part("d", part("e", r("x")) + part("e", r("y"))), "f(x|y)"),
    "brackets": (part("d", '<m:dPr><m:begChr m:val="["/><m:sepChr m:val=";"/><m:endChr m:val="]"/></m:dPr>'
                      + part("e", r("a")) + part("e", r("b"))), "[a;b]"),
    "function": (part("func", part("fName", r("sin")) + part("e", r("x"))), "sin x"),
    "limit": (part("func", part("fName", part("limLow", part("e", r("lim")) + part("lim", r("n→∞"))))
                   + part("e", sub("a", "n"))), "lim_(n →∞) a_n"),
    "equation array": (part("eqArr", part("e", r("x=1")) + part("e", r("y=2"))), "x=1\ny=2"),
    "matrix": (part("m", part("mr", part("e", r("1")) + part("e", r("2"))) + part("mr", part("e", r("3"))
                                                                                 + part("e", r("4")))),
               "1, 2; 3, 4"),
    "accent and bar keep their base": (part("acc", part("e", r("v"))) + r("+") + part("bar", part("e", r("w"))),
                                       "v+w"),
    "symbols set apart from letters": (r("a⋅b→∞"), "a ⋅ b →∞"),
    "deleted math is dropped": (r("x") + f"<w:del>{r('GONE')}</w:del><w:ins>{r('y')}</w:ins>", "xy"),
    "properties are skipped": ("<m:r><m:rPr><m:sty m:val='p'/></m:rPr><w:rPr><w:b/></w:rPr><m:t>z</m:t></m:r>", "z"),
    "one branch of alternate content": ("<mc:AlternateContent><mc:Choice Requires='x'>" + r("A")
                                        + "</mc:Choice><mc:Fallback>" + r("B") + "</mc:Fallback></mc:AlternateContent>",
                                        "B"),
}


@pytest.mark.parametrize(("xml", "expected"), CASES.values(), ids=CASES.keys())
def test_structures(xml: str, expected: str) -> None:
    assert text(xml) == expected


def test_math_paragraph_one_line_per_equation() -> None:
    xml = f"<m:oMathPara {NS}><m:oMathParaPr/><m:oMath>{r('a=1')}</m:oMath><m:oMath>{r('b=2')}</m:oMath></m:oMathPara>"
    assert math_text(etree.fromstring(xml)) == "a=1\nb=2"


def test_every_word_and_number_is_a_word_of_its_own_for_the_model_tokenizer() -> None:
    rendered = "\n".join(text(xml) for xml, _ in CASES.values())
    encoding = load_minilm_tokenizer().encode(rendered, add_special_tokens=False)
    spans: dict[int, tuple[int, int]] = {}
    for word, (start, end) in zip(encoding.word_ids, encoding.offsets, strict=True):
        if word is not None:
            low, high = spans.get(word, (start, end))
            spans[word] = (min(low, start), max(high, end))
    words = {rendered[start:end].lower() for start, end in spans.values()}
    expected = {w.lower() for w in re.findall(r"[^\W_]+", rendered)}
    assert expected - words == set()


def test_block_equations_under_the_body_and_inline_ones_apart_from_words() -> None:
    body = (f"<m:oMathPara {NS}><m:oMath>{r('BLOCKMARK=1')}</m:oMath></m:oMathPara>"
            f"<w:p {NS}><w:r><w:t>Total</w:t></w:r><m:oMath>{r('INLINEMARK')}</m:oMath><w:r><w:t>, done</w:t></w:r>"
            "</w:p>"
            f"<w:tbl {NS}><w:tr><w:tc><m:oMath>{frac(r('CELLMARK'), r('2'))}</m:oMath></w:tc></w:tr></w:tbl>")
    assert [b.text for b in extract_docx(package(body)).blocks] == ["BLOCKMARK=1", "Total INLINEMARK, done",
                                                                     "CELLMARK / 2"]
