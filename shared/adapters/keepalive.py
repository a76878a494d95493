"""TCP keepalive and user timeout for the services' long-lived connections (issue 19: partitions).

A peer that vanishes without a FIN or RST (a partition, a host gone) is noticed by TCP only
through keepalive probes (an idle connection) or ``TCP_USER_TIMEOUT`` (sent data never
acknowledged); the Linux defaults take over two hours and ~15 minutes. README "Guarantees"
gives the timing argument for the defaults.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from shared.settings import CommonSettings


@dataclass(frozen=True)
class Keepalive:
    """TCP keepalive and user timeout of a connection, both ends (seconds; 0: the OS default):
    ``TCP_KEEPALIVE_IDLE_S`` / ``_INTERVAL_S`` / ``_COUNT``, ``TCP_USER_TIMEOUT_S``."""

    idle_s: int
    interval_s: int
    count: int
    user_timeout_s: float

    @classmethod
    def from_settings(cls, s: CommonSettings) -> Keepalive:
        return cls(idle_s=s.tcp_keepalive_idle_s, interval_s=s.tcp_keepalive_interval_s,
                   count=s.tcp_keepalive_count, user_timeout_s=s.tcp_user_timeout_s)

    def socket_options(self) -> dict[int, int]:
        """The ``TCP_*`` socket options (Linux; one the OS lacks is left out), e.g. for redis-py's
        ``socket_keepalive_options``."""
        options = [("TCP_KEEPIDLE", self.idle_s), ("TCP_KEEPINTVL", self.interval_s), ("TCP_KEEPCNT", self.count),
                   ("TCP_USER_TIMEOUT", int(self.user_timeout_s * 1000))]
        return {getattr(socket, name): value for name, value in options if value > 0 and hasattr(socket, name)}

    def server_settings(self) -> dict[str, str]:
        """The PostgreSQL session parameters (``tcp_keepalives_*``, ``tcp_user_timeout`` in ms);
        a zero is left out (the server's default)."""
        values = {"tcp_keepalives_idle": self.idle_s, "tcp_keepalives_interval": self.interval_s,
                  "tcp_keepalives_count": self.count, "tcp_user_timeout": int(self.user_timeout_s * 1000)}
        return {k: str(v) for k, v in values.items() if v > 0}

    def apply(self, sock: socket.socket) -> None:
        """The same on our end of ``sock`` (Linux options; an option the OS lacks is skipped)."""
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in self.socket_options().items():
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
