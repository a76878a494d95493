from __future__ import annotations

import itertools

import pytest

from shared.domain.states import ACTIVE, TERMINAL, TRANSITIONS, TaskStatus, can_transition, sources_for

T = TaskStatus


@pytest.mark.parametrize(
    ("src", "dst"),
    [(T.SUCCESS, T.RUNNING), (T.FAILED, T.SUCCESS), (T.TIMEOUT, T.SUCCESS), (T.WAITING, T.SUCCESS),
     (T.RETRYING, T.SUCCESS), (T.SUCCESS, T.FAILED), (T.WAITING, T.TIMEOUT), (T.FAILED, T.RUNNING)],
)
def test_forbidden_transitions(src: TaskStatus, dst: TaskStatus) -> None:
    assert not can_transition(src, dst)
    assert src.value not in sources_for(dst)


@pytest.mark.parametrize(
    ("src", "dst"),
    [(T.WAITING, T.RUNNING), (T.RETRYING, T.RUNNING), (T.RUNNING, T.SUCCESS), (T.RUNNING, T.FAILED),
     (T.RUNNING, T.TIMEOUT), (T.FAILED, T.RETRYING), (T.TIMEOUT, T.RETRYING), (T.SUCCESS, T.WAITING)],
)
def test_allowed_transitions(src: TaskStatus, dst: TaskStatus) -> None:
    assert can_transition(src, dst)
    assert src.value in sources_for(dst)


def test_success_only_from_running() -> None:
    assert sources_for(T.SUCCESS) == ["RUNNING"]


def test_table_is_total_and_terminal_states_only_restart() -> None:
    assert set(TRANSITIONS) == set(TaskStatus)
    for src, dst in itertools.product(TERMINAL, TaskStatus):
        if can_transition(src, dst):
            assert dst not in TERMINAL and dst is not T.RUNNING
    assert ACTIVE.isdisjoint(TERMINAL)


def test_the_sql_status_lists_come_from_the_state_sets() -> None:
    from shared.adapters.postgres.repo import sql as sql_repo
    from shared.domain.states import ACTIVE, CLAIMABLE, TaskStatus, can_transition

    assert sql_repo.sql_in(ACTIVE) == "('RETRYING','RUNNING','WAITING')"
    assert all(can_transition(s, TaskStatus.RUNNING) for s in CLAIMABLE)  # claim_task's WHERE
    assert all(can_transition(s, TaskStatus.FAILED) for s in ACTIVE)  # fail_dead_lettered's WHERE
