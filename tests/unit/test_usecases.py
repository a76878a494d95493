"""The use cases over in-memory fakes: outcomes, domain errors, races, the in-flight cap."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from shared import usecases
from shared.domain.errors import (
    DatabaseUnavailableError,
    EnqueueConflict,
    EnqueueContention,
    InFlightLimitExceeded,
    PendingVersionNotFound,
    StorageUnavailableError,
    TaskNotFound,
)
from shared.domain.fencing import Action, EnqueueRequest, RequestKind, TaskSnapshot
from shared.domain.messages import GENERATION_HEADER
from shared.domain.records import Claim, NewContent
from shared.domain.states import TaskStatus
from tests.fakes import STALE, FakeDeadLetter, FakeObjectStore, FakePublisher, FakeReleasedObjects, FakeStore

CONTENT = NewContent("b.txt", "text/plain", 5, "ff", "new-key")


def deps(store: FakeStore | None = None, *, cap: int = 20, publisher: FakePublisher | None = None,
         objects: FakeObjectStore | None = None) -> usecases.Deps:
    store = store or FakeStore()
    objects = objects or FakeObjectStore()
    return usecases.Deps(
        store=store, objects=objects, publisher=publisher if publisher is not None else FakePublisher(),
        limits=usecases.Limits(max_in_flight_per_user=cap, retry_after_s=7, stale=STALE),
        released=FakeReleasedObjects(store, objects),
    )


async def test_upload_creates_rows_and_publishes_once() -> None:
    d = deps()
    msg = await usecases.create_document(d, user_id=1, kb_id=2, obj=CONTENT)
    store, pub = d.store, d.publisher
    assert isinstance(store, FakeStore) and isinstance(pub, FakePublisher)
    assert msg.generation == 1 and store.tasks[msg.task_id].status is TaskStatus.WAITING
    assert [body for body, *_ in pub.sent] == [msg.to_json()]
    assert [headers for *_, headers in pub.sent] == [{GENERATION_HEADER: msg.generation}]  # from the row, not parsed
    assert pub.correlation_ids == [str(msg.task_id)]
    await usecases.flush_marks()  # the mark is written off the request's path
    assert store.published() == [True]


async def test_upload_over_the_cap_is_refused_and_its_object_removed() -> None:
    store = FakeStore()
    store.add_document(user_id=1)
    objects = FakeObjectStore({"new-key": b"x"})
    with pytest.raises(InFlightLimitExceeded) as err:
        await usecases.create_document(deps(store, cap=1, objects=objects), user_id=1, kb_id=1, obj=CONTENT)
    assert (err.value.limit, err.value.retry_after_s, err.value.before_body) == (1, 7, False)
    assert objects.removed == ["new-key"] and len(store.tasks) == 1


async def test_early_check_refuses_before_the_body_unless_the_task_is_already_in_flight() -> None:
    store = FakeStore()
    msg = store.add_document(user_id=1)
    with pytest.raises(InFlightLimitExceeded) as err:
        await usecases.check_in_flight(deps(store, cap=1), 1)
    assert err.value.before_body
    await usecases.check_in_flight(deps(store, cap=1), 1, msg.task_id)  # re-arming adds no work


async def test_broker_down_leaves_the_row_in_the_outbox() -> None:
    d = deps(publisher=FakePublisher(fail=True))
    await usecases.create_document(d, user_id=1, kb_id=1, obj=CONTENT)
    assert isinstance(d.store, FakeStore) and d.store.published() == [False]


async def test_no_broker_connection_leaves_the_row_in_the_outbox() -> None:
    d = deps()
    d.publisher = None
    await usecases.create_document(d, user_id=1, kb_id=1, obj=CONTENT)
    assert isinstance(d.store, FakeStore) and d.store.published() == [False]


async def test_retry_of_a_failed_task_issues_a_new_generation() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.FAILED)
    out = await usecases.retry(deps(store), msg.task_id)
    assert out.generation == 2
    task = store.tasks[msg.task_id]
    assert (task.status, task.generation, task.retry_count) == (TaskStatus.RETRYING, 2, 1)


async def test_retry_of_a_running_task_is_a_conflict_with_its_status() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.RUNNING)
    with pytest.raises(EnqueueConflict) as err:
        await usecases.retry(deps(store), msg.task_id)
    assert err.value.status == "RUNNING" and err.value.reason


async def test_retry_past_the_limit_needs_force() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.FAILED, retry_count=3)
    with pytest.raises(EnqueueConflict):
        await usecases.retry(deps(store), msg.task_id)
    assert (await usecases.retry(deps(store), msg.task_id, force=True)).generation == 2


async def test_unknown_task_is_not_found() -> None:
    with pytest.raises(TaskNotFound):
        await usecases.reindex(deps(), 999)


async def test_retry_over_the_cap_is_refused() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.FAILED)
    store.add_document(status=TaskStatus.WAITING)
    with pytest.raises(InFlightLimitExceeded):
        await usecases.retry(deps(store, cap=1), msg.task_id)
    assert store.tasks[msg.task_id].status is TaskStatus.FAILED


async def test_reindex_of_an_indexed_document_answers_without_work_unless_forced() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.SUCCESS)
    assert (await usecases.reindex(deps(store), msg.task_id)).action is not Action.ISSUE
    assert (await usecases.reindex(deps(store), msg.task_id, force=True)).action is Action.ISSUE


async def test_a_stale_waiting_task_is_taken_over() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.WAITING)
    store.tasks[msg.task_id].update_time = datetime.now(UTC) - timedelta(hours=1)
    result = await usecases.reindex(deps(store), msg.task_id)
    assert result.action is Action.ISSUE and result.message is not None and result.message.generation == 2


async def test_replace_content_failing_removes_the_new_object() -> None:
    objects = FakeObjectStore({"new-key": b"x"})
    with pytest.raises(TaskNotFound):
        await usecases.replace_content(deps(objects=objects), 42, CONTENT)
    assert objects.removed == ["new-key"]


async def test_database_down_after_the_upload_was_stored_removes_its_object() -> None:
    store = FakeStore()
    store.fail_next["create_document"] = DatabaseUnavailableError("down")
    objects = FakeObjectStore({"new-key": b"x"})
    with pytest.raises(DatabaseUnavailableError):
        await usecases.create_document(deps(store, objects=objects), user_id=1, kb_id=1, obj=CONTENT)
    assert objects.removed == ["new-key"] and store.tasks == {}


async def test_database_down_while_replacing_content_removes_the_new_object() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.SUCCESS)
    store.fail_next["issue_generation"] = DatabaseUnavailableError("down")
    objects = FakeObjectStore({"new-key": b"x"})
    with pytest.raises(DatabaseUnavailableError):
        await usecases.replace_content(deps(store, objects=objects), msg.task_id, CONTENT)
    assert objects.removed == ["new-key"] and store.tasks[msg.task_id].generation == 1


async def test_replace_content_of_a_running_task_fences_it_out() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.RUNNING, attempt=1)
    out = await usecases.replace_content(deps(store), msg.task_id, CONTENT)
    assert out.generation == 2 and store.documents[msg.document_id].content == CONTENT
    assert not await store.claim_is_current(Claim(msg.task_id, 1, 1))


async def test_a_lost_race_is_re_read_and_decided_again() -> None:
    """Another request moves the task between our read and our write: we re-read, see its
    new generation, and answer EXISTING instead of issuing a second one."""
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.FAILED)
    rival = deps(store)

    async def rival_first(_: TaskSnapshot) -> None:
        store.before_issue = None
        await usecases.retry(rival, msg.task_id)

    store.before_issue = rival_first
    result = await usecases.request_enqueue(deps(store), msg.task_id, EnqueueRequest(RequestKind.RETRY))
    assert result.action is not Action.ISSUE
    assert store.tasks[msg.task_id].generation == 2 and len(store.outbox) == 1


async def test_concurrent_retries_make_one_transition() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.FAILED)
    gate = asyncio.Event()

    async def everyone_reads_first(_: TaskSnapshot) -> None:
        await gate.wait()

    store.before_issue = everyone_reads_first
    racers = [asyncio.ensure_future(usecases.request_enqueue(deps(store), msg.task_id,
                                                             EnqueueRequest(RequestKind.RETRY))) for _ in range(5)]
    await asyncio.sleep(0)
    gate.set()
    results = await asyncio.gather(*racers)
    assert Counter(r.action for r in results)[Action.ISSUE] == 1
    assert len(store.outbox) == 1


async def test_a_task_that_keeps_changing_is_contention() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.FAILED)

    async def move(_: TaskSnapshot) -> None:
        task = store.tasks[msg.task_id]
        task.status = TaskStatus.TIMEOUT if task.status is TaskStatus.FAILED else TaskStatus.FAILED

    store.before_issue = move
    with pytest.raises(EnqueueContention):
        await usecases.request_enqueue(deps(store), msg.task_id, EnqueueRequest(RequestKind.RETRY))


async def test_delete_removes_rows_then_the_object_and_survives_storage_down() -> None:
    store = FakeStore()
    msg = store.add_document()
    await usecases.delete_document(deps(store, objects=FakeObjectStore(down=True)), msg.document_id)
    assert msg.document_id not in store.documents and msg.task_id not in store.tasks
    assert store.released == ["k1"]  # storage down: left queued for the sweep
    objects = FakeObjectStore()
    await usecases.delete_document(deps(store, objects=objects), msg.document_id)  # already gone
    assert objects.removed == [] and store.released == ["k1"]


async def test_drop_pending_removes_its_object_or_is_not_found() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.SUCCESS)
    with pytest.raises(PendingVersionNotFound):
        await usecases.drop_pending(deps(store), msg.document_id)
    store.documents[msg.document_id].pending = CONTENT
    objects = FakeObjectStore()
    await usecases.drop_pending(deps(store, objects=objects), msg.document_id)
    assert objects.removed == ["new-key"] and store.documents[msg.document_id].generation == 2


async def test_new_content_counts_toward_the_cap_even_over_an_active_task() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.RUNNING)
    objects = FakeObjectStore({"new-key": b"x"})
    with pytest.raises(InFlightLimitExceeded):
        await usecases.replace_content(deps(store, cap=1, objects=objects), msg.task_id, CONTENT)
    assert objects.removed == ["new-key"]


async def test_retry_naming_an_old_generation_is_a_conflict() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.FAILED, generation=3)
    with pytest.raises(EnqueueConflict, match="generation is 3, not 2"):
        await usecases.retry(deps(store), msg.task_id, expected_generation=2)
    assert (await usecases.retry(deps(store), msg.task_id, expected_generation=3)).generation == 4


async def test_storage_down_while_discarding_is_logged_not_raised() -> None:
    await usecases.discard_object(deps(objects=FakeObjectStore(down=True)), "k")
    with pytest.raises(StorageUnavailableError):
        await FakeObjectStore(down=True).remove("k")


async def test_dlq_replay_goes_through_the_retry_use_case() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.FAILED, retry_count=3)
    store.dead_letters[1] = FakeDeadLetter(msg.task_id)
    store.dead_letters[2] = FakeDeadLetter(None)
    pub = FakePublisher()
    d = deps(store, publisher=pub)
    assert await usecases.replay_dead_letter(d, 1) == {"replayed": True, "task_id": msg.task_id, "generation": 2}
    assert len(pub.sent) == 1 and store.dead_letters[1].replayed
    assert (await usecases.replay_dead_letter(d, 1))["detail"] == "no such pending dead letter"
    assert "not a valid index message" in str((await usecases.replay_dead_letter(d, 2))["detail"])


async def test_dlq_replay_respects_the_cap_and_reports_deleted_tasks() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.FAILED)
    store.add_document(status=TaskStatus.RUNNING)
    store.dead_letters[1] = FakeDeadLetter(msg.task_id)
    with pytest.raises(InFlightLimitExceeded):
        await usecases.replay_dead_letter(deps(store, cap=1), 1)
    assert not store.dead_letters[1].replayed
    store.dead_letters[3] = FakeDeadLetter(12345)
    assert (await usecases.replay_dead_letter(deps(store), 3))["detail"] == "task no longer exists (document deleted)"


async def test_dlq_replay_of_a_running_task_reports_its_status() -> None:
    store = FakeStore()
    msg = store.add_document(status=TaskStatus.RUNNING)
    store.dead_letters[1] = FakeDeadLetter(msg.task_id)
    out = await usecases.replay_dead_letter(deps(store), 1)
    assert out["replayed"] is False and out["task_status"] == "RUNNING"
