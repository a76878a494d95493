"""Property-based model of deliver / crash / pause / lock expiry / redeliver / duplicate publish /
new content over the pure claim and fence decisions (the database is modelled by its conditional
updates: claim bumps ``attempt``, commit requires ``may_commit``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from shared.domain.fencing import (
    Action,
    EnqueueRequest,
    Proceed,
    RequestKind,
    TaskSnapshot,
    decide_claim,
    decide_enqueue,
    may_commit,
)
from shared.domain.messages import IndexMessage
from shared.domain.states import DocumentStatus, TaskStatus
from tests.fakes import STALE

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class _Fixed:
    """Stands in for ``st.DataObject`` when a rule calls another with a chosen worker."""

    def __init__(self, value: int) -> None:
        self.value = value

    def draw(self, _strategy: object) -> int:
        return self.value


@dataclass
class Worker:
    msg: IndexMessage
    attempt: int
    paused: bool = False
    embedded: bool = False


class FencingModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.task = TaskSnapshot(
            task_id=1, document_id=1, kb_id=1, user_id=1, status=TaskStatus.WAITING, generation=1, attempt=0,
            document_generation=1, document_status=DocumentStatus.INDEXING, retry_count=0, max_retry_count=3,
            update_time=NOW,
        )
        self.queue: list[IndexMessage] = [self._msg(1)]
        self.workers: dict[int, Worker] = {}
        self.lock_holder: int | None = None
        self.visible_generation: int | None = None  # generation of the chunk set readers see
        self.chunk_sets_written: dict[int, int] = {}  # generation -> commits
        self.max_generation_seen = 1
        self.next_worker = 0

    def _msg(self, gen: int) -> IndexMessage:
        return IndexMessage(task_id=1, document_id=1, kb_id=1, user_id=1, generation=gen)

    # ---------------------------------------------------------------- broker / worker events

    @precondition(lambda self: self.queue)
    @rule(i=st.integers(0, 10))
    def deliver(self, i: int) -> None:
        msg = self.queue.pop(i % len(self.queue))
        if self.lock_holder is not None:
            self.queue.append(msg)  # delay queue: comes back later
            return
        decision = decide_claim(msg, self.task)
        if not isinstance(decision, Proceed):
            return  # acked as skipped
        wid = self.next_worker
        self.next_worker += 1
        self.task = replace(self.task, status=TaskStatus.RUNNING, attempt=self.task.attempt + 1)
        self.workers[wid] = Worker(msg, self.task.attempt)
        self.lock_holder = wid

    @precondition(lambda self: self._running())
    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        wid = data.draw(st.sampled_from(self._running()))
        w = self.workers.pop(wid)
        allowed = may_commit(self.task, w.msg.generation, w.attempt)
        if allowed:
            # invariant: only the latest claim of the latest generation ever commits
            assert w.msg.generation == self.task.document_generation
            assert w.attempt == self.task.attempt
            self.task = replace(self.task, status=TaskStatus.SUCCESS, document_status=DocumentStatus.INDEXED)
            self.visible_generation = w.msg.generation
            self.chunk_sets_written[w.msg.generation] = self.chunk_sets_written.get(w.msg.generation, 0) + 1
        if self.lock_holder == wid:
            self.lock_holder = None

    @precondition(lambda self: self._running())
    @rule(data=st.data())
    def commit_then_crash_before_ack(self, data: st.DataObject) -> None:
        wid = data.draw(st.sampled_from(self._running()))
        msg = self.workers[wid].msg
        self.commit(_Fixed(wid))  # type: ignore[arg-type]
        self.queue.append(msg)  # the ack never reached the broker

    @precondition(lambda self: self._running())
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        wid = data.draw(st.sampled_from(self._running()))
        w = self.workers.pop(wid)
        self.queue.append(w.msg)  # unacked delivery is requeued
        if self.lock_holder == wid:
            self.lock_holder = None  # lock expires by TTL

    @precondition(lambda self: self._running())
    @rule(data=st.data())
    def pause_past_lock(self, data: st.DataObject) -> None:
        wid = data.draw(st.sampled_from(self._running()))
        self.workers[wid].paused = True
        self.queue.append(self.workers[wid].msg)  # heartbeat lost: broker requeues
        if self.lock_holder == wid:
            self.lock_holder = None

    @precondition(lambda self: any(w.paused for w in self.workers.values()))
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        wid = data.draw(st.sampled_from([k for k, w in self.workers.items() if w.paused]))
        self.workers[wid].paused = False

    @rule()
    def duplicate_publish(self) -> None:
        self.queue.append(self._msg(self.task.generation))

    @rule()
    def new_content(self) -> None:
        d = decide_enqueue(self.task, EnqueueRequest(RequestKind.NEW_CONTENT), NOW, STALE)
        assert d.action is Action.ISSUE and d.new_status is not None
        gen = self.task.document_generation + 1
        self.task = replace(self.task, generation=gen, document_generation=gen, status=d.new_status,
                            document_status=DocumentStatus.INDEXING)
        self.queue.append(self._msg(gen))

    def _running(self) -> list[int]:
        return sorted(k for k, w in self.workers.items() if not w.paused)

    # ---------------------------------------------------------------- invariants

    @invariant()
    def generations_only_grow(self) -> None:
        assert self.task.document_generation >= self.max_generation_seen
        self.max_generation_seen = self.task.document_generation

    @invariant()
    def one_chunk_set_per_generation_at_most_once_visible(self) -> None:
        if self.visible_generation is not None:
            assert self.visible_generation <= self.task.document_generation
        assert all(n == 1 for n in self.chunk_sets_written.values())

    def teardown(self) -> None:
        # drain: resume everyone, deliver everything, let every worker finish
        for _ in range(200):
            for w in self.workers.values():
                w.paused = False
            if self._running():
                self.commit_first()
            elif self.queue:
                self.lock_holder = None if self.lock_holder not in self.workers else self.lock_holder
                self.deliver(0)
            else:
                break
        assert not self.queue and not self.workers
        assert self.visible_generation == self.task.document_generation
        assert self.task.status is TaskStatus.SUCCESS

    def commit_first(self) -> None:
        wid = self._running()[0]
        w = self.workers.pop(wid)
        if may_commit(self.task, w.msg.generation, w.attempt):
            self.task = replace(self.task, status=TaskStatus.SUCCESS, document_status=DocumentStatus.INDEXED)
            self.visible_generation = w.msg.generation
            self.chunk_sets_written[w.msg.generation] = self.chunk_sets_written.get(w.msg.generation, 0) + 1
            assert self.chunk_sets_written[w.msg.generation] == 1
        if self.lock_holder == wid:
            self.lock_holder = None


FencingModel.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
TestFencingModel = FencingModel.TestCase
