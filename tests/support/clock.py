"""A clock the test moves: the ``clock``/``monotonic`` callables the use cases and adapters take."""

from __future__ import annotations

import threading


class FakeClock[T: (int, float)]:
    """Stands in for ``time.monotonic``/``time.time`` (seconds, float) and for the use cases' epoch-ms
    clocks (int). Each call answers ``now``, then moves it on by ``step``; with no step, time stands
    still until the test moves it (``advance``, or setting ``now``). Thread-safe.

    ``FakeClock(1000.0)``: monotonic seconds, moved by hand.
    ``FakeClock(1_800_000_000_000, step=1_000)``: epoch ms, one second later on every call.
    """

    def __init__(self, start: T, *, step: T | None = None) -> None:
        self.now: T = start
        self.step: T = type(start)(0) if step is None else step
        self._lock = threading.Lock()

    def __call__(self) -> T:
        with self._lock:
            now = self.now
            self.now = now + self.step
            return now

    def advance(self, by: T) -> None:
        with self._lock:
            self.now = self.now + by
