"""Retry policy for transient failures inside a task (tenacity; pure configuration).

Only :class:`shared.domain.errors.TransientError` is retried, with exponential backoff and full jitter
(tenacity ``wait_exponential_jitter``; cf. AWS Architecture Blog, "Exponential Backoff And
Jitter", 2015). Permanent errors and fencing propagate at once.
"""

from __future__ import annotations

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from shared.domain.errors import TransientError


def transient_retrying(attempts: int, initial_s: float, max_s: float) -> AsyncRetrying:
    """An ``AsyncRetrying`` for ``async for attempt in ...: with attempt: ...`` loops.

    ``attempts`` counts the first try; delays grow ``initial_s·2^k`` plus jitter, capped at
    ``max_s`` seconds. The last TransientError is re-raised unchanged when attempts run out.
    """
    return AsyncRetrying(
        retry=retry_if_exception_type(TransientError),
        stop=stop_after_attempt(attempts),
        wait=wait_exponential_jitter(initial=initial_s, max=max_s, jitter=initial_s),
        reraise=True,
    )
