from __future__ import annotations

import pytest

from shared.domain.time_budget import (
    consumer_timeout_problem,
    delivery_bound_s,
    largest_unit_chunks,
    task_budget_s,
)


def test_the_budget_grows_with_the_chunks() -> None:
    assert task_budget_s(None, 300.0, 0.5) == 300.0
    assert task_budget_s(0, 300.0, 0.5) == 300.0
    assert task_budget_s(256, 300.0, 0.5) == 428.0
    assert task_budget_s(20_000, 300.0, 0.5) == 10_300.0


def test_negative_chunks_are_refused() -> None:
    with pytest.raises(ValueError):
        task_budget_s(-1, 300.0, 0.5)


def test_the_largest_unit_is_a_document_just_below_the_threshold_or_a_part() -> None:
    assert largest_unit_chunks(512, 256) == 511
    assert largest_unit_chunks(100, 256) == 256


def test_the_delivery_bound_with_the_defaults() -> None:
    assert delivery_bound_s(2, 300.0, 0.5, 512, 256) == 2 * 555.5


def test_the_guard_passes_below_and_names_the_settings_at_or_above() -> None:
    assert consumer_timeout_problem(2, 300.0, 0.5, 512, 256, 1800.0) is None
    problem = consumer_timeout_problem(2, 300.0, 0.5, 512, 256, 1111.0)  # equal: refused
    assert problem is not None and "PREFETCH" in problem and "CONSUMER_TIMEOUT_S" in problem
    assert "SPLIT_MIN_CHUNKS" in problem and "PART_CHUNKS" in problem
