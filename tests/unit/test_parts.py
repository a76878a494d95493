"""The split plan and the part-claim decisions (pure)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from shared.domain.fencing import (
    PartSnapshot,
    PartState,
    Proceed,
    Reject,
    Skip,
    SkipReason,
    TaskSnapshot,
    decide_claim,
    decide_part_claim,
    may_commit_part,
)
from shared.domain.messages import IndexMessage
from shared.domain.parts import PartStatus, plan_parts, should_split
from shared.domain.records import PartRange
from shared.domain.states import DocumentStatus, TaskStatus

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
TASK = TaskSnapshot(
    task_id=1, document_id=2, kb_id=3, user_id=4, status=TaskStatus.RUNNING, generation=5, attempt=1,
    document_generation=5, document_status=DocumentStatus.INDEXING, retry_count=0, max_retry_count=3,
    update_time=NOW, split=True,
)
PART = PartState(part=2, generation=5, status=PartStatus.WAITING, attempt=0, first_chunk=512, chunk_count=256)
MSG = IndexMessage(task_id=1, document_id=2, kb_id=3, user_id=4, generation=5, part=2)


def snap(task: dict[str, object] | None = None, part: dict[str, object] | None = None,
         *, no_part: bool = False) -> PartSnapshot:
    return PartSnapshot(replace(TASK, **(task or {})),  # type: ignore[arg-type]
                        None if no_part else replace(PART, **(part or {})))  # type: ignore[arg-type]


class TestPlan:
    def test_parts_cover_every_chunk_in_order_the_last_shorter(self) -> None:
        assert plan_parts(600, 256) == [PartRange(0, 0, 256), PartRange(1, 256, 256), PartRange(2, 512, 88)]

    @pytest.mark.parametrize(("n", "size"), [(512, 256), (513, 256), (20_000, 256), (1, 1), (7, 3), (5, 100)])
    def test_contiguous_and_bounded(self, n: int, size: int) -> None:
        parts = plan_parts(n, size)
        assert [p.part for p in parts] == list(range(len(parts)))
        assert parts[0].first_chunk == 0 and parts[-1].end_chunk == n
        assert all(a.end_chunk == b.first_chunk for a, b in itertools.pairwise(parts))
        assert all(1 <= p.chunk_count <= size for p in parts)

    def test_nothing_to_cut(self) -> None:
        assert plan_parts(0, 256) == []

    @pytest.mark.parametrize(("n", "size"), [(10, 0), (-1, 10)])
    def test_bad_arguments(self, n: int, size: int) -> None:
        with pytest.raises(ValueError):
            plan_parts(n, size)

    def test_threshold(self) -> None:
        assert not should_split(511, 512) and should_split(512, 512)


class TestDocumentClaim:
    def test_a_split_task_is_not_claimed_again(self) -> None:
        assert decide_claim(MSG.document(), TASK) == Skip(SkipReason.ALREADY_SPLIT)

    def test_an_unsplit_running_task_is_claimable(self) -> None:
        assert decide_claim(MSG.document(), replace(TASK, split=False)) == Proceed()

    def test_a_stale_message_of_a_split_task_is_stale(self) -> None:
        old = MSG.document().model_copy(update={"generation": 4})
        assert decide_claim(old, TASK) == Skip(SkipReason.STALE_GENERATION)


class TestPartClaim:
    @pytest.mark.parametrize("status", [PartStatus.WAITING, PartStatus.RUNNING])
    def test_claimable(self, status: PartStatus) -> None:
        assert decide_part_claim(MSG, snap(part={"status": status})) == Proceed()

    def test_done_part_is_skipped(self) -> None:
        assert decide_part_claim(MSG, snap(part={"status": PartStatus.DONE})) == Skip(SkipReason.PART_DONE)

    def test_missing_task(self) -> None:
        assert decide_part_claim(MSG, None) == Skip(SkipReason.TASK_MISSING)

    def test_missing_part(self) -> None:
        assert decide_part_claim(MSG, snap(no_part=True)) == Skip(SkipReason.PART_MISSING)

    @pytest.mark.parametrize("status", [TaskStatus.SUCCESS, TaskStatus.FAILED, TaskStatus.TIMEOUT,
                                        TaskStatus.WAITING, TaskStatus.RETRYING])
    def test_task_not_running(self, status: TaskStatus) -> None:
        assert decide_part_claim(MSG, snap(task={"status": status})) == Skip(SkipReason.NOT_RUNNABLE)

    @pytest.mark.parametrize("task", [{"generation": 6, "document_generation": 6}, {"document_generation": 6}])
    def test_other_generation_of_the_task_or_document(self, task: dict[str, object]) -> None:
        assert decide_part_claim(MSG, snap(task=task)) == Skip(SkipReason.STALE_GENERATION)

    def test_part_of_another_generation(self) -> None:
        assert decide_part_claim(MSG, snap(part={"generation": 4})) == Skip(SkipReason.STALE_GENERATION)

    @pytest.mark.parametrize("field", ["document_id", "kb_id", "user_id"])
    def test_ids_disagreeing_with_the_row_are_rejected(self, field: str) -> None:
        bad = MSG.model_copy(update={field: 99})
        assert isinstance(decide_part_claim(bad, snap()), Reject)

    def test_a_part_row_of_another_part_is_rejected(self) -> None:
        assert isinstance(decide_part_claim(MSG, snap(part={"part": 3})), Reject)

    def test_a_document_message_is_a_programming_error(self) -> None:
        with pytest.raises(ValueError):
            decide_part_claim(MSG.document(), snap())

    def test_may_commit_needs_the_parts_attempt_and_running(self) -> None:
        running = snap(part={"status": PartStatus.RUNNING, "attempt": 2})
        assert may_commit_part(running, 5, 2)
        assert not may_commit_part(running, 5, 1)
        assert not may_commit_part(running, 4, 2)
        assert not may_commit_part(snap(part={"status": PartStatus.DONE, "attempt": 2}), 5, 2)
        assert not may_commit_part(snap(task={"split": False}, part={"status": PartStatus.RUNNING, "attempt": 2}),
                                   5, 2)
