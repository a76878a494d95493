"""Fair dispatch across users (pure): which held outbox rows to release now.

A user has at most ``k`` *dispatched* units: their message released to the broker, or running.
A unit is ``(task_id, part)``: a task on the single path (``part`` None), or one part of a split
task (ARCHITECTURE.md "Flow 3"); a split task itself holds no slot, each of its parts not DONE
does, so another user's small document waits for one part, not for a whole book.
The rest wait in PostgreSQL with their outbox row held. As slots free up the relay releases
held rows round-robin across users: one row of each user in turn (users ordered by their oldest
held row), then a second of each, ..., each user stopping at ``k`` dispatched tasks, the whole
pass stopping at ``limit`` rows. Within one user rows go oldest first (FIFO).

A row whose unit is already dispatched (new content or a re-publish of a running task or part) or
gone (document deleted, split dropped, part DONE) takes no slot: it is released at once, whatever
the counts.

The I/O side (``shared.adapters.postgres.repo.outbox.release_held_outbox``) reads the candidates and counts under one
advisory lock and applies the result in the same transaction.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class HeldRow:
    """A held outbox row: ``outbox_id`` (release order within a user), its unit ``(task_id,
    part)`` (``part`` None: a document message) and ``user_id``; ``needs_slot`` is False when
    its unit is already dispatched or gone."""

    outbox_id: int
    task_id: int
    user_id: int
    needs_slot: bool = True
    part: int | None = None

    @property
    def unit(self) -> tuple[int, int | None]:
        """What holds the slot: the task, or one of its parts."""
        return (self.task_id, self.part)


def choose_releases(held: Sequence[HeldRow], in_flight: Mapping[int, int], k: int, limit: int) -> list[HeldRow]:
    """The rows to release now, in round-robin order.

    ``held``: candidate rows (any order); ``in_flight``: dispatched units per user (a missing
    user has 0); ``k`` ≥ 1: the per-user cap; ``limit`` ≥ 0: rows released at most.
    A unit released here takes its user's slot once; its further rows in ``held`` take none.
    Raises ValueError for ``k < 1`` or ``limit < 0``.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if limit < 0:
        raise ValueError(f"limit must be non-negative, got {limit}")
    queues: dict[int, deque[HeldRow]] = {}
    for row in sorted(held, key=lambda r: r.outbox_id):
        queues.setdefault(row.user_id, deque()).append(row)
    used = {user: in_flight.get(user, 0) for user in queues}
    dispatched_units: set[tuple[int, int | None]] = set()
    chosen: list[HeldRow] = []
    # users in order of their oldest held row (dicts keep insertion order)
    active = list(queues)
    while active and len(chosen) < limit:
        still: list[int] = []
        for user in active:
            if len(chosen) >= limit:
                break
            queue = queues[user]
            row = queue[0]
            free = not row.needs_slot or row.unit in dispatched_units
            if not free and used[user] >= k:
                continue  # this user is at its cap: its rows wait (FIFO: the later ones too)
            queue.popleft()
            chosen.append(row)
            if not free:
                used[user] += 1
                dispatched_units.add(row.unit)
            if queue:
                still.append(user)
        active = still
    return chosen
