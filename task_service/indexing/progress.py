"""Live progress of an indexing run: the stages and the write throttle (pure; no I/O).

A run goes DOWNLOADING → PARSING (→ OCR, while scanned pages are OCRed: progress = pages done /
pages to OCR) (→ CHUNKING, when the parser reports it) (→ MODEL_WAIT, while another unit holds the
worker's model turn) → EMBEDDING → WRITING; ``progress`` is the share of the run's chunks embedded
(0.0 before EMBEDDING, 1.0 from WRITING on). The worker asks :class:`ProgressThrottle` before each
write so that a task row is written at most about once per second: a stage change is always written
(at most seven per run, and they are what a person watches), a progress change within a stage only
when ``min_interval_s`` has passed since the last write. Skipped values are not queued: the next
allowed write carries the latest one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Stage(StrEnum):
    DOWNLOADING = "DOWNLOADING"
    PARSING = "PARSING"
    OCR = "OCR"  # scanned pages / images being OCRed; progress = pages done / pages to OCR
    CHUNKING = "CHUNKING"
    MODEL_WAIT = "MODEL_WAIT"  # chunked, waiting for the worker's model turn (another unit embeds)
    EMBEDDING = "EMBEDDING"
    WRITING = "WRITING"


def embedded_share(done: int, total: int) -> float:
    """``done / total`` clamped to 0..1 (1.0 when there is nothing to embed)."""
    if total <= 0:
        return 1.0
    return min(1.0, max(0.0, done / total))


@dataclass
class ProgressThrottle:
    """Decides which ``(stage, progress)`` reports of one run reach the database.

    ``should_write(now, stage, progress)``: ``now`` is a monotonic clock in seconds. Returns True
    (and records the write) for the first report, for a new stage, and for a new progress value
    once ``min_interval_s`` has passed since the last write; False for everything else,
    including a report equal to the last one written.
    """

    min_interval_s: float = 1.0
    _last_at: float | None = None
    _last: tuple[Stage, float] | None = None

    def written(self, now: float, stage: Stage, progress: float) -> None:
        """Record a write made elsewhere (the claim writes DOWNLOADING, 0.0)."""
        self._last_at, self._last = now, (stage, progress)

    def should_write(self, now: float, stage: Stage, progress: float) -> bool:
        last = self._last
        if last is not None and last == (stage, progress):
            return False
        due = (
            last is None
            or last[0] != stage
            or self._last_at is None
            or now - self._last_at >= self.min_interval_s
        )
        if due:
            self._last_at, self._last = now, (stage, progress)
        return due
