"""Fair dispatch (pure): round-robin release across users under a per-user cap K."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.domain.dispatch import HeldRow, choose_releases


def rows(user: int, *ids: int, task_base: int | None = None) -> list[HeldRow]:
    base = user * 1000 if task_base is None else task_base
    return [HeldRow(i, base + i, user) for i in ids]


def ids(chosen: list[HeldRow]) -> list[int]:
    return [r.outbox_id for r in chosen]


def test_round_robin_across_users_oldest_user_first() -> None:
    held = rows(1, 1, 2, 3, 4) + rows(2, 5, 6) + rows(3, 7)
    assert ids(choose_releases(held, {}, k=2, limit=100)) == [1, 5, 7, 2, 6]


def test_a_user_at_its_cap_waits_and_others_pass() -> None:
    held = rows(1, 1, 2, 3) + rows(2, 4)
    assert ids(choose_releases(held, {1: 2}, k=2, limit=100)) == [4]
    assert ids(choose_releases(held, {1: 1, 2: 2}, k=2, limit=100)) == [1]


def test_limit_cuts_the_pass_in_round_robin_order() -> None:
    held = rows(1, 1, 2, 3) + rows(2, 4, 5)
    assert ids(choose_releases(held, {}, k=3, limit=3)) == [1, 4, 2]
    assert choose_releases(held, {}, k=3, limit=0) == []


def test_rows_needing_no_slot_go_out_even_at_the_cap() -> None:
    free = HeldRow(1, 10, 1, needs_slot=False)  # task already dispatched, or gone
    held = [free, *rows(1, 2, 3)]
    assert ids(choose_releases(held, {1: 2}, k=2, limit=100)) == [1]


def test_fifo_within_a_user_a_blocked_head_holds_the_rest() -> None:
    held = [HeldRow(1, 11, 1), HeldRow(2, 12, 1, needs_slot=False)]
    assert choose_releases(held, {1: 2}, k=2, limit=100) == []


def test_a_second_row_of_a_task_released_in_the_same_pass_takes_no_slot() -> None:
    held = [HeldRow(1, 7, 1), HeldRow(2, 7, 1), HeldRow(3, 8, 1)]
    assert ids(choose_releases(held, {}, k=1, limit=100)) == [1, 2]


def test_input_order_does_not_matter() -> None:
    held = rows(2, 5, 6) + rows(1, 1, 2)
    assert ids(choose_releases(list(reversed(held)), {}, k=1, limit=100)) == [1, 5]


@pytest.mark.parametrize(("k", "limit"), [(0, 1), (1, -1)])
def test_bad_arguments_are_refused(k: int, limit: int) -> None:
    with pytest.raises(ValueError):
        choose_releases([], {}, k=k, limit=limit)


@given(
    st.lists(st.tuples(st.integers(1, 4), st.integers(1, 30), st.booleans()), max_size=60, unique_by=lambda t: t[1]),
    st.dictionaries(st.integers(1, 4), st.integers(0, 5)),
    st.integers(1, 4),
    st.integers(0, 40),
)
def test_never_more_than_k_per_user_and_each_row_once(
    spec: list[tuple[int, int, bool]], in_flight: dict[int, int], k: int, limit: int
) -> None:
    held = [HeldRow(i, 100 + i, u, needs) for u, i, needs in spec]
    chosen = choose_releases(held, in_flight, k, limit)
    assert len(chosen) <= limit
    assert len({r.outbox_id for r in chosen}) == len(chosen)
    for user in {u for u, _, _ in spec}:
        taken = [r for r in chosen if r.user_id == user and r.needs_slot]
        assert not taken or in_flight.get(user, 0) + len(taken) <= k
        mine = sorted(r.outbox_id for r in held if r.user_id == user)
        got = [r.outbox_id for r in chosen if r.user_id == user]
        assert got == mine[: len(got)], "FIFO within a user"
    # work-conserving: a user left with a slot-needing head has no free slot (or the limit was hit)
    if len(chosen) < limit:
        for user in {u for u, _, _ in spec}:
            left = sorted((r for r in held if r.user_id == user and r not in chosen), key=lambda r: r.outbox_id)
            if left and left[0].needs_slot:
                used = in_flight.get(user, 0) + sum(1 for r in chosen if r.user_id == user and r.needs_slot)
                assert used >= k


def test_each_part_of_a_split_task_is_its_own_unit() -> None:
    parts = [HeldRow(i, 7, 1, part=i - 1) for i in range(1, 5)]  # task 7's parts 0..3
    other = HeldRow(5, 9, 2)
    assert ids(choose_releases([*parts, other], {}, k=2, limit=100)) == [1, 5, 2]


def test_a_second_row_of_the_same_part_takes_no_second_slot() -> None:
    held = [HeldRow(1, 7, 1, part=0), HeldRow(2, 7, 1, part=0), HeldRow(3, 7, 1, part=1)]
    assert ids(choose_releases(held, {}, k=1, limit=100)) == [1, 2]


def test_another_users_document_waits_for_one_part_not_the_book() -> None:
    """User 1 has K parts dispatched; user 2's upload goes out at once: its slot is free."""
    book = [HeldRow(i, 7, 1, part=i + 2) for i in range(1, 20)]
    assert ids(choose_releases([*book, HeldRow(100, 9, 2)], {1: 2}, k=2, limit=100)) == [100]
