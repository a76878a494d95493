"""``knowledge_service.search.retrieval`` keeps the ranking only: over a fake ``SearchReads`` port
(no database), copies are collapsed and a short list is fetched again twice as deep, hybrid runs
its two lists at once only on a parallel port, and a chunk gone before its details is left out."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from knowledge_service.search.retrieval import Mode, SearchParams, search
from shared.domain.records import ChunkCopy, ChunkDetails


class FakeReads:
    """``SearchReads`` over fixed rankings: ``keyword_ids`` / ``vector_ids`` best first (scores
    descending), ``text_of`` the content key of each chunk; records every call."""

    def __init__(self, keyword_ids: list[int], vector_ids: list[int], text_of: dict[int, str],
                 parallel: bool = True) -> None:
        self.keyword_ids, self.vector_ids, self.text_of = keyword_ids, vector_ids, text_of
        self._parallel = parallel
        self.calls: list[tuple[str, int]] = []
        self.running = 0
        self.overlapped = False
        self.gone: set[int] = set()
        self.copies_asked: list[list[int]] = []

    @property
    def parallel(self) -> bool:
        return self._parallel

    async def _ranked(self, name: str, ids: list[int], limit: int) -> list[tuple[int, float]]:
        self.calls.append((name, limit))
        self.running += 1
        self.overlapped |= self.running > 1
        await asyncio.sleep(0)  # let another list start meanwhile, if it runs at once
        self.running -= 1
        return [(cid, 1.0 - i / 100) for i, cid in enumerate(ids[:limit])]

    async def vector(self, kb_id: int, embedding: np.ndarray, limit: int, *, exact_max_chunks: int,
                     ef_search: int) -> list[tuple[int, float]]:
        return await self._ranked("vector", self.vector_ids, limit)

    async def keyword(self, kb_id: int, text: str, limit: int, *, budget: int,
                      max_candidates: int) -> list[tuple[int, float]]:
        return await self._ranked("keyword", self.keyword_ids, limit)

    async def details(self, ids: Sequence[int]) -> dict[int, ChunkDetails]:
        return {i: ChunkDetails(i, 1, "d.txt", i, self.text_of[i], None, None, self._has_copies(i))
                for i in ids if i not in self.gone}

    def _has_copies(self, i: int) -> bool:
        return any(j != i and t == self.text_of[i] and j not in self.gone for j, t in self.text_of.items())

    async def copies(self, ids: Sequence[int], limit: int) -> dict[int, tuple[list[ChunkCopy], int]]:
        """Every other chunk with the same content key, as the port promises (issue 29)."""
        self.copies_asked.append(list(ids))
        out: dict[int, tuple[list[ChunkCopy], int]] = {}
        for i in ids:
            same = [ChunkCopy(j, 1, "d.txt", j, None, None) for j in sorted(self.text_of)
                    if j != i and self.text_of[j] == self.text_of[i] and j not in self.gone]
            if same:
                out[i] = (same[:limit], len(same))
        return out


EMBEDDING = np.zeros(4, dtype=np.float32)


async def test_copies_collapse_and_a_short_list_is_fetched_twice_as_deep() -> None:
    ids = list(range(1, 13))
    text_of = {i: "same" if i <= 8 else f"t{i}" for i in ids}  # chunks 1-8 hold one text
    reads = FakeReads(ids, [], text_of)
    hits = await search(reads, 1, Mode.KEYWORD, "q", None, 3, SearchParams())
    assert [h.chunk_id for h in hits] == [1, 9, 10]  # the best ranked copy kept
    assert reads.calls == [("keyword", 3), ("keyword", 6), ("keyword", 12)]


async def test_hybrid_lists_run_at_once_only_on_a_parallel_port() -> None:
    text_of = {i: f"t{i}" for i in range(1, 7)}
    for parallel in (True, False):
        reads = FakeReads([1, 2, 3], [4, 5, 6], text_of, parallel=parallel)
        hits = await search(reads, 1, Mode.HYBRID, "q", EMBEDDING, 3, SearchParams(candidate_depth=3))
        assert len(hits) == 3
        assert reads.overlapped is parallel
        assert sorted(name for name, _ in reads.calls) == ["keyword", "vector"]


async def test_a_chunk_gone_before_its_details_is_left_out() -> None:
    reads = FakeReads([1, 2, 3], [], {1: "a", 2: "b", 3: "c"})
    reads.gone = {2}
    assert [h.chunk_id for h in await search(reads, 1, Mode.KEYWORD, "q", None, 3, SearchParams())] == [1, 3]


async def test_a_hit_names_the_other_chunks_holding_its_text() -> None:
    reads = FakeReads([1, 2, 3], [], {1: "same", 2: "other", 3: "same"})
    hits = await search(reads, 1, Mode.KEYWORD, "q", None, 5, SearchParams())
    assert [(h.chunk_id, [c.chunk_id for c in h.also_in], h.also_in_total) for h in hits] == [(1, [3], 1), (2, [], 0)]


async def test_vector_and_hybrid_need_the_embedding() -> None:
    reads = FakeReads([], [], {})
    for mode in (Mode.VECTOR, Mode.HYBRID):
        with pytest.raises(ValueError):
            await search(reads, 1, mode, "q", None, 3, SearchParams())
    assert reads.calls == []


async def test_the_keyword_list_runs_while_the_query_is_embedded() -> None:
    """A future of the embedding: the keyword list is fetched before it resolves; only the vector list waits."""
    text_of = {i: f"t{i}" for i in range(1, 7)}
    reads = FakeReads([1, 2, 3], [4, 5, 6], text_of)
    future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(search(reads, 1, Mode.HYBRID, "q", future, 3, SearchParams(candidate_depth=3)))
    for _ in range(20):
        await asyncio.sleep(0)
    assert [name for name, _ in reads.calls] == ["keyword"]  # the vector list still waits for the embedding
    future.set_result(EMBEDDING)
    hits = await task
    assert len(hits) == 3 and sorted(name for name, _ in reads.calls) == ["keyword", "vector"]


async def test_the_copies_are_read_only_for_hits_that_have_some() -> None:
    reads = FakeReads([1, 2, 3], [], {1: "a", 2: "b", 3: "c"})
    await search(reads, 1, Mode.KEYWORD, "q", None, 5, SearchParams())
    assert reads.copies_asked == []  # no hit has a copy: no read after the ranking
    reads = FakeReads([1, 2, 3], [], {1: "same", 2: "other", 3: "same", 4: "other"})
    await search(reads, 1, Mode.KEYWORD, "q", None, 5, SearchParams())
    assert reads.copies_asked == [[1, 2]]  # 3 collapsed into 1; 2's copy 4 is not a hit
