"""The two queues, as the use cases see them: changes to apply (FIFO, per image in order) and the
delayed follow-up work of a rollout (verification requests, with a delay)."""

from __future__ import annotations

from typing import Protocol

from tagpin.domain.messages import Change, Verification

MAX_DELAY_S = (
    900  # the longest delay one message can wait (SQS DelaySeconds); longer waits come back and wait again
)


class ChangeQueue(Protocol):
    def send(self, change: Change) -> None: ...


class VerificationQueue(Protocol):
    def send(self, verification: Verification, delay_s: int) -> None: ...
