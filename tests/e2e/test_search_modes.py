"""Issue 9 (hybrid search) and issue 11 (query clean-up) over HTTP: the three modes, identifiers
found in hybrid mode, CJK and accented text in keyword mode, bad queries answered clearly."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.e2e.conftest import WorkerFactory
from tests.support import Api

pytestmark = pytest.mark.e2e

WORDS = ("saffron basalt harbor orchard willow copper meadow lantern granite velvet ember thistle cobalt "
         "juniper falcon quartz marble cedar amber")
DOCS = {
    "chinese.txt": "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。",
    "french.txt": "Le café crème était délicieux. Après la répétition, Hélène a mangé une crêpe à Noël.",
    "ferry.txt": "The harbour ferry leaves at noon every day and returns to the island before the evening tide.",
}


def _search(api: Api, kb: int, query: str, mode: str, top_k: int = 5) -> dict[str, Any]:
    r = api.http.post(f"/api/v1/knowledge-bases/{kb}/search", json={"query": query, "mode": mode, "top_k": top_k})
    assert r.status_code == 200, r.text
    body = dict(r.json())
    assert body["mode"] == mode
    return body


def test_modes_identifiers_and_scripts(api: Api, workers: WorkerFactory) -> None:
    workers()
    kb = api.create_kb("search-modes")
    rng = random.Random(9)
    markers = {}
    for i in range(24):  # issue 9: dense search alone found 9 of 72 such sentences in its top 5
        words = rng.sample(WORDS.split(), 5)
        markers[f"chaos marker {i} {' '.join(words)} {rng.getrandbits(32):08x}"] = f"marker-{i}.txt"
    files = [(name, text) for text, name in markers.items()] + list(DOCS.items())
    uploaded: dict[str, int] = {}
    for start in range(0, len(files), 10):  # batches: a user has at most 20 tasks in flight
        batch = {name: api.upload(kb, name=name, data=text.encode())["document_id"]
                 for name, text in files[start:start + 10]}
        for doc_id in batch.values():
            assert api.wait_terminal(doc_id)["status"] == "INDEXED"
        uploaded |= batch

    for text, name in markers.items():
        hits = _search(api, kb, text, "hybrid")["results"]
        assert hits[0]["document_id"] == uploaded[name], (text, hits[:2])
        assert hits[0]["sources"]["keyword"] == 1
        assert 0 < hits[0]["score"] <= 1 + 2 / 61  # RRF, +1 for a decisive exact hit (issue 20)
        ident = text.rsplit(" ", 1)[1]
        assert _search(api, kb, ident, "hybrid")["results"][0]["document_id"] == uploaded[name]

    vec = _search(api, kb, "when does the boat to the island leave", "vector")["results"]
    assert vec[0]["document_id"] == uploaded["ferry.txt"]
    assert all(h["sources"].keys() == {"vector"} and -1 <= h["score"] <= 1 for h in vec)
    assert [h["sources"]["vector"] for h in vec] == list(range(1, len(vec) + 1))
    assert all(h["page"] is None and h["section"] is None for h in vec)  # plain text: unknown

    kw = _search(api, kb, "harbour ferry", "keyword")["results"]
    assert [h["document_id"] for h in kw] == [uploaded["ferry.txt"]]
    assert kw[0]["sources"] == {"keyword": 1} and 1 < kw[0]["score"] <= 2  # all terms, as a phrase

    for query, name in (("自由", "chinese.txt"), ("尊严和权利", "chinese.txt"), ("cafe creme", "french.txt"),
                        ("Hélène", "french.txt"), ("helene crepe", "french.txt"), ("cafe\u0301", "french.txt")):
        hits = _search(api, kb, query, "keyword")["results"]
        assert hits and hits[0]["document_id"] == uploaded[name], (query, hits)
    assert _search(api, kb, "自由", "keyword")["results"][0]["content"].startswith("人人生而自由")


def test_bad_queries_are_answered_clearly(api: Api) -> None:
    kb = api.create_kb("bad-queries")
    url = f"/api/v1/knowledge-bases/{kb}/search"
    r = api.http.post(url, content=b'{"query": "harbour \\ud800 ferry"}', headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text  # issue 11: was a 500
    assert r.json() == {"mode": "hybrid", "results": []}
    for query in ("   ", "\u0000", "\u0000 \t\n"):
        r = api.http.post(url, json={"query": query})
        assert r.status_code == 422, (query, r.text)
        assert "no searchable text" in r.text
    assert api.http.post(url, json={"query": ""}).status_code == 422
    assert api.http.post(url, json={"query": "x", "mode": "fuzzy"}).status_code == 422
    r = api.http.post(url, json={"query": "x", "top_k": 51})  # search_max_top_k defaults to 50
    assert r.status_code == 422 and "at most 50" in r.text
    assert api.http.post(url, json={"query": "x", "top_k": 50, "mode": "keyword"}).status_code == 200


def test_validation_errors_echoing_a_lone_surrogate_are_422(api: Api) -> None:
    """The 422 handler echoes the input; a JSON ``"\\ud800"`` made it fail with a 500."""
    kb = api.create_kb("surrogates")
    json_type = {"Content-Type": "application/json"}
    for url, body in (
        (f"/api/v1/knowledge-bases/{kb}/search", b'{"query": "\\ud800"}'),
        (f"/api/v1/knowledge-bases/{kb}/search", b'{"query": "x", "mode": "\\ud800"}'),
        ("/api/v1/knowledge-bases", b'{"name": "\\ud800"}'),
        ("/api/v1/knowledge-bases", b'{"name": "x", "\\ud800": 1}'),
    ):
        r = api.http.post(url, content=body, headers=json_type)
        assert r.status_code == 422, (body, r.status_code, r.text)
        assert isinstance(r.json()["detail"], list)
