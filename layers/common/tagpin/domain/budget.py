"""A time budget: how long an invocation may still start new work.

Lambda stops a function at its timeout, failing every record of the batch that is not done. A
handler therefore starts a record (and the applier a target) only while more than ``reserve_ms``
is left, the longest one step can take (a cluster call times out after its read timeout); what
is left over is reported as failed records, which SQS delivers again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


class OutOfTime(Exception):
    """Not started: too little time was left in the invocation. Retried by the queue."""


@dataclass(frozen=True)
class Budget:
    remaining_ms: Callable[[], int]
    reserve_ms: int

    def exhausted(self) -> bool:
        return self.remaining_ms() < self.reserve_ms

    def check(self, what: str) -> None:
        if self.exhausted():
            raise OutOfTime(
                f"{what}: not started, {self.remaining_ms()} ms left (needs {self.reserve_ms} ms)"
            )

    def left_s(self) -> float:
        """Seconds a step may still wait before the reserve is reached (0 when it is)."""
        return max(0, self.remaining_ms() - self.reserve_ms) / 1000


UNLIMITED = Budget(lambda: 2**31, 0)
