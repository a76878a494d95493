from __future__ import annotations

import pytest

from shared.domain.errors import ConfigurationError
from shared.settings import WorkerSettings


def test_defaults_pass_the_consumer_timeout_guard() -> None:
    s = WorkerSettings(_env_file=None)  # type: ignore[call-arg]
    assert s.prefetch * (s.task_budget_base_s + (s.split_min_chunks - 1) * s.task_budget_per_chunk_s) \
        < s.consumer_timeout_s


def test_the_hard_limit_is_gone() -> None:
    """A document is no longer bounded by one wall clock (issue 31): the setting is not read."""
    assert "task_hard_limit_s" not in WorkerSettings.model_fields


def test_renew_must_be_below_ttl() -> None:
    with pytest.raises(ConfigurationError, match="LOCK_RENEW_S"):
        WorkerSettings(_env_file=None, lock_ttl_s=10, lock_renew_s=10)  # type: ignore[call-arg]


def test_defaults_pass_the_unit_length_guard() -> None:
    s = WorkerSettings(_env_file=None)  # type: ignore[call-arg]
    assert (s.split_min_chunks, s.part_chunks, s.embed_stall_timeout_s) == (512, 256, 120.0)
    assert (s.task_budget_base_s, s.task_budget_per_chunk_s) == (300.0, 0.5)


@pytest.mark.parametrize("override", [
    {"prefetch": 4},  # 4 x 555.5 s
    {"split_min_chunks": 5000},  # a document below the threshold may embed 4,999 chunks in one delivery
    {"part_chunks": 3000},
    {"task_budget_base_s": 1000.0},
    {"task_budget_per_chunk_s": 2.0},
])
def test_a_unit_longer_than_the_consumer_timeout_refuses_to_start(override: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError, match="CONSUMER_TIMEOUT_S"):
        WorkerSettings(_env_file=None, **override)  # type: ignore[call-arg]


def test_a_longer_consumer_timeout_admits_longer_units() -> None:
    s = WorkerSettings(_env_file=None, prefetch=4, consumer_timeout_s=3600)  # type: ignore[call-arg]
    assert s.prefetch == 4
