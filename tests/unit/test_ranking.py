"""Reciprocal rank fusion on crafted rankings (knowledge_service.search.ranking)."""

from __future__ import annotations

import pytest

from knowledge_service.search.ranking import rrf


def test_an_item_in_both_lists_beats_items_in_one() -> None:
    fused = rrf({"vector": ["a", "b", "c"], "keyword": ["c", "d"]})
    assert [f.key for f in fused] == ["c", "a", "b", "d"]  # b and d tie (1/62): vector is listed first
    c = fused[0]
    assert c.sources == {"vector": 3, "keyword": 1}
    assert c.score == pytest.approx(1 / 63 + 1 / 61)
    assert fused[1].score == pytest.approx(1 / 61) and fused[1].sources == {"vector": 1}


def test_ties_go_to_the_better_rank_then_to_list_order() -> None:
    fused = rrf({"vector": ["a", "b"], "keyword": ["x", "b"]})
    # a and x: 1/61 each, both rank 1: vector's listed first. b: 2/62 beats both.
    assert [f.key for f in fused] == ["b", "a", "x"]


def test_depth_cuts_each_list_and_k_changes_the_weights() -> None:
    fused = rrf({"vector": ["a", "b", "c"], "keyword": ["c"]}, depth=2)
    assert [(f.key, f.sources) for f in fused] == [("a", {"vector": 1}), ("c", {"keyword": 1}), ("b", {"vector": 2})]
    assert rrf({"v": ["a"]}, k=1)[0].score == pytest.approx(0.5)


def test_duplicates_count_once_and_empty_lists_are_fine() -> None:
    fused = rrf({"vector": ["a", "a", "b"], "keyword": []})
    assert [(f.key, f.sources) for f in fused] == [("a", {"vector": 1}), ("b", {"vector": 3})]
    assert rrf({}) == []


@pytest.mark.parametrize("kw", [{"k": 0}, {"depth": 0}])
def test_bad_parameters_are_refused(kw: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        rrf({"v": ["a"]}, **kw)


def test_collapse_keeps_the_best_copy_of_each_content() -> None:
    from knowledge_service.search.ranking import collapse

    content = {1: ("h", 0), 2: ("h", 0), 3: ("h", 1), 4: ("g", 0)}
    ranked = [(1, 0.9), (2, 0.9), (3, 0.8), (4, 0.7), (5, 0.6)]  # 5: unknown (deleted meanwhile) → itself
    assert collapse(ranked, content) == [(1, 0.9), (3, 0.8), (4, 0.7), (5, 0.6)]


def test_canonicalize_names_a_content_by_one_chunk_across_lists() -> None:
    from knowledge_service.search.ranking import canonicalize

    content = {1: ("h", 0), 2: ("h", 0), 3: ("h", 1)}
    lists = canonicalize({"vector": [(2, 0.9), (1, 0.9)], "keyword": [(1, 2.0), (3, 1.0), (2, 1.0)]}, content)
    assert lists == {"vector": [(2, 0.9)], "keyword": [(2, 2.0), (3, 1.0)]}
    fused = rrf({name: [cid for cid, _ in ranked] for name, ranked in lists.items()})
    assert [f.key for f in fused] == [2, 3]  # the copy counts once, ranked first in both lists


# ------------------------------------------------------------------ hybrid fusion (issue 20)


def test_a_decisive_keyword_hit_beats_items_middling_in_both_lists() -> None:
    from knowledge_service.search.ranking import fuse_hybrid

    vector = [("a", 0.5), ("b", 0.49), ("c", 0.48), ("d", 0.47), ("e", 0.46), ("code", 0.1)]
    keyword = [("code", 1.0), ("a", 0.2), ("b", 0.2), ("c", 0.2), ("d", 0.2), ("e", 0.2)]
    assert rrf({"vector": [k for k, _ in vector], "keyword": [k for k, _ in keyword]})[0].key == "a"  # plain RRF
    fused = fuse_hybrid(vector, keyword, max_group=5)
    assert fused[0].key == "code" and fused[0].sources == {"vector": 6, "keyword": 1}
    assert fused[0].score == pytest.approx(1 + 1 / 66 + 1 / 61)
    assert [f.key for f in fused[1:]] == ["a", "b", "c", "d", "e"]  # the rest keeps its RRF order


def test_a_code_only_the_keyword_list_holds_comes_first() -> None:
    from knowledge_service.search.ranking import fuse_hybrid

    fused = fuse_hybrid([("a", 0.9), ("b", 0.8)], [("code", 0.97), ("a", 0.03)], max_group=5)
    assert [f.key for f in fused] == ["code", "a", "b"]
    assert fused[0].sources == {"keyword": 1}


def test_a_flat_keyword_list_is_plain_rrf() -> None:
    from knowledge_service.search.ranking import fuse_hybrid

    vector = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
    keyword = [("c", 0.9), ("d", 0.8), ("b", 0.7), ("e", 0.6)]
    plain = rrf({"vector": ["a", "b", "c"], "keyword": ["c", "d", "b", "e"]})
    assert fuse_hybrid(vector, keyword, max_group=3) == plain


@pytest.mark.parametrize(("scores", "max_group", "expected"), [
    ([2.0, 0.9, 0.1], 5, 1),        # phrase match, twice the next: decisive alone
    ([1.9, 1.8, 0.3, 0.2], 5, 2),   # a code held by two chunks: both, above the rest
    ([0.9], 5, 1),                  # the only chunk holding any query term
    ([0.9, 0.8, 0.7], 5, 3),        # every hit, nothing below (the next score counts as 0)
    ([0.9, 0.8, 0.7], 2, 0),        # ... unless the group would be longer than max_group
    ([0.4, 0.1], 5, 0),             # under half of the query's weight: not an exact hit
    ([1.0, 0.75, 0.5, 0.45], 5, 0),  # neither 2x nor 0.3 above the next while the scores stay >= 0.5
    ([0.8217, 0.4487, 0.1358], 5, 1),  # 1.83x but 0.37 more: holds the code's unique part (bench "peer")
    ([0.45, 0.1], 5, 0),             # 0.35 above the next, but under half of the query's weight
    ([], 5, 0),
])
def test_decisive_keys(scores: list[float], max_group: int, expected: int) -> None:
    from knowledge_service.search.ranking import decisive_keys

    keyword = [(f"k{i}", s) for i, s in enumerate(scores)]
    assert decisive_keys(keyword, max_group=max_group) == [f"k{i}" for i in range(expected)]


def test_depth_cuts_the_decisive_group_too() -> None:
    from knowledge_service.search.ranking import fuse_hybrid

    keyword = [("x", 0.8), ("y", 0.7), ("z", 0.6), ("w", 0.55)]
    assert fuse_hybrid([("a", 0.9)], keyword, max_group=2)[0].key == "a"  # flat: RRF, vector first
    # cut at depth 1 the keyword list is one item, alone above nothing: decisive
    assert [f.key for f in fuse_hybrid([("a", 0.9)], keyword, depth=1, max_group=2)] == ["x", "a"]


@pytest.mark.parametrize("kw", [{"max_group": 0}, {"ratio": 1.0}, {"gap": 0.0}])
def test_decisive_keys_refuses_bad_parameters(kw: dict[str, float]) -> None:
    from knowledge_service.search.ranking import decisive_keys

    with pytest.raises(ValueError):
        decisive_keys([("a", 1.0)], **{"max_group": 1, **kw})  # type: ignore[arg-type]
