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
