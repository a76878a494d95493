"""The parser child's resource limits (:class:`SandboxLimits`; picklable, sent to the child)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared.settings import WorkerSettings


GIB = 1024**3
MIB = 1024**2


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of the parser child; picklable."""

    memory_bytes: int = 2 * GIB
    cpu_s: int = 120
    timeout_s: float = 180.0
    start_timeout_s: float = 120.0

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> SandboxLimits:
        return cls(
            memory_bytes=s.parse_memory_limit_mb * MIB,
            cpu_s=s.parse_cpu_limit_s,
            timeout_s=s.parse_timeout_s,
            start_timeout_s=s.parse_start_timeout_s,
        )

    @property
    def memory_text(self) -> str:
        if self.memory_bytes % GIB == 0:
            return f"{self.memory_bytes // GIB} GiB"
        return f"{self.memory_bytes / MIB:,.0f} MiB"
