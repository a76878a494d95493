from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.fencing import (
    Action,
    EnqueueRequest,
    Proceed,
    Reject,
    RequestKind,
    SettledTasks,
    Skip,
    SkipReason,
    StaleThresholds,
    TaskSnapshot,
    decide_claim,
    decide_enqueue,
    may_commit,
)
from shared.domain.messages import IndexMessage
from shared.domain.states import DocumentStatus, TaskStatus

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TH = StaleThresholds(queued=timedelta(minutes=10), running=timedelta(minutes=45))


def snap(**kw: object) -> TaskSnapshot:
    base = TaskSnapshot(
        task_id=1, document_id=2, kb_id=3, user_id=4, status=TaskStatus.WAITING, generation=1, attempt=0,
        document_generation=1, document_status=DocumentStatus.INDEXING, retry_count=0, max_retry_count=3,
        update_time=NOW,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def msg(generation: int = 1, **kw: int) -> IndexMessage:
    fields = {"task_id": 1, "document_id": 2, "kb_id": 3, "user_id": 4, "generation": generation, **kw}
    return IndexMessage(**fields)


class TestClaim:
    @pytest.mark.parametrize("status", [TaskStatus.WAITING, TaskStatus.RETRYING, TaskStatus.RUNNING])
    def test_claimable(self, status: TaskStatus) -> None:
        assert decide_claim(msg(), snap(status=status)) == Proceed()

    @pytest.mark.parametrize("status", [TaskStatus.SUCCESS, TaskStatus.FAILED, TaskStatus.TIMEOUT])
    def test_terminal_is_not_runnable(self, status: TaskStatus) -> None:
        assert decide_claim(msg(), snap(status=status)) == Skip(SkipReason.NOT_RUNNABLE)

    def test_old_generation_is_stale(self) -> None:
        assert decide_claim(msg(1), snap(generation=2, document_generation=2)) == Skip(SkipReason.STALE_GENERATION)

    def test_document_moved_on_is_stale(self) -> None:
        assert decide_claim(msg(1), snap(generation=1, document_generation=2)) == Skip(SkipReason.STALE_GENERATION)

    def test_missing_task(self) -> None:
        assert decide_claim(msg(), None) == Skip(SkipReason.TASK_MISSING)

    @pytest.mark.parametrize("field", ["kb_id", "user_id", "document_id"])
    def test_ids_disagreeing_with_the_row_are_rejected(self, field: str) -> None:
        assert isinstance(decide_claim(msg(**{field: 99}), snap()), Reject)

    def test_may_commit_needs_the_same_attempt(self) -> None:
        s = snap(status=TaskStatus.RUNNING, attempt=2)
        assert may_commit(s, 1, 2)
        assert not may_commit(s, 1, 1)
        assert not may_commit(replace(s, document_generation=2), 1, 2)
        assert not may_commit(replace(s, status=TaskStatus.SUCCESS), 1, 2)


class TestEnqueue:
    def test_new_content_always_issues(self) -> None:
        for status in TaskStatus:
            d = decide_enqueue(snap(status=status), EnqueueRequest(RequestKind.NEW_CONTENT), NOW, TH)
            assert d.action is Action.ISSUE and d.new_status is TaskStatus.WAITING

    @pytest.mark.parametrize("kind", [RequestKind.RETRY, RequestKind.REINDEX])
    @pytest.mark.parametrize("status", [TaskStatus.WAITING, TaskStatus.RETRYING, TaskStatus.RUNNING])
    def test_active_fresh_task_answers_itself(self, kind: RequestKind, status: TaskStatus) -> None:
        d = decide_enqueue(snap(status=status, update_time=NOW - timedelta(minutes=5)), EnqueueRequest(kind), NOW, TH)
        assert d.action is Action.EXISTING

    def test_stale_waiting_is_taken_over(self) -> None:
        s = snap(status=TaskStatus.WAITING, update_time=NOW - timedelta(minutes=11))
        d = decide_enqueue(s, EnqueueRequest(RequestKind.REINDEX), NOW, TH)
        assert d.action is Action.ISSUE and d.takeover

    def test_running_uses_its_own_threshold(self) -> None:
        s = snap(status=TaskStatus.RUNNING, update_time=NOW - timedelta(minutes=30))
        assert decide_enqueue(s, EnqueueRequest(RequestKind.REINDEX), NOW, TH).action is Action.EXISTING
        s = snap(status=TaskStatus.RUNNING, update_time=NOW - timedelta(minutes=46))
        assert decide_enqueue(s, EnqueueRequest(RequestKind.REINDEX), NOW, TH).takeover

    def test_retry_from_failed_bumps_retry_count(self) -> None:
        d = decide_enqueue(snap(status=TaskStatus.FAILED), EnqueueRequest(RequestKind.RETRY), NOW, TH)
        assert d.action is Action.ISSUE and d.new_status is TaskStatus.RETRYING and d.bump_retry_count

    def test_retry_of_success_conflicts(self) -> None:
        d = decide_enqueue(snap(status=TaskStatus.SUCCESS), EnqueueRequest(RequestKind.RETRY), NOW, TH)
        assert d.action is Action.CONFLICT

    def test_retry_limit_needs_force(self) -> None:
        s = snap(status=TaskStatus.TIMEOUT, retry_count=3, max_retry_count=3)
        assert decide_enqueue(s, EnqueueRequest(RequestKind.RETRY), NOW, TH).action is Action.CONFLICT
        assert decide_enqueue(s, EnqueueRequest(RequestKind.RETRY, force=True), NOW, TH).action is Action.ISSUE

    def test_retry_naming_the_current_generation_issues(self) -> None:
        s = snap(status=TaskStatus.FAILED, generation=4, document_generation=4)
        d = decide_enqueue(s, EnqueueRequest(RequestKind.RETRY, expected_generation=4), NOW, TH)
        assert d.action is Action.ISSUE

    @pytest.mark.parametrize("status", [TaskStatus.FAILED, TaskStatus.RETRYING, TaskStatus.RUNNING])
    def test_retry_naming_an_old_generation_conflicts(self, status: TaskStatus) -> None:
        """A double click: the first retry re-armed generation 4 as 5 (and it may have failed again)."""
        s = snap(status=status, generation=5, document_generation=5)
        d = decide_enqueue(s, EnqueueRequest(RequestKind.RETRY, expected_generation=4), NOW, TH)
        assert d.action is Action.CONFLICT and "generation is 5, not 4" in d.reason

    def test_retry_without_a_generation_is_as_before(self) -> None:
        s = snap(status=TaskStatus.FAILED, generation=5, document_generation=5)
        assert decide_enqueue(s, EnqueueRequest(RequestKind.RETRY), NOW, TH).action is Action.ISSUE

    def test_reindex_of_indexed_document_needs_force(self) -> None:
        s = snap(status=TaskStatus.SUCCESS, document_status=DocumentStatus.INDEXED)
        assert decide_enqueue(s, EnqueueRequest(RequestKind.REINDEX), NOW, TH).action is Action.SKIP_INDEXED
        assert decide_enqueue(s, EnqueueRequest(RequestKind.REINDEX, force=True), NOW, TH).action is Action.ISSUE

    def test_reindex_of_failed_document_issues(self) -> None:
        s = snap(status=TaskStatus.FAILED, document_status=DocumentStatus.FAILED)
        assert decide_enqueue(s, EnqueueRequest(RequestKind.REINDEX), NOW, TH).action is Action.ISSUE


class TestSettledTasks:
    """Skips remembered from earlier snapshots: only what no later state can undo."""

    def test_unknown_task_reads_the_database(self) -> None:
        assert SettledTasks().skip(msg()) is None

    @pytest.mark.parametrize("status", [TaskStatus.SUCCESS, TaskStatus.FAILED, TaskStatus.TIMEOUT])
    def test_terminal_generation_is_never_claimable_again(self, status: TaskStatus) -> None:
        settled = SettledTasks()
        settled.learn(snap(status=status, generation=2, document_generation=2))
        assert settled.skip(msg(2)) == Skip(SkipReason.NOT_RUNNABLE)
        assert settled.skip(msg(1)) == Skip(SkipReason.STALE_GENERATION)
        assert settled.skip(msg(3)) is None  # a newer generation (a retry) may be claimable

    @pytest.mark.parametrize("status", [TaskStatus.WAITING, TaskStatus.RETRYING, TaskStatus.RUNNING])
    def test_claimable_task_only_outdates_older_generations(self, status: TaskStatus) -> None:
        settled = SettledTasks()
        settled.learn(snap(status=status, generation=3, document_generation=3))
        assert settled.skip(msg(3)) is None
        assert settled.skip(msg(2)) == Skip(SkipReason.STALE_GENERATION)

    def test_ids_that_disagree_are_left_to_decide_claim(self) -> None:
        settled = SettledTasks()
        settled.learn(snap(status=TaskStatus.SUCCESS))
        assert settled.skip(msg(1, document_id=99)) is None

    def test_knowledge_only_grows(self) -> None:
        settled = SettledTasks()
        settled.learn(snap(status=TaskStatus.SUCCESS, generation=2, document_generation=2))
        settled.learn(snap(status=TaskStatus.WAITING, generation=1, document_generation=1))  # an older read
        assert settled.skip(msg(2)) == Skip(SkipReason.NOT_RUNNABLE)

    def test_capacity_forgets_the_oldest(self) -> None:
        settled = SettledTasks(capacity=2)
        for t in (1, 5, 6):
            settled.learn(snap(task_id=t, status=TaskStatus.SUCCESS))
        assert settled.skip(msg(1)) is None
        assert settled.skip(msg(1, task_id=6)) == Skip(SkipReason.NOT_RUNNABLE)

    @pytest.mark.parametrize("seen", [TaskStatus.SUCCESS, TaskStatus.FAILED, TaskStatus.TIMEOUT, TaskStatus.WAITING])
    @pytest.mark.parametrize("later", list(TaskStatus))
    @pytest.mark.parametrize(("g_seen", "g_later", "g_msg"), [(1, 1, 1), (2, 3, 2), (2, 3, 1), (2, 2, 1), (1, 2, 1)])
    def test_never_contradicts_a_later_snapshot(self, seen: TaskStatus, later: TaskStatus, g_seen: int, g_later: int,
                                                g_msg: int) -> None:
        """A remembered skip is a skip on every later state the rules allow: generations only
        grow, and the same generation never leaves a terminal status."""
        if g_later == g_seen and seen in (TaskStatus.SUCCESS, TaskStatus.FAILED, TaskStatus.TIMEOUT) and later != seen:
            return  # not a reachable later state
        settled = SettledTasks()
        settled.learn(snap(status=seen, generation=g_seen, document_generation=g_seen))
        remembered = settled.skip(msg(g_msg))
        if remembered is not None:
            assert isinstance(decide_claim(msg(g_msg), snap(status=later, generation=g_later,
                                                            document_generation=g_later)), Skip)
