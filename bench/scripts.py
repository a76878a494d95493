"""Script recall (issue 17): keyword search for a word inside a run of text, per script.

A generated set per script: background chunks of everyday words written as the script is
(Thai, Lao, Khmer, Myanmar: words glued into runs, a space or the script's full stop between
sentences; Korean: nouns and verbs with their particles attached, spaces between phrases;
Chinese, Japanese: no spaces; English: spaces), and target nouns each planted inside a run of
exactly 3 chunks. Query = the target alone; recall@5 = share of its 3 chunks in the top 5 of
``knowledge_service.search.retrieval.rank`` in keyword mode (what the API runs). Words were
written by hand from common vocabulary, so a substring of one word inside another
("ร้านอาหาร" holds "อาหาร", "부산" holds "산") happens as in real text.

Candidates, each measured on the same set and the same SQL, and applied to chunks AND queries:

* ``0006 (before)``: ``rag_search_text`` of sql/0006 (CJK cut into characters, nothing else);
* ``pythainlp newmm``: Thai runs cut into dictionary words by pythainlp (then 0006);
* ``ICU word break``: runs of Thai/Lao/Khmer/Myanmar/Hangul cut at ICU word boundaries (PyICU)
  (then 0006: CJK still single characters);
* ``bigrams``: every run of those scripts and of CJK as overlapping bigrams, a run of one
  character as itself (Elasticsearch ``cjk_bigram`` default);
* ``uni+bigrams``: the same plus every character as a unigram, interleaved (sql/0014).

Speed: segmentation in Python (ms per 1,000 chunks) where a candidate has one, and the SQL cost
of ``to_tsvector('rag_simple', rag_search_text(content))`` over the set (what the generated
column computes on insert), and the keyword query p50.
"""

from __future__ import annotations

import itertools
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import numpy as np

from knowledge_service.search.retrieval import Mode, SearchParams, rank
from shared.adapters.postgres.reads import PgSearch

SQL = Path(__file__).resolve().parents[1] / "sql"
_HANGUL_PARTICLES = (("은", "는"), ("이", "가"), ("을", "를"), ("과", "와"), ("으로", "로"), ("에서", "에서"),
                     ("에", "에"), ("의", "의"), ("도", "도"), ("까지", "까지"), ("만", "만"))


@dataclass(frozen=True)
class Script:
    name: str
    background: tuple[str, ...]
    targets: tuple[str, ...]
    glue: str = ""  # between words of a sentence
    stop: str = " "  # after a sentence


def _w(words: str) -> tuple[str, ...]:
    return tuple(words.split())


SCRIPTS = (
    Script("Thai",
           _w("ฉัน เขา เรา และ ที่ ของ ใน กับ ได้ จะ ไป มา กิน ดื่ม ซื้อ ขาย อ่าน เขียน วันนี้ เมื่อวาน พรุ่งนี้ สวย "
              "ใหญ่ เล็ก ร้อน เย็น มาก ดี ไม่ มี เป็น อยู่"),
           _w("ทุเรียน มะม่วง ตลาด โรงเรียน โรงพยาบาล รถไฟ สนามบิน ห้องสมุด หนังสือ นักเรียน ประเทศ อาหาร แม่น้ำ "
              "ภูเขา ทะเล ดอกไม้ กาแฟ ครอบครัว คอมพิวเตอร์ โทรศัพท์ จดหมาย ตำรวจ ร้านอาหาร เชียงใหม่")),
    Script("Lao",
           _w("ຂ້ອຍ ເຈົ້າ ລາວ ແລະ ທີ່ ຂອງ ໃນ ກັບ ໄດ້ ຈະ ໄປ ມາ ກິນ ດື່ມ ຊື້ ຂາຍ ອ່ານ ຂຽນ ມື້ນີ້ ມື້ວານ ງາມ ໃຫຍ່ ນ້ອຍ "
              "ຮ້ອນ ຫຼາຍ ດີ ບໍ່ ມີ ເປັນ ຢູ່"),
           _w("ຕະຫຼາດ ໂຮງຮຽນ ໂຮງໝໍ ປະເທດ ພາສາ ອາຫານ ເຮືອນ ເມືອງ ແມ່ນ້ຳ ພູເຂົາ ດອກໄມ້ ໝາກມ່ວງ ກາເຟ ປຶ້ມ ນັກຮຽນ "
              "ຄູສອນ ລົດໄຟ ເງິນ ວຽກ ໝູ່ເພື່ອນ ຄອບຄົວ ວຽງຈັນ ຫຼວງພະບາງ ເຂົ້າໜຽວ")),
    Script("Khmer",
           _w("ខ្ញុំ គាត់ យើង និង ដែល របស់ នៅ ជាមួយ បាន នឹង ទៅ មក ញ៉ាំ ផឹក ទិញ លក់ អាន សរសេរ ថ្ងៃនេះ ម្សិលមិញ ស្អាត ធំ "
              "តូច ក្តៅ ណាស់ ល្អ មិន មាន ជា"),
           _w("ផ្សារ សាលារៀន មន្ទីរពេទ្យ ប្រទេស ភាសា អាហារ ផ្ទះ ទីក្រុង ទន្លេ ភ្នំ ផ្កា ស្វាយ កាហ្វេ សៀវភៅ សិស្ស "
              "គ្រូបង្រៀន រថភ្លើង លុយ ការងារ មិត្តភក្តិ គ្រួសារ ភ្នំពេញ អង្គរវត្ត កម្ពុជា"),
           stop="។ "),
    Script("Myanmar",
           _w("ကျွန်တော် သူ ကျွန်ုပ်တို့ နဲ့ ရဲ့ မှာ ကို ခဲ့ မယ် သွား လာ စား သောက် ဝယ် ရောင်း ဖတ် ရေး ဒီနေ့ မနေ့က လှ "
              "ကြီး သေး ပူ အရမ်း ကောင်း မ ရှိ တယ်"),
           _w("ဈေး ကျောင်း ဆေးရုံ နိုင်ငံ ဘာသာစကား အစားအစာ အိမ် မြို့ မြစ် တောင် ပန်း သရက်သီး ကော်ဖီ စာအုပ် "
              "ကျောင်းသား ဆရာ ရထား ပိုက်ဆံ အလုပ် သူငယ်ချင်း မိသားစု ရန်ကုန် မန္တလေး ပုဂံ"),
           stop="။ "),
    Script("Hangul",
           _w("저는 우리는 어제 오늘 내일 아주 정말 같이 먼저 다시 갔어요 왔어요 먹었어요 마셨어요 샀어요 팔았어요 "
              "읽었어요 썼어요 만났어요 좋아요 예뻐요 커요 작아요 더워요 많이 조금 그리고 하지만 있어요 없어요"),
           _w("서울 부산 학교 병원 도서관 시장 회사 공항 기차 친구 가족 선생님 학생 음식 커피 "
              "책 집 물 산 강 바다 꽃 돈 일"),
           glue=" ", stop=". "),
    Script("Chinese",
           _w("我 你 他 我们 和 的 在 跟 了 会 去 来 吃 喝 买 卖 看 写 今天 昨天 明天 很 好 不 有 是 漂亮 大 小 热"),
           _w("北京 上海 学校 医院 图书馆 市场 公司 机场 火车 朋友 家庭 老师 学生 食物 咖啡 "
              "书 水 山 河 海 花 钱 电脑 手机"),
           stop="。"),
    Script("Japanese",
           _w("私 は が を に で と の も へ 昨日 今日 明日 とても 行きました 来ました 食べました 飲みました "
              "買いました 読みました 書きました 会いました きれい 大きい 小さい 暑い です ます"),
           _w("東京 大阪 学校 病院 図書館 市場 会社 空港 電車 友達 家族 先生 学生 食べ物 コーヒー 本 水 山 川 海 花 "
              "お金 パソコン 携帯電話"),
           stop="。"),
    Script("English",
           _w("i you we and that of in with can will go come eat drink buy sell read write today yesterday "
              "tomorrow beautiful big small hot cold very good not have is at the"),
           _w("harbour lighthouse orchard saffron basalt glacier tram cathedral vineyard lantern compass meadow falcon "
              "quarry archive ferry bakery canyon violin telescope pottery harvest tapestry kettle"),
           glue=" ", stop=". "),
)
PLANTED = 3  # chunks per target


def _particle(noun: str, rng: np.random.Generator) -> str:
    """A Korean noun with a particle attached, in the form its last syllable takes."""
    final = (ord(noun[-1]) - 0xAC00) % 28 != 0  # has a final consonant (batchim)
    pair = _HANGUL_PARTICLES[int(rng.integers(0, len(_HANGUL_PARTICLES)))]
    return noun + pair[0 if final else 1]


def _sentence(script: Script, rng: np.random.Generator, planted: list[str]) -> str:
    words = [script.background[int(i)] for i in rng.integers(0, len(script.background), int(rng.integers(4, 10)))]
    for target in planted:
        words.insert(int(rng.integers(0, len(words) + 1)), _particle(target, rng) if script.name == "Hangul"
                     else target)
    return script.glue.join(words) + script.stop


def generate(script: Script, n_chunks: int, rng: np.random.Generator) -> tuple[list[str], dict[str, set[int]]]:
    """``n_chunks`` chunk texts (6 sentences each) and ``{target: rows it was planted in}``."""
    rows = rng.permutation(n_chunks)
    plants: dict[int, list[str]] = {}
    truth: dict[str, set[int]] = {}
    for t, target in enumerate(script.targets):
        chosen = [int(r) for r in rows[(t * PLANTED) % n_chunks:(t * PLANTED) % n_chunks + PLANTED]]
        truth[target] = set(chosen)
        for r in chosen:
            plants.setdefault(r, []).append(target)
    chunks = []
    for r in range(n_chunks):
        mine = plants.get(r, [])
        where = rng.integers(0, 6, len(mine))
        chunks.append("".join(_sentence(script, rng, [t for t, w in zip(mine, where, strict=True) if w == s])
                              for s in range(6)).strip())
    return chunks, truth


# ------------------------------------------------------------------ candidates

_NO_SPACE = "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\uac00-\ud7af]+"
_THAI = re.compile("[\u0e00-\u0e7f]+")


def _function(migration: str, name: str) -> str:
    """``CREATE OR REPLACE`` of function ``name`` as written in ``sql/<migration>``."""
    text = (SQL / migration).read_text()
    m = re.search(rf"CREATE (?:OR REPLACE )?FUNCTION {name}\(.*?;[ \t]*$", text, re.S | re.M)
    if m is None:
        raise ValueError(f"{name} not found in {migration}")
    return re.sub(r"^CREATE (?:OR REPLACE )?FUNCTION", "CREATE OR REPLACE FUNCTION", m.group(0))


def _bigrams_only(production: str) -> str:
    """sql/0014's function without the unigrams: a run of one character stays itself, a longer run
    becomes its overlapping bigrams (Elasticsearch ``cjk_bigram``, ``output_unigrams: false``)."""
    m = re.search(r"'\(\[([^\]]+)\]\+\)'", production)
    if m is None:
        raise ValueError("the script class of sql/0014 not found")
    c = m.group(1)
    return f"""CREATE OR REPLACE FUNCTION rag_search_text(t text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN regexp_replace(regexp_replace(regexp_replace(
        regexp_replace(t, '([[:alnum:]])-([0-9])', '\\1 \\2', 'g'),
        '([{c}]+)', ' \\1 ', 'g'),
        '([{c}])(?=[{c}])', '\\1 \\1', 'g'),
        '(?<![{c}])([{c}]) (?=[{c}][{c}])', '', 'g')"""


def _pythainlp() -> Callable[[str], str] | str:
    try:
        from pythainlp.tokenize import word_tokenize
    except ImportError:
        return "not installed (pip install pythainlp)"

    def seg(text: str) -> str:
        return _THAI.sub(lambda m: " ".join(word_tokenize(m.group(), engine="newmm", keep_whitespace=False)), text)
    return seg


def _icu() -> Callable[[str], str] | str:
    try:
        import icu  # type: ignore[import-not-found]
    except ImportError:
        return "not installed (PyICU: no wheel on PyPI; builds from source against libicu-dev)"
    breaker = icu.BreakIterator.createWordInstance(icu.Locale.getRoot())

    def words(run: str) -> str:
        breaker.setText(run)
        cuts = [0, *breaker]
        return " ".join(run[a:b] for a, b in itertools.pairwise(cuts))

    def seg(text: str) -> str:
        return re.sub(_NO_SPACE, lambda m: words(m.group()), text)
    return seg


@dataclass
class Candidate:
    name: str
    sql: list[str]  # statements that install its rag_search_text / rag_ngrams
    segment: Callable[[str], str] | None = None  # Python applied to chunks and queries
    missing: str = ""  # why it could not be measured


def candidates() -> list[Candidate]:
    before = [_function("0006_keyword_search.sql", "rag_search_text")]
    after = [_function("0014_script_ngrams.sql", "rag_search_text")]
    out = [Candidate("0006 (before)", before)]
    for name, made in (("pythainlp newmm (Thai) + 0006", _pythainlp()), ("ICU word break + 0006", _icu())):
        out.append(Candidate(name, before, made) if callable(made) else Candidate(name, before, missing=made))
    out.append(Candidate("bigrams", [_bigrams_only(after[0])]))
    out.append(Candidate("uni+bigrams (0014, chosen)", after))
    return out


# ------------------------------------------------------------------ measuring


@dataclass
class Measured:
    recall: dict[str, float] = field(default_factory=dict)  # script → recall@5
    segment_ms: float | None = None  # Python, per 1,000 chunks
    tsvector_ms: float = 0.0  # SQL, per 1,000 chunks
    query_p50_ms: float = 0.0


async def _kb(conn: asyncpg.Connection, name: str) -> int:
    user = await conn.fetchval("SELECT id FROM app_user LIMIT 1") or await conn.fetchval(
        "INSERT INTO app_user (name) VALUES ('scripts') RETURNING id")
    return int(await conn.fetchval("INSERT INTO knowledge_base (user_id, name, embedding_model, embedding_dim)"
                                   " VALUES ($1, $2, 'synthetic', 384) RETURNING id", user, name))


async def _load(conn: asyncpg.Connection, kb: int, texts: list[str]) -> list[int]:
    user = await conn.fetchval("SELECT user_id FROM knowledge_base WHERE id = $1", kb)
    doc = await conn.fetchval(
        "INSERT INTO document_info (kb_id, user_id, filename, size_bytes, sha256, object_key, status, chunk_count)"
        " VALUES ($1, $2, 'scripts.txt', 1, md5(random()::text), md5(random()::text), 'INDEXED', $3) RETURNING id",
        kb, user, len(texts))
    rows = await conn.fetch(
        "INSERT INTO document_chunk (document_id, chunk_index, content, token_count)"
        " SELECT $1, i - 1, t, 1 FROM unnest($2::text[]) WITH ORDINALITY AS u(t, i) RETURNING id, chunk_index",
        doc, texts)
    return [r["id"] for r in sorted(rows, key=lambda r: r["chunk_index"])]


async def measure(conn: asyncpg.Connection, cand: Candidate, sets: dict[str, tuple[list[str], dict[str, set[int]]]],
                  params: SearchParams) -> Measured:
    """Install ``cand``'s functions, load every script's set in its own KB, query every target."""
    for stmt in cand.sql:
        await conn.execute(stmt)
    seg = cand.segment or (lambda s: s)
    out = Measured()
    all_texts = [t for texts, _ in sets.values() for t in texts]
    t0 = time.perf_counter()
    prepared = {name: [seg(t) for t in texts] for name, (texts, _) in sets.items()}
    if cand.segment is not None:
        out.segment_ms = (time.perf_counter() - t0) * 1000 / len(all_texts) * 1000
    t0 = time.perf_counter()
    await conn.fetchval("SELECT sum(length(to_tsvector('rag_simple', rag_search_text(t)))) FROM unnest($1::text[]) t",
                        [t for ts in prepared.values() for t in ts])
    out.tsvector_ms = (time.perf_counter() - t0) * 1000 / len(all_texts) * 1000
    times: list[float] = []
    for name, (_, truth) in sets.items():
        kb = await _kb(conn, f"scripts {cand.name} {name}")
        ids = await _load(conn, kb, prepared[name])
        await conn.execute("ANALYZE document_chunk")
        found = []
        for target, rows in truth.items():
            q0 = time.perf_counter()
            got = await rank(PgSearch(conn), kb, Mode.KEYWORD, seg(target), None, 5, params)
            times.append((time.perf_counter() - q0) * 1000)
            found.append(len({ids[r] for r in rows} & {cid for cid, _, _ in got}) / len(rows))
        out.recall[name] = statistics.mean(found)
        await conn.execute("DELETE FROM document_info WHERE kb_id = $1", kb)
    out.query_p50_ms = statistics.median(times)
    return out


async def script_recall(conn: asyncpg.Connection, n_chunks: int, params: SearchParams,
                        rng: np.random.Generator) -> list[tuple[Candidate, Measured | None]]:
    """Every candidate on the same generated sets (``n_chunks`` chunks per script); the
    production functions (sql/0014) are installed again at the end."""
    sets = {s.name: generate(s, n_chunks, rng) for s in SCRIPTS}
    results: list[tuple[Candidate, Measured | None]] = []
    try:
        for cand in candidates():
            results.append((cand, None if cand.missing else await measure(conn, cand, sets, params)))
    finally:
        for stmt in candidates()[-1].sql:
            await conn.execute(stmt)
    return results


def report(results: list[tuple[Candidate, Measured | None]], n_chunks: int) -> list[str]:
    names = [s.name for s in SCRIPTS]
    lines = [
        "", f"**Script recall@5** (keyword search; per script {n_chunks} generated chunks of 6 sentences, "
        f"{len(SCRIPTS[0].targets)} target words each planted inside a run of {PLANTED} chunks, queried alone; "
        "`bench/scripts.py`). Speed: Python segmentation and SQL `to_tsvector(rag_search_text(...))` per 1,000 "
        "chunks, keyword query p50.", "",
        "| candidate | " + " | ".join(names) + " | segment ms/1k | tsvector ms/1k | query p50 ms |",
        "|---|" + "---:|" * (len(names) + 3),
    ]
    for cand, m in results:
        if m is None:
            lines.append(f"| {cand.name} | " + " | ".join("—" for _ in names) + f" | {cand.missing} | | |")
            continue
        seg = f"{m.segment_ms:.0f}" if m.segment_ms is not None else "—"
        lines.append(f"| {cand.name} | " + " | ".join(f"{m.recall[n]:.3f}" for n in names)
                     + f" | {seg} | {m.tsvector_ms:.0f} | {m.query_p50_ms:.1f} |")
    return lines
