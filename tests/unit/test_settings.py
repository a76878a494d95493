from __future__ import annotations

import pytest

from shared.domain.errors import ConfigurationError
from shared.settings import WorkerSettings


def test_defaults_pass_the_consumer_timeout_guard() -> None:
    s = WorkerSettings(_env_file=None)  # type: ignore[call-arg]
    assert s.prefetch * s.task_hard_limit_s < s.consumer_timeout_s


def test_prefetch_times_hard_limit_over_consumer_timeout_refuses_to_start() -> None:
    with pytest.raises(ConfigurationError, match="PREFETCH"):
        WorkerSettings(_env_file=None, prefetch=2, task_hard_limit_s=1500)  # type: ignore[call-arg]


def test_renew_must_be_below_ttl() -> None:
    with pytest.raises(ConfigurationError, match="LOCK_RENEW_S"):
        WorkerSettings(_env_file=None, lock_ttl_s=10, lock_renew_s=10)  # type: ignore[call-arg]
