"""The progress write throttle and the embedded share (pure)."""

from __future__ import annotations

import itertools

from task_service.indexing.progress import ProgressThrottle, Stage, embedded_share


def test_first_report_is_written_then_progress_at_most_once_per_interval() -> None:
    t = ProgressThrottle(min_interval_s=1.0)
    assert t.should_write(100.0, Stage.EMBEDDING, 0.0)
    # a burst of batches within the second: none written
    assert [t.should_write(100.0 + i / 10, Stage.EMBEDDING, i / 20) for i in range(1, 10)] == [False] * 9
    assert t.should_write(101.0, Stage.EMBEDDING, 0.5)  # a second later: the latest value goes out
    assert not t.should_write(101.5, Stage.EMBEDDING, 0.6)
    assert t.should_write(102.1, Stage.EMBEDDING, 0.7)


def test_a_stage_change_is_written_at_once_but_a_repeat_never() -> None:
    t = ProgressThrottle(min_interval_s=1.0)
    t.written(0.0, Stage.DOWNLOADING, 0.0)  # the claim wrote it
    assert not t.should_write(5.0, Stage.DOWNLOADING, 0.0)  # nothing new, however late
    assert t.should_write(0.1, Stage.PARSING, 0.0)
    assert t.should_write(0.2, Stage.CHUNKING, 0.0)
    assert t.should_write(0.3, Stage.EMBEDDING, 0.0)
    assert not t.should_write(0.4, Stage.EMBEDDING, 0.3)
    assert t.should_write(0.5, Stage.WRITING, 1.0)


def test_writes_per_second_are_bounded_over_a_long_run() -> None:
    """10,000 batches reported over 60 s: about one write per second, never two in one interval."""
    t = ProgressThrottle(min_interval_s=1.0)
    times = [i * 0.006 for i in range(10_000)]
    written = [now for i, now in enumerate(times) if t.should_write(now, Stage.EMBEDDING, i / 10_000)]
    assert 55 <= len(written) <= 61
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(written))


def test_embedded_share_is_clamped() -> None:
    assert embedded_share(0, 10) == 0.0
    assert embedded_share(64, 100) == 0.64
    assert embedded_share(128, 100) == 1.0  # the last batch overshoots
    assert embedded_share(0, 0) == 1.0
