"""Retries and the circuit breaker for registry requests.

- retries with full-jitter exponential backoff on 5xx, timeouts and connection errors; 429
  honours ``Retry-After`` (a wait longer than the policy allows opens the circuit instead);
- a circuit breaker per registry: after ``threshold`` consecutive failed resolutions the
  registry is skipped (``RegistryUnavailable``) until ``cooldown`` has passed.

``RegistryClient`` applies them: the policy to each request (``_send``), the breakers to each
resolution (``aresolve``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from tagpin.ports.registry import RegistryUnavailable

# The longest a registry's Retry-After is taken for: its circuit stays open that long in a warm
# container (a longer or endless one, e.g. 400 digits, is this).
MAX_RETRY_AFTER = 3600.0


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date), at most
    ``MAX_RETRY_AFTER``; None when it is neither."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return min(max(0.0, when - (time.time() if now is None else now)), MAX_RETRY_AFTER)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3  # tries per request, the first included
    base: float = 0.2  # seconds; full jitter: uniform(0, min(cap, base * 2**n))
    cap: float = 5.0
    max_retry_after: float = 30.0  # a longer Retry-After opens the circuit for that long instead

    def backoff(self, attempt: int, rng: Callable[[float, float], float] = random.uniform) -> float:
        return rng(0.0, min(self.cap, self.base * (2**attempt)))


class CircuitBreaker:
    """Per registry: opens after ``threshold`` consecutive failures, for ``cooldown`` seconds,
    then lets requests through again (a failure re-opens it at once)."""

    def __init__(self, threshold: int, cooldown: float, clock: Callable[[], float]) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self.failures = 0
        self.open_until = 0.0
        self.last_error = ""

    def check(self, host: str) -> None:
        if self.open_until > self._clock():
            times = f"{self.failures} time{'s' * (self.failures != 1)}"
            raise RegistryUnavailable(
                f"{host}: skipped, the registry failed {times} in a row "
                f"(last: {self.last_error}); retrying after {self.open_until - self._clock():.0f}s",
                host=host,
            )

    def success(self) -> None:
        self.failures = 0
        self.open_until = 0.0

    def failure(self, error: str, *, open_for: float | None = None) -> None:
        self.failures += 1
        self.last_error = error
        if open_for is not None or self.failures >= self.threshold:
            self.open_until = self._clock() + max(self.cooldown, open_for or 0.0)
