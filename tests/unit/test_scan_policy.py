"""The scanner's decisions on parts of a split task (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.domain.scan_policy import ScanAction, ScanThresholds, decide_part_scan

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
TH = ScanThresholds(heartbeat_timeout=timedelta(seconds=300), requeue_after=timedelta(seconds=600))


def ago(s: float) -> datetime:
    return NOW - timedelta(seconds=s)


def test_a_silent_running_part_is_rearmed() -> None:
    assert decide_part_scan("RUNNING", True, ago(301), NOW, TH).action is ScanAction.REARM
    assert decide_part_scan("RUNNING", True, ago(299), NOW, TH).action is ScanAction.NONE


def test_a_dispatched_waiting_part_untouched_is_republished() -> None:
    assert decide_part_scan("WAITING", True, ago(601), NOW, TH).action is ScanAction.REPUBLISH
    assert decide_part_scan("WAITING", True, ago(599), NOW, TH).action is ScanAction.NONE


@pytest.mark.parametrize("age", [0, 601, 100_000])
def test_a_held_part_is_the_relays(age: float) -> None:
    assert decide_part_scan("WAITING", False, ago(age), NOW, TH).action is ScanAction.NONE


def test_a_done_part_is_left_alone() -> None:
    assert decide_part_scan("DONE", True, ago(100_000), NOW, TH).action is ScanAction.NONE
